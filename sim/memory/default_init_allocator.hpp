// An allocator whose vectors grow without writing the new elements: resize(n) on a vector of a trivial
// type only allocates. std::allocator value-initialises every new element (zeroes it), a pass over the
// whole block that a producer about to write every element pays for nothing. A plan's routes are the
// case in point: hundreds of kilobytes at EP 64 that a balancer sizes once for the most routes there
// can be, writes in place and cuts to the routes written.
#pragma once

#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace epsim {

/// std::allocator, except that constructing an element without arguments default-initialises it
/// (leaves a trivial type's bytes as they are) instead of value-initialising it. Construction with
/// arguments (push_back, insert, resize(n, value)) is unchanged.
template <typename T>
class DefaultInitAllocator : public std::allocator<T> {
 public:
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };

  DefaultInitAllocator() noexcept = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <typename T, typename U>
bool operator==(const DefaultInitAllocator<T>&, const DefaultInitAllocator<U>&) noexcept {
  return true;
}
template <typename T, typename U>
bool operator!=(const DefaultInitAllocator<T>&, const DefaultInitAllocator<U>&) noexcept {
  return false;
}

}  // namespace epsim
