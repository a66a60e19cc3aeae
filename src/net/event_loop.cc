// SPDX-License-Identifier: Apache-2.0
#include "net/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "kvport/log.h"

namespace kvport::net {

namespace {
constexpr int kMaxEventsPerWait = 256;
}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::Create() {
  Socket epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) return Status::FromErrno("epoll_create1", errno);
  Socket wakeup(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wakeup.valid()) return Status::FromErrno("eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // nullptr marks the wakeup fd
  if (::epoll_ctl(epoll.fd(), EPOLL_CTL_ADD, wakeup.fd(), &ev) < 0) {
    return Status::FromErrno("epoll_ctl(ADD eventfd)", errno);
  }
  return std::unique_ptr<EventLoop>(new EventLoop(std::move(epoll), std::move(wakeup)));
}

EventLoop::EventLoop(Socket epoll, Socket wakeup)
    : epoll_(std::move(epoll)), wakeup_(std::move(wakeup)) {}

EventLoop::~EventLoop() {
  // Whatever was posted too late still owns things (connections, pins): run it so it releases
  // them on this thread rather than leaking.
  loop_thread_.store(std::this_thread::get_id());
  RunPostedTasks();
  timers_.clear();
}

void EventLoop::Run() {
  loop_thread_.store(std::this_thread::get_id());
  epoll_event events[kMaxEventsPerWait];
  MonotonicClock::time_point spin_until = now_;  // busy polling: no sleep before this
  while (!stop_requested_.load(std::memory_order_acquire)) {
    const int timeout = NextTimeoutMs();
    const bool spinning = timeout != 0 && now_ < spin_until;
    int n = ::epoll_wait(epoll_.fd(), events, kMaxEventsPerWait, spinning ? 0 : timeout);
    now_ = MonotonicClock::now();
    if (n < 0 && errno != EINTR) {
      log::Error("epoll_wait failed: {}", Status::FromErrno("epoll_wait", errno).message());
      break;
    }
    if (n > 0 && busy_poll_.count() > 0) {
      if (spinning && on_busy_poll_hit_) on_busy_poll_hit_();
      spin_until = now_ + busy_poll_;
    }
    // Nothing yet, and no timer or task due (those make the timeout 0): ask again.
    if (n == 0 && spinning) continue;
    for (int i = 0; i < n; ++i) {
      auto* handler = static_cast<EventHandler*>(events[i].data.ptr);
      if (handler == nullptr) {
        DrainWakeup();
      } else {
        handler->OnEvents(events[i].events);
      }
    }
    RunExpiredTimers();
    RunPostedTasks();
  }
  RunPostedTasks();
  loop_thread_.store(std::thread::id());
}

void EventLoop::SetBusyPoll(std::chrono::microseconds spin, std::function<void()> on_hit) {
  busy_poll_ = spin;
  on_busy_poll_hit_ = std::move(on_hit);
}

void EventLoop::Stop() {
  stop_requested_.store(true, std::memory_order_release);
  Wake();
}

void EventLoop::Post(std::function<void()> task) {
  {
    MutexLock lock(tasks_mu_);
    tasks_.push_back(std::move(task));
  }
  Wake();
}

bool EventLoop::IsInLoopThread() const {
  return loop_thread_.load() == std::this_thread::get_id();
}

Status EventLoop::Watch(int fd, uint32_t events, EventHandler* handler) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = handler;
  if (::epoll_ctl(epoll_.fd(), EPOLL_CTL_ADD, fd, &ev) < 0) {
    return Status::FromErrno("epoll_ctl(ADD)", errno);
  }
  return Status::Ok();
}

Status EventLoop::Modify(int fd, uint32_t events, EventHandler* handler) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = handler;
  if (::epoll_ctl(epoll_.fd(), EPOLL_CTL_MOD, fd, &ev) < 0) {
    return Status::FromErrno("epoll_ctl(MOD)", errno);
  }
  return Status::Ok();
}

void EventLoop::Unwatch(int fd) {
  // Fails only if fd was not watched; nothing to do then.
  ::epoll_ctl(epoll_.fd(), EPOLL_CTL_DEL, fd, nullptr);
}

TimerId EventLoop::RunAfter(std::chrono::milliseconds delay, std::function<void()> fn) {
  TimerId id = next_timer_id_++;
  MonotonicClock::time_point deadline = MonotonicClock::now() + delay;
  timers_.emplace(std::make_pair(deadline, id), std::move(fn));
  timer_deadlines_.emplace(id, deadline);
  return id;
}

void EventLoop::CancelTimer(TimerId id) {
  auto it = timer_deadlines_.find(id);
  if (it == timer_deadlines_.end()) return;
  timers_.erase(std::make_pair(it->second, id));
  timer_deadlines_.erase(it);
}

void EventLoop::Wake() {
  uint64_t one = 1;
  // A full counter (EAGAIN) still leaves the fd readable, so the wakeup is not lost.
  ssize_t ignored = ::write(wakeup_.fd(), &one, sizeof(one));
  (void)ignored;
}

void EventLoop::DrainWakeup() {
  uint64_t count = 0;
  ssize_t ignored = ::read(wakeup_.fd(), &count, sizeof(count));
  (void)ignored;
}

int EventLoop::NextTimeoutMs() const {
  {
    // A task posted while we were busy must not wait for the next event.
    MutexLock lock(tasks_mu_);
    if (!tasks_.empty()) return 0;
  }
  if (timers_.empty()) return -1;
  auto wait = timers_.begin()->first.first - MonotonicClock::now();
  if (wait <= MonotonicClock::duration::zero()) return 0;
  // Round up so a timer never fires early.
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
  return ms > 1000 * 60 ? 1000 * 60 : static_cast<int>(ms);
}

void EventLoop::RunExpiredTimers() {
  MonotonicClock::time_point now = MonotonicClock::now();
  // One at a time, so a timer may cancel another that is also due.
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    auto node = timers_.extract(timers_.begin());
    timer_deadlines_.erase(node.key().second);
    node.mapped()();
  }
}

void EventLoop::RunPostedTasks() {
  std::vector<std::function<void()>> batch;
  {
    MutexLock lock(tasks_mu_);
    batch.swap(tasks_);
  }
  for (auto& task : batch)
    task();
}

}  // namespace kvport::net
