// SPDX-License-Identifier: Apache-2.0
// Counts the process's heap allocations by replacing the global operator new. Include it in
// exactly one file of a test or benchmark binary (the replacements are definitions).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace kvport::testing {

inline std::atomic<uint64_t> g_allocations{0};

// Allocations made so far by every thread of the process.
inline uint64_t Allocations() {
  return g_allocations.load(std::memory_order_relaxed);
}

}  // namespace kvport::testing

// The replacements below pair malloc with free, which GCC's inliner mistakes for new with free.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t n) {
  kvport::testing::g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
