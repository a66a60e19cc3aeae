// SPDX-License-Identifier: Apache-2.0
// Shared by the fake runtimes: knobs read from the environment, and "device memory" that is
// ordinary heap memory the fake keeps track of, so that copies can be checked the way a real
// runtime would (a D2H copy whose source is not device memory is an error).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace fake {

// The integer in environment variable `name`, or `fallback` when unset or not a number.
inline long EnvInt(const char* name, long fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || text[0] == '\0') return fallback;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  return (end != nullptr && *end == '\0') ? v : fallback;
}

// True when environment variable `fail_var` names `symbol` (one name, or a comma-separated
// list), i.e. the test asked this call to fail.
inline bool ShouldFail(const char* fail_var, const char* symbol) {
  const char* list = std::getenv(fail_var);
  if (list == nullptr) return false;
  const size_t n = std::strlen(symbol);
  for (const char* p = list; *p != '\0';) {
    const char* comma = std::strchr(p, ',');
    const size_t len = comma != nullptr ? static_cast<size_t>(comma - p) : std::strlen(p);
    if (len == n && std::strncmp(p, symbol, n) == 0) return true;
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return false;
}

// Whether a copy of `kind` fits where its ends lie: 0 H2H, 1 H2D, 2 D2H, 3 D2D (the values of
// cudaMemcpyKind and aclrtMemcpyKind); 4 is CUDA's cudaMemcpyDefault (inferred: anything goes)
// where `default_allowed`.
inline bool CopyKindFits(int kind, bool dst_device, bool src_device, bool default_allowed) {
  switch (kind) {
    case 0:
      return !dst_device && !src_device;
    case 1:
      return dst_device && !src_device;
    case 2:
      return !dst_device && src_device;
    case 3:
      return dst_device && src_device;
    case 4:
      return default_allowed;
    default:
      return false;
  }
}

// A copy of `made` that lives as long as the process (as a runtime's streams do), reachable so
// that LeakSanitizer reports no leak. Thread-safe.
template <typename T>
T* KeepForever(const T& made) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<T>> kept;
  std::lock_guard<std::mutex> lock(mu);
  return kept.emplace_back(std::make_unique<T>(made)).get();
}

// A set of [start, start + size) ranges.
class Ranges {
 public:
  void Add(const void* p, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    ranges_[reinterpret_cast<uintptr_t>(p)] = size;
  }
  // Removes the range starting exactly at p; false if there is none.
  bool Remove(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    return ranges_.erase(reinterpret_cast<uintptr_t>(p)) == 1;
  }
  // True when [p, p + size) lies inside one range.
  bool Covers(const void* p, size_t size) const {
    std::lock_guard<std::mutex> lock(mu_);
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = ranges_.upper_bound(a);
    if (it == ranges_.begin()) return false;
    --it;
    return a >= it->first && a - it->first <= it->second && size <= it->second - (a - it->first);
  }
  // True when p lies inside any range.
  bool Touches(const void* p) const { return Covers(p, 1); }

 private:
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> ranges_;
};

}  // namespace fake
