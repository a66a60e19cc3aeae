// SPDX-License-Identifier: Apache-2.0
// FanOut: runs the per-node parts of one cluster call at the same time.
//
// A call split over k nodes gives k tasks. Run() runs them on a few worker threads and on the
// calling thread itself, which claims tasks of its own call until none is left and then waits
// for those a worker took. So a call always makes progress, even when every worker is busy with
// other callers' tasks, and a call that lands on one node never leaves its thread. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace kvport::client {

class FanOut {
 public:
  // `workers` threads, started at the first Run() with more than one task.
  explicit FanOut(size_t workers);
  ~FanOut();  // joins the workers; no Run() may be in progress
  FanOut(const FanOut&) = delete;
  FanOut& operator=(const FanOut&) = delete;

  // Runs every task once and returns when all have returned.
  void Run(std::span<const std::function<void()>> tasks);

 private:
  struct Call {
    std::span<const std::function<void()>> tasks;
    size_t next = 0;      // the next task to claim; guarded by FanOut::mu_
    size_t finished = 0;  // guarded by FanOut::mu_
    std::condition_variable all_finished;
  };

  void Work();
  // Claims the next unclaimed task of `call` (mu_ held); false when none is left.
  static bool Claim(Call& call, size_t* index);

  const size_t worker_count_;
  // One mutex for the queue and the calls' counters: tasks are node calls of microseconds or
  // more, so this lock is never the bottleneck. A std::mutex because it pairs with the
  // condition variables.
  std::mutex mu_;
  std::condition_variable work_ready_;
  std::deque<Call*> queue_;  // calls with unclaimed tasks
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kvport::client
