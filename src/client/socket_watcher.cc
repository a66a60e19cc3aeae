// SPDX-License-Identifier: Apache-2.0
#include "client/socket_watcher.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "kvport/log.h"

namespace kvport::client {
namespace {

// The eventfd's epoll tag: no registration has this address.
void* const kWakeTag = nullptr;

// Milliseconds until `at` for epoll_wait, rounded up (a callback never comes early); -1: never.
int TimeoutMs(Deadline at) {
  if (at == kNoDeadline) return -1;
  const auto left = at - MonotonicClock::now();
  if (left <= MonotonicClock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, 60'000));
}

}  // namespace

namespace {

// Which watcher Shared() hands out. Never destroyed (asked for while static objects are being
// destroyed), and replaced in a forked child: a thread of the parent may have been inside
// Shared(), holding `mu`, at the fork, and that thread does not exist in the child. The
// parent's watcher stays with the parent's connections copied into the child (which abandon
// it, like the rest of a client used after fork); the child's first connection makes its own.
struct SharedWatcher {
  std::mutex mu;
  std::weak_ptr<SocketWatcher> current;
  std::function<void()> create_hook;  // SetCreateHookForTesting
};

std::atomic<SharedWatcher*> shared_watcher{nullptr};

SharedWatcher& TheSharedWatcher() {
  static std::once_flag once;
  std::call_once(once, [] {
    shared_watcher.store(new SharedWatcher);
    ::pthread_atfork(nullptr, nullptr, [] { shared_watcher.store(new SharedWatcher); });
  });
  return *shared_watcher.load();
}

}  // namespace

void SocketWatcher::SetCreateHookForTesting(std::function<void()> hook) {
  SharedWatcher& shared = TheSharedWatcher();
  std::lock_guard lock(shared.mu);
  shared.create_hook = std::move(hook);
}

Result<std::shared_ptr<SocketWatcher>> SocketWatcher::Shared() {
  SharedWatcher& shared = TheSharedWatcher();
  std::lock_guard lock(shared.mu);
  if (shared.create_hook) shared.create_hook();
  if (std::shared_ptr<SocketWatcher> live = shared.current.lock(); live != nullptr) return live;
  net::Socket epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) {
    return Status::Unavailable(fmt::format("epoll_create1: {}", std::strerror(errno)));
  }
  net::Socket wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return Status::Unavailable(fmt::format("eventfd: {}", std::strerror(errno)));
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = kWakeTag;
  if (::epoll_ctl(epoll.fd(), EPOLL_CTL_ADD, wake.fd(), &event) != 0) {
    return Status::Unavailable(fmt::format("epoll_ctl: {}", std::strerror(errno)));
  }
  std::shared_ptr<SocketWatcher> watcher(new SocketWatcher(std::move(epoll), std::move(wake)));
  watcher->thread_ = std::thread([raw = watcher.get()] { raw->Run(); });
  {
    // Returns once the thread runs: a thread still starting holds the runtime's locks (the
    // dynamic loader's, a sanitizer's), and a fork() then would leave them held in the child,
    // whose first thread would wait for them forever.
    std::unique_lock started(watcher->mu_);
    watcher->visited_.wait(started, [&] { return watcher->running_; });
  }
  shared.current = watcher;
  return watcher;
}

SocketWatcher::SocketWatcher(net::Socket epoll, net::Socket wake)
    : epoll_(std::move(epoll)), wake_(std::move(wake)) {}

SocketWatcher::~SocketWatcher() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
}

Status SocketWatcher::Add(Watched* watched, int fd) {
  epoll_event event{};
  event.events = 0;  // nothing asked yet (Watch arms it)
  event.data.ptr = watched;
  std::lock_guard lock(mu_);
  if (::epoll_ctl(epoll_.fd(), EPOLL_CTL_ADD, fd, &event) != 0) {
    return Status::Unavailable(fmt::format("epoll_ctl: {}", std::strerror(errno)));
  }
  entries_[watched] = Entry{fd, false, kNoDeadline};
  return Status::Ok();
}

void SocketWatcher::Watch(Watched* watched, bool readable, Deadline at) {
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(watched);
    if (it == entries_.end()) return;
    Entry& entry = it->second;
    if (readable && !entry.armed) {
      epoll_event event{};
      event.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
      event.data.ptr = watched;
      // Fails only for a descriptor that is not registered: impossible while the entry lives.
      if (::epoll_ctl(epoll_.fd(), EPOLL_CTL_MOD, entry.fd, &event) == 0) entry.armed = true;
    }
    entry.at = at;
    wake = at < sleeping_until_;
    if (wake) sleeping_until_ = at;  // one wake-up, however many earlier times are asked for
  }
  if (wake) Wake();
}

void SocketWatcher::Remove(Watched* watched) {
  std::unique_lock lock(mu_);
  auto it = entries_.find(watched);
  if (it == entries_.end()) return;
  (void)::epoll_ctl(epoll_.fd(), EPOLL_CTL_DEL, it->second.fd, nullptr);
  entries_.erase(it);
  visited_.wait(lock, [&] { return visiting_ != watched; });
}

size_t SocketWatcher::watched() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void SocketWatcher::Wake() {
  const uint64_t one = 1;
  // A full counter (never, in practice) still leaves it readable: the wake-up is not lost.
  [[maybe_unused]] ssize_t written = ::write(wake_.fd(), &one, sizeof(one));
}

void SocketWatcher::Run() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  std::vector<Watched*> due;
  std::unique_lock lock(mu_);
  running_ = true;
  visited_.notify_all();
  while (!stopping_) {
    Deadline next = kNoDeadline;
    for (const auto& [watched, entry] : entries_)
      next = std::min(next, entry.at);
    sleeping_until_ = next;
    lock.unlock();
    const int ready = ::epoll_wait(epoll_.fd(), events, kMaxEvents, TimeoutMs(next));
    if (ready < 0 && errno != EINTR) {
      log::Error("client: the socket watcher's epoll_wait failed: {}", std::strerror(errno));
    }
    lock.lock();
    due.clear();
    for (int i = 0; i < ready; ++i) {
      auto* watched = static_cast<Watched*>(events[i].data.ptr);
      if (watched == kWakeTag) {
        uint64_t wakes;
        [[maybe_unused]] ssize_t got = ::read(wake_.fd(), &wakes, sizeof(wakes));
        continue;
      }
      // An event of a registration removed meanwhile (or of a new one at the same address: a
      // callback without its condition, which every callback tolerates) is looked up, not used.
      auto it = entries_.find(watched);
      if (it == entries_.end()) continue;
      it->second.armed = false;  // one-shot: reported once
      it->second.at = kNoDeadline;
      due.push_back(watched);
    }
    const Deadline now = MonotonicClock::now();
    for (auto& [watched, entry] : entries_) {
      if (entry.at > now) continue;
      entry.at = kNoDeadline;
      if (std::find(due.begin(), due.end(), watched) == due.end()) due.push_back(watched);
    }
    // Each callback runs without the lock (it takes its connection's, and may call Watch); a
    // registration removed by an earlier callback's side effects is skipped.
    for (Watched* watched : due) {
      if (stopping_) break;
      if (entries_.find(watched) == entries_.end()) continue;
      visiting_ = watched;
      lock.unlock();
      watched->OnWatch();
      lock.lock();
      visiting_ = nullptr;
      visited_.notify_all();
    }
  }
}

}  // namespace kvport::client
