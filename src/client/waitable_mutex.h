// SPDX-License-Identifier: Apache-2.0
// WaitableMutex: a std::mutex that clang's -Wthread-safety checks and that a
// std::condition_variable can wait on (kvport::Mutex hides its std::mutex, so it cannot).
//
//   WaitableMutex mu_;
//   std::vector<Call*> waiters_ GUARDED_BY(mu_);
//   ...
//   WaitableLock lock(mu_);
//   lock.Wait(done);  // done.wait(): mu_ is released while the thread sleeps
//   lock.unlock();    // and lock.lock() takes it again: the analysis follows both
#pragma once

#include <condition_variable>
#include <mutex>

#include "common/monotonic_clock.h"
#include "common/thread_annotations.h"

namespace kvport::client {

class CAPABILITY("mutex") WaitableMutex {
 public:
  WaitableMutex() = default;
  WaitableMutex(const WaitableMutex&) = delete;
  WaitableMutex& operator=(const WaitableMutex&) = delete;

 private:
  friend class WaitableLock;
  std::mutex mu_;
};

// Holds a WaitableMutex for its scope (unless unlocked), and waits on condition variables with
// it.
class SCOPED_CAPABILITY WaitableLock {
 public:
  explicit WaitableLock(WaitableMutex& mu) ACQUIRE(mu) : lock_(mu.mu_) {}
  ~WaitableLock() RELEASE() {}
  WaitableLock(const WaitableLock&) = delete;
  WaitableLock& operator=(const WaitableLock&) = delete;

  void lock() ACQUIRE() { lock_.lock(); }
  void unlock() RELEASE() { lock_.unlock(); }

  // cv.wait and cv.wait_until: the mutex is released while the thread sleeps and held again
  // when they return (to the analysis, it is held throughout).
  void Wait(std::condition_variable& cv) { cv.wait(lock_); }
  std::cv_status WaitUntil(std::condition_variable& cv, MonotonicClock::time_point deadline) {
    return cv.wait_until(lock_, deadline);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace kvport::client
