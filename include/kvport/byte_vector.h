// SPDX-License-Identifier: Apache-2.0
// ByteVector: a vector of bytes whose resize() does not zero-fill.
//
// A buffer that a read is about to overwrite gains nothing from being zeroed first, and for the
// multi-MiB chunks of a KV cache the memset (and the page faults it takes up front) costs about
// as much as receiving the bytes. ByteVector is a std::vector<uint8_t> with an allocator that
// default-initialises new elements, so bytes added by resize() are left uninitialised: write
// them before reading them. Everything else (copies, moves, iterators, data(), shrinking
// resize) is std::vector's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace kvport {

// std::allocator, except that construct(p) with no arguments default-initialises (a scalar is
// left uninitialised) instead of value-initialising (zero).
template <typename T>
class DefaultInitAllocator : public std::allocator<T> {
 public:
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };

  DefaultInitAllocator() noexcept = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}  // NOLINT: rebinding

  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using ByteVector = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;

// Byte-for-byte comparison with a plain std::vector<uint8_t> (either order, by C++20's reversed
// operators; found by argument-dependent lookup through the allocator).
inline bool operator==(const ByteVector& a, const std::vector<uint8_t>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

}  // namespace kvport
