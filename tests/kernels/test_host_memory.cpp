// The host allocator keeps freed buffers in the process (kernels/host_memory.hpp): a block freed
// and allocated again is not page-faulted in again, in the main thread and in another thread (an
// in-process rank), at a size above glibc's largest mmap threshold (32 MiB) and above a thread
// arena's heap (64 MiB) — the padded_a2a layer's buffers at 1024 tokens are 50-100 MiB.
#include "kernels/host_memory.hpp"

#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <thread>

namespace test_host_memory {
namespace {

long minor_faults_of_this_thread() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

/// Minor page faults taken by this thread while one block of `bytes` is allocated, written
/// through and freed.
long faults_of_one_use(std::size_t bytes) {
  const long before = minor_faults_of_this_thread();
  auto* p = static_cast<char*>(std::malloc(bytes));
  if (p == nullptr) return -1;
  std::memset(p, 1, bytes);
  // The compiler must not drop the block: it escapes here.
  asm volatile("" : : "r"(p) : "memory");
  std::free(p);
  return minor_faults_of_this_thread() - before;
}

struct Uses {
  long first = 0;
  long second = 0;
};

Uses two_uses(std::size_t bytes) { return {faults_of_one_use(bytes), faults_of_one_use(bytes)}; }

// Configured before main, as moeplan's main does before any thread starts: mallopt cannot undo
// the thread arenas that earlier tests' in-process ranks created, and a thread attached to one of
// those mmaps a block larger than its heap (and unmaps it on free) whatever M_MMAP_MAX says — so
// configuring inside the test passed when ctest ran it alone and failed after the other tests.
const moeplan::kernels::HostAllocator kAllocator = moeplan::kernels::configure_host_allocator();

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerAllocator = true;
#else
constexpr bool kSanitizerAllocator = false;
#endif

}  // namespace

TEST(HostAllocator, AFreedBlockIsNotFaultedInAgain) {
  if (kSanitizerAllocator) GTEST_SKIP() << "a sanitizer's allocator replaces glibc's malloc";
  if (!kAllocator.configured) GTEST_SKIP() << kAllocator.description;
  // The heap's free bytes plus 160 MiB: more than the heap can give from what earlier tests freed
  // (with glibc's defaults, more than any block this process used before), so the first use must
  // fault pages in; with glibc's defaults (an mmapped block, unmapped on free) the second use
  // faults as many again, whether the kernel maps 4 KiB or huge pages.
  const auto beyond_the_heap = [](std::size_t extra) {
    return static_cast<std::size_t>(mallinfo2().fordblks) + extra;
  };
  const Uses main_thread = two_uses(beyond_the_heap(std::size_t{160} << 20));
  ASSERT_GT(main_thread.first, 0) << "the block was not new to this process";
  EXPECT_LE(main_thread.second * 100, main_thread.first)
      << "second use faulted " << main_thread.second << " times, the first " << main_thread.first;
  // In another thread (an in-process rank): one arena, the same heap, no new faults. A block
  // beyond the heap again keeps the first use honest there too.
  Uses other;
  std::thread t([&] { other = two_uses(beyond_the_heap(std::size_t{200} << 20)); });
  t.join();
  ASSERT_GT(other.first, 0) << "the block was not new to this process";
  EXPECT_LE(other.second * 100, other.first)
      << "second use faulted " << other.second << " times, the first " << other.first;
}

}  // namespace test_host_memory
