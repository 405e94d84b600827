#include "kernels/host_memory.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace moeplan::kernels {

namespace {

HostAllocator& state() {
  static HostAllocator a{false, "C library defaults"};
  return a;
}

}  // namespace

HostAllocator configure_host_allocator() {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  // 32 MiB is glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: mallopt refuses anything larger.
  constexpr int kMmapThreshold = 32 << 20;
  constexpr int kTrimThreshold = 1 << 30;
  const bool ok = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 &&
                  mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
  state() = ok ? HostAllocator{true, "glibc malloc: mmap threshold 32 MiB, trim threshold 1 GiB"}
               : HostAllocator{false, "glibc malloc: mallopt refused the settings; defaults"};
#else
  state() = HostAllocator{false, "C library defaults (no glibc malloc settings here)"};
#endif
  return state();
}

const HostAllocator& host_allocator() { return state(); }

}  // namespace moeplan::kernels
