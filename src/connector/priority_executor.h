// SPDX-License-Identifier: Apache-2.0
// PriorityExecutor: a bounded pool of worker threads that always runs the most urgent queued task
// first.
//
// LMCache's remote connectors serve four kinds of work with one set of threads, and the order
// matters for latency: a scheduler's contains() check (PEEK) decides whether a request can skip
// prefill and must not wait behind bulk uploads; prefetches come next, then blocking gets, and
// puts (write-behind of freshly computed KV) last. Within one priority, tasks run in submission
// order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kvport {

// Lower value runs first.
enum class TaskPriority : uint8_t { kPeek = 0, kPrefetch = 1, kGet = 2, kPut = 3 };

class PriorityExecutor {
 public:
  // Starts `threads` workers (at least 1).
  explicit PriorityExecutor(size_t threads);
  // Runs every task already queued, then joins the workers.
  ~PriorityExecutor();

  PriorityExecutor(const PriorityExecutor&) = delete;
  PriorityExecutor& operator=(const PriorityExecutor&) = delete;

  // Queues `fn` and returns a future for its result. Tasks submitted after the executor began
  // shutting down still run (the destructor drains the queue), so no future is ever abandoned.
  template <typename Fn>
  auto Submit(TaskPriority priority, Fn fn) -> std::future<decltype(fn())> {
    using R = decltype(fn());
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
    std::future<R> result = task->get_future();
    Enqueue(priority, [task] { (*task)(); });
    return result;
  }

  size_t thread_count() const { return workers_.size(); }

 private:
  static constexpr size_t kPriorityCount = 4;

  void Enqueue(TaskPriority priority, std::function<void()> run);
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queues_[kPriorityCount];  // indexed by TaskPriority; FIFO each
  size_t queued_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kvport
