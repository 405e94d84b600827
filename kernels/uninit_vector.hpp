// A std::vector whose elements are default-initialised: `UninitVector<float> v(n)` allocates
// without zero-filling, for buffers that the next step overwrites completely (receive buffers,
// unpacked rows, GEMM outputs). A memset of a layer's multi-MiB buffers is work no GPU kernel
// does; on the CPU backend it was about 5% of a forward.
#pragma once

#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace moeplan::kernels {

template <class T>
class DefaultInitAllocator : public std::allocator<T> {
 public:
  using value_type = T;
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() noexcept = default;
  template <class U>
  explicit DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

  /// Value-less construction default-initialises (no zeroing for arithmetic types).
  template <class U>
  void construct(U* p) noexcept(noexcept(::new (static_cast<void*>(p)) U)) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <class T, class U>
bool operator==(const DefaultInitAllocator<T>&, const DefaultInitAllocator<U>&) noexcept {
  return true;
}

template <class T>
using UninitVector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace moeplan::kernels
