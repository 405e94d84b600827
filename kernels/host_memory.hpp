// Host allocator settings for processes that run the CPU backend: freed buffers stay in the
// process and are reused, so a layer's per-forward buffers cost a memset, not page faults.
#pragma once

#include <string>

namespace moeplan::kernels {

/// What configure_host_allocator() set, for the profile's environment record and --version.
struct HostAllocator {
  bool configured = false;  ///< false where the C library offers no such settings (or ASan)
  std::string description;  ///< e.g. "glibc malloc: no mmapped blocks, one arena, …"
};

/// Sets glibc's malloc so that every block, whatever its size, comes from one heap and freed
/// memory is not returned to the OS (no mmapped blocks, one arena, no trimming): a
/// layer's per-forward buffers then cost a memset, not page faults, in processes and in-process
/// ranks (threads) alike — as a GPU framework's caching allocator keeps its blocks. Without it
/// glibc hands buffers of a few MiB back to the kernel on free and every forward page-faults them
/// in again: on the 2-core VM the 1x2 a2av layer of docs/BENCHMARKS.md took 133 ms instead of
/// 110 ms, and the 1x2 padded_a2a layer at 1024 tokens (buffers of 50-100 MiB, above the
/// largest mmap threshold glibc accepts) 414-491 ms instead of 264 ms. A microbenchmark that
/// reuses one buffer size (the profiler's) keeps its pages while the layer, with many sizes,
/// loses them — the measured op and the layer then disagree. Call once at the start of main(),
/// before threads start. Idempotent.
HostAllocator configure_host_allocator();

/// The settings in force (configure_host_allocator's last answer, or not configured).
const HostAllocator& host_allocator();

}  // namespace moeplan::kernels
