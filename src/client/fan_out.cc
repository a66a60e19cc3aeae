// SPDX-License-Identifier: Apache-2.0
#include "client/fan_out.h"

#include <algorithm>

namespace kvport::client {

FanOut::FanOut(size_t workers) : worker_count_(workers) {}

FanOut::~FanOut() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_)
    worker.join();
}

bool FanOut::Claim(Call& call, size_t* index) {
  if (call.next >= call.tasks.size()) return false;
  *index = call.next++;
  return true;
}

void FanOut::Run(std::span<const std::function<void()>> tasks) {
  if (tasks.size() <= 1 || worker_count_ == 0) {
    for (const auto& task : tasks)
      task();
    return;
  }
  Call call;
  call.tasks = tasks;
  std::unique_lock<std::mutex> lock(mu_);
  if (workers_.empty()) {
    for (size_t i = 0; i < worker_count_; ++i)
      workers_.emplace_back([this] { Work(); });
  }
  queue_.push_back(&call);
  lock.unlock();
  // One worker per task beyond the caller's own: waking all of them for a three-node call
  // would cost context switches for nothing.
  for (size_t i = 0; i < std::min(tasks.size() - 1, worker_count_); ++i)
    work_ready_.notify_one();

  lock.lock();
  size_t index = 0;
  while (Claim(call, &index)) {
    lock.unlock();
    tasks[index]();
    lock.lock();
    ++call.finished;
  }
  // Every task is claimed: take the call off the queue (a worker may have already), then wait
  // for the tasks workers are still running. `call` lives on this stack until then.
  if (auto it = std::find(queue_.begin(), queue_.end(), &call); it != queue_.end())
    queue_.erase(it);
  call.all_finished.wait(lock, [&] { return call.finished == call.tasks.size(); });
}

void FanOut::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Call& call = *queue_.front();
    size_t index = 0;
    if (!Claim(call, &index)) {
      queue_.pop_front();
      continue;
    }
    if (call.next >= call.tasks.size()) queue_.pop_front();  // its last task: nothing left here
    lock.unlock();
    call.tasks[index]();
    lock.lock();
    if (++call.finished == call.tasks.size()) call.all_finished.notify_one();
  }
}

}  // namespace kvport::client
