// SPDX-License-Identifier: Apache-2.0
// LogLimiter: at most one log line per interval from one place, so that a fault repeated on
// every operation (a full disk under every eviction) writes a line now and then, saying how many
// it held back, instead of one per operation onto the disk that is already full.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/thread_annotations.h"

namespace kvport {

class LogLimiter {
 public:
  explicit LogLimiter(std::chrono::steady_clock::duration interval) : interval_(interval) {}

  // True when a line may be written now (the first call, then once per interval); then
  // *held_back is how many calls were answered false since the last true. Thread-safe.
  bool Allow(uint64_t* held_back) EXCLUDES(mu_) {
    const auto now = std::chrono::steady_clock::now();
    MutexLock lock(mu_);
    if (written_ && now - last_ < interval_) {
      ++held_back_;
      return false;
    }
    written_ = true;
    last_ = now;
    *held_back = held_back_;
    held_back_ = 0;
    return true;
  }

 private:
  const std::chrono::steady_clock::duration interval_;
  Mutex mu_;
  bool written_ GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point last_ GUARDED_BY(mu_);
  uint64_t held_back_ GUARDED_BY(mu_) = 0;
};

}  // namespace kvport
