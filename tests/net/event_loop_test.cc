// SPDX-License-Identifier: Apache-2.0
#include "net/event_loop.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

namespace kvport::net {
namespace {

std::unique_ptr<EventLoop> NewLoop() {
  auto loop = EventLoop::Create();
  EXPECT_TRUE(loop.ok()) << loop.status().ToString();
  return std::move(loop).value();
}

TEST(EventLoopTest, StopFromAnotherThreadWakesABlockedLoop) {
  auto loop = NewLoop();
  std::promise<void> running;
  loop->Post([&] { running.set_value(); });
  std::thread t([&] { loop->Run(); });
  running.get_future().wait();
  // Nothing is watched and no timer is armed: only the wakeup fd can end epoll_wait.
  loop->Stop();
  t.join();
}

TEST(EventLoopTest, PostedTasksRunOnTheLoopThreadInOrder) {
  auto loop = NewLoop();
  std::vector<int> order;
  std::thread::id loop_thread;
  std::thread t([&] {
    loop_thread = std::this_thread::get_id();
    loop->Run();
  });
  std::promise<void> done;
  bool all_in_loop = true;
  for (int i = 0; i < 100; ++i) {
    loop->Post([&, i] {
      all_in_loop = all_in_loop && loop->IsInLoopThread();
      order.push_back(i);
      if (i == 99) done.set_value();
    });
  }
  done.get_future().wait();
  loop->Stop();
  t.join();
  EXPECT_TRUE(all_in_loop);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(order[i], i);
  EXPECT_FALSE(loop->IsInLoopThread());
}

TEST(EventLoopTest, TasksPostedAfterRunReturnedRunAtDestruction) {
  auto loop = NewLoop();
  auto token = std::make_shared<int>(7);
  std::weak_ptr<int> watch = token;
  loop->Post([t = std::move(token)] {});
  loop.reset();
  EXPECT_TRUE(watch.expired());
}

TEST(EventLoopTest, TimersFireInDeadlineOrderAndCanBeCancelled) {
  auto loop = NewLoop();
  std::vector<int> fired;
  loop->Post([&] {
    loop->RunAfter(std::chrono::milliseconds(20), [&] {
      fired.push_back(2);
      loop->Stop();
    });
    TimerId cancelled = loop->RunAfter(std::chrono::milliseconds(5), [&] { fired.push_back(99); });
    loop->RunAfter(std::chrono::milliseconds(1), [&] { fired.push_back(1); });
    loop->CancelTimer(cancelled);
    loop->CancelTimer(12345);  // unknown: harmless
  });
  loop->Run();
  EXPECT_EQ(fired, (std::vector<int>{1, 2}));
}

TEST(EventLoopTest, ATimerMayCancelAnotherDueTimer) {
  auto loop = NewLoop();
  std::vector<int> fired;
  TimerId second = 0;
  loop->Post([&] {
    loop->RunAfter(std::chrono::milliseconds(0), [&] {
      fired.push_back(1);
      loop->CancelTimer(second);
    });
    second = loop->RunAfter(std::chrono::milliseconds(0), [&] { fired.push_back(2); });
    loop->RunAfter(std::chrono::milliseconds(2), [&] { loop->Stop(); });
  });
  loop->Run();
  EXPECT_EQ(fired, (std::vector<int>{1}));
}

class RecordingHandler : public EventHandler {
 public:
  explicit RecordingHandler(std::function<void(uint32_t)> fn) : fn_(std::move(fn)) {}
  void OnEvents(uint32_t events) override { fn_(events); }

 private:
  std::function<void(uint32_t)> fn_;
};

TEST(EventLoopTest, WatchedDescriptorDeliversReadinessUntilUnwatched) {
  auto loop = NewLoop();
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  Socket a(fds[0]), b(fds[1]);
  int reads = 0;
  RecordingHandler handler([&](uint32_t events) {
    EXPECT_TRUE(events & EPOLLIN);
    char buf[16];
    ssize_t n = ::read(a.fd(), buf, sizeof(buf));
    EXPECT_EQ(n, 1);
    if (++reads == 2) {
      loop->Unwatch(a.fd());
      loop->Stop();
    } else {
      ASSERT_EQ(::write(b.fd(), "y", 1), 1);
    }
  });
  ASSERT_TRUE(loop->Watch(a.fd(), EPOLLIN, &handler).ok());
  ASSERT_EQ(::write(b.fd(), "x", 1), 1);
  loop->Run();
  EXPECT_EQ(reads, 2);
  // Watching twice is an error, not a crash.
  ASSERT_TRUE(loop->Watch(a.fd(), EPOLLIN, &handler).ok());
  EXPECT_FALSE(loop->Watch(a.fd(), EPOLLIN, &handler).ok());
}

}  // namespace
}  // namespace kvport::net
