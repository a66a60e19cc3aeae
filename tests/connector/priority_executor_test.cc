// SPDX-License-Identifier: Apache-2.0
#include "connector/priority_executor.h"

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <string>
#include <vector>

namespace kvport {
namespace {

// With one worker held busy by a gate task, everything queued behind it runs strictly by
// priority, FIFO within a priority.
TEST(PriorityExecutorTest, PeekQueuedBehindPutsRunsFirst) {
  PriorityExecutor executor(1);
  std::promise<void> gate;
  std::shared_future<void> gate_open = gate.get_future().share();
  std::promise<void> worker_busy;
  auto blocker = executor.Submit(TaskPriority::kPut, [&] {
    worker_busy.set_value();
    gate_open.wait();
    return 0;
  });
  worker_busy.get_future().wait();

  std::mutex mu;
  std::vector<std::string> order;
  auto record = [&](std::string name) {
    return [&, name] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(name);
      return 0;
    };
  };
  std::vector<std::future<int>> done;
  done.push_back(executor.Submit(TaskPriority::kPut, record("put1")));
  done.push_back(executor.Submit(TaskPriority::kPut, record("put2")));
  done.push_back(executor.Submit(TaskPriority::kGet, record("get")));
  done.push_back(executor.Submit(TaskPriority::kPrefetch, record("prefetch")));
  done.push_back(executor.Submit(TaskPriority::kPeek, record("peek")));
  gate.set_value();
  for (auto& f : done)
    f.get();
  blocker.get();
  EXPECT_EQ(order, (std::vector<std::string>{"peek", "prefetch", "get", "put1", "put2"}));
}

TEST(PriorityExecutorTest, DestructorRunsEverythingQueued) {
  std::atomic<int> ran{0};
  std::vector<std::future<void>> futures;
  {
    PriorityExecutor executor(2);
    for (int i = 0; i < 100; ++i) {
      futures.push_back(executor.Submit(static_cast<TaskPriority>(i % 4), [&] { ++ran; }));
    }
  }
  EXPECT_EQ(ran.load(), 100);
  for (auto& f : futures)
    EXPECT_NO_THROW(f.get());
}

TEST(PriorityExecutorTest, ZeroThreadsMeansOne) {
  PriorityExecutor executor(0);
  EXPECT_EQ(executor.thread_count(), 1u);
  EXPECT_EQ(executor.Submit(TaskPriority::kGet, [] { return 7; }).get(), 7);
}

}  // namespace
}  // namespace kvport
