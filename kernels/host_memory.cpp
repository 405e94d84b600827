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
  // NOTE: no block is mmapped (M_MMAP_MAX 0), whatever its size: a mmapped block is unmapped on
  // free and page-faulted in again by the next forward (the mmap threshold cannot exceed 32 MiB,
  // and the padded buffers of a 1024-token layer are 50-100 MiB). One arena (M_ARENA_MAX 1):
  // a thread arena's heap is at most 64 MiB and is unmapped when it empties, so in-process
  // ranks (threads) would fault their buffers in again where processes do not. The heap is
  // never trimmed (M_TRIM_THRESHOLD -1): with a 1 GiB threshold two in-process ranks of that
  // layer (about 1 GiB of buffers freed together) gave their heap back at the end of some
  // forwards, and the layer measured 529 ms instead of 276-280 ms. The process keeps its
  // high-water mark, as a GPU framework's caching allocator does.
  const bool ok = mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_ARENA_MAX, 1) == 1 &&
                  mallopt(M_TRIM_THRESHOLD, -1) == 1;
  state() =
      ok ? HostAllocator{true, "glibc malloc: no mmapped blocks, one arena, heap never trimmed"}
         : HostAllocator{false, "glibc malloc: mallopt refused the settings; defaults"};
#else
  state() = HostAllocator{false, "C library defaults (no glibc malloc settings here)"};
#endif
  return state();
}

const HostAllocator& host_allocator() { return state(); }

}  // namespace moeplan::kernels
