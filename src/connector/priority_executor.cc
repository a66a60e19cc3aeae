// SPDX-License-Identifier: Apache-2.0
#include "connector/priority_executor.h"

namespace kvport {

PriorityExecutor::PriorityExecutor(size_t threads) {
  if (threads == 0) threads = 1;
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i)
    workers_.emplace_back([this] { WorkerLoop(); });
}

PriorityExecutor::~PriorityExecutor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& w : workers_)
    w.join();
}

void PriorityExecutor::Enqueue(TaskPriority priority, std::function<void()> run) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queues_[static_cast<size_t>(priority)].push_back(std::move(run));
    ++queued_;
  }
  ready_.notify_one();
}

void PriorityExecutor::WorkerLoop() {
  for (;;) {
    std::function<void()> run;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [this] { return stopping_ || queued_ > 0; });
      if (queued_ == 0) return;  // stopping and drained
      for (auto& q : queues_) {
        if (q.empty()) continue;
        run = std::move(q.front());
        q.pop_front();
        break;
      }
      --queued_;
    }
    run();
  }
}

}  // namespace kvport
