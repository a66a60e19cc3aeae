// SPDX-License-Identifier: Apache-2.0
// EventLoop: one epoll instance driven by one thread, with cross-thread tasks and timers.
//
// A loop watches file descriptors (level-triggered) and calls an EventHandler when one is ready,
// runs timers whose deadline passed, and runs tasks posted from any thread. Stop() and Post()
// are the only members other threads may call; they wake the loop through an eventfd.
//
// Busy polling (SetBusyPoll): after a batch of events the loop asks epoll again without
// sleeping for a while before it blocks, so a client's next request, sent a few microseconds
// after the last answer, is found without the wake-up of a sleeping thread (tens of
// microseconds on a VM: most of a small call's round trip). It costs a core's time while the
// loop is busy; an idle loop still sleeps.
//
// Handler lifetime: a handler may be the target of an event already fetched by epoll_wait in
// the current batch even after Unwatch(). So a handler is destroyed only from a posted task or a
// timer (which run after the batch), never directly inside OnEvents(); a handler that unwatched
// itself must ignore any event it still receives.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/monotonic_clock.h"
#include "common/thread_annotations.h"
#include "kvport/status.h"
#include "net/socket.h"

namespace kvport::net {

class EventHandler {
 public:
  virtual ~EventHandler() = default;
  // `events` is the EPOLL* mask that fired (EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP, EPOLLRDHUP).
  virtual void OnEvents(uint32_t events) = 0;
};

using TimerId = uint64_t;

class EventLoop {
 public:
  static Result<std::unique_ptr<EventLoop>> Create();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs until Stop(). Called by exactly one thread, which becomes the loop thread. Tasks posted
  // before Stop() are run before Run() returns.
  void Run();
  // Thread-safe; makes Run() return after its current iteration. Idempotent.
  void Stop();
  // Thread-safe: runs `task` on the loop thread, after the current batch of events. Tasks run in
  // the order they were posted. Tasks posted after Run() returned are run by the destructor
  // (so that ownership they carry is released), never dropped silently.
  void Post(std::function<void()> task) EXCLUDES(tasks_mu_);
  // True on the thread inside Run().
  bool IsInLoopThread() const;

  // Before Run(): after events, keep asking epoll without sleeping for `spin` before blocking
  // (see the file comment). Zero (the default): block at once. `on_hit` (may be empty) runs on
  // the loop thread each time busy polling found events: a sleep and a wake-up saved.
  void SetBusyPoll(std::chrono::microseconds spin, std::function<void()> on_hit);

  // Loop thread only (or before Run() starts). `events` is an EPOLL* mask (EPOLLIN, EPOLLOUT...).
  Status Watch(int fd, uint32_t events, EventHandler* handler);
  Status Modify(int fd, uint32_t events, EventHandler* handler);
  void Unwatch(int fd);

  // Loop thread only. Runs `fn` once, no earlier than `delay` from now. A timer can be cancelled
  // until it has started running; cancelling an unknown or finished timer does nothing.
  TimerId RunAfter(std::chrono::milliseconds delay, std::function<void()> fn);
  void CancelTimer(TimerId id);

  // The time at the start of the current iteration (cheap; good enough for idle timeouts).
  MonotonicClock::time_point Now() const { return now_; }

 private:
  EventLoop(Socket epoll, Socket wakeup);
  void Wake();
  void DrainWakeup();
  int NextTimeoutMs() const EXCLUDES(tasks_mu_);
  void RunExpiredTimers();
  void RunPostedTasks() EXCLUDES(tasks_mu_);

  Socket epoll_;
  Socket wakeup_;  // eventfd: written by Post()/Stop() from any thread
  std::atomic<bool> stop_requested_{false};
  std::atomic<std::thread::id> loop_thread_{};
  MonotonicClock::time_point now_ = MonotonicClock::now();
  std::chrono::microseconds busy_poll_{0};
  std::function<void()> on_busy_poll_hit_;

  mutable Mutex tasks_mu_;
  std::vector<std::function<void()>> tasks_ GUARDED_BY(tasks_mu_);

  // Timers, ordered by (deadline, id) so equal deadlines fire in creation order.
  std::map<std::pair<MonotonicClock::time_point, TimerId>, std::function<void()>> timers_;
  std::unordered_map<TimerId, MonotonicClock::time_point> timer_deadlines_;
  TimerId next_timer_id_ = 1;
};

}  // namespace kvport::net
