// SPDX-License-Identifier: Apache-2.0
// The connection's reader role: who reads the socket (a waiting caller or the socket watcher),
// how it is taken, and to whom it is handed off (the state table is in connection.h).
#include <algorithm>
#include <chrono>
#include <mutex>
#include <new>

#include "client/connection.h"
#include "client/connection_call.h"
#include "client/connection_frame.h"
#include "kvport/log.h"

namespace kvport::client {
namespace {

// How long the socket may go unread, between responses, before the watcher takes the reader
// role back from the callers. Callers that keep calling keep the role among themselves (the
// watcher wakes once per this period to look, not once per call, and its socket stays out of
// epoll meanwhile); when they stop, the watcher watches the socket again for late responses and
// for the node going away.
constexpr std::chrono::milliseconds kReaderGrace{50};
// Responses the watcher reads from one connection in one callback before it lets the others'
// callbacks run (it comes back at once).
constexpr int kResponsesPerVisit = 16;

}  // namespace

Status Connection::Wait(const Ticket& call, Deadline deadline) {
  WaitableLock lock(mu_);
  bool listed = false;
  auto unlist = [&]() REQUIRES(mu_) {
    if (!listed) return;
    listed = false;
    waiters_.erase(std::find(waiters_.begin(), waiters_.end(), call.get()));
    // It may have been the one woken to take a free role: pass the wake-up on.
    if (reader_ == Reader::kNone) HandOff();
  };
  while (call->state != Call::State::kDone) {
    if (TakeReaderRole()) {
      // Nobody is in the middle of reading: this thread reads its own response (and whatever
      // comes before it), so no other thread has to be woken to hand it over.
      unlist();
      lock.unlock();
      return ReadFor(call, deadline);
    }
    if (!listed) {
      waiters_.push_back(call.get());
      listed = true;
    }
    if (deadline == kNoDeadline) {
      lock.Wait(call->done);
    } else if (lock.WaitUntil(call->done, deadline) == std::cv_status::timeout &&
               call->state != Call::State::kDone) {
      unlist();
      lock.unlock();
      switch (Abandon(call)) {
        case Abandoned::kCompleted: {
          WaitableLock relock(mu_);
          return call->result;
        }
        case Abandoned::kBeforeResponse:
          return Status::Timeout("no response from " + peer_ + " before the deadline");
        case Abandoned::kMidResponse:
          break;
      }
      return Status::Timeout("the response from " + peer_ +
                             " was still arriving at the deadline (its rest is discarded)");
    }
  }
  unlist();
  return call->result;
}

bool Connection::TakeReaderRole() {
  const bool watcher_idle = reader_ == Reader::kWatcher && watcher_idle_;
  if (!alive_.load(std::memory_order_relaxed) || !(reader_ == Reader::kNone || watcher_idle)) {
    return false;
  }
  // From an idle watcher, without telling it: its socket may stay armed, and the callback the
  // response's arrival causes finds the role taken.
  reader_ = Reader::kCaller;
  watcher_idle_ = false;
  return true;
}

bool Connection::Poll(const Ticket& call) {
  WaitableLock lock(mu_);
  if (call->state == Call::State::kDone) return true;
  if (!TakeReaderRole()) return false;  // someone else reads: they hand the response over
  lock.unlock();
  // Reads what the socket holds now: a give-up time already passed pauses at the first wait.
  ReadUntilDone(call, MonotonicClock::now(), /*spin=*/false);
  lock.lock();
  ReleaseReader();
  return call->state == Call::State::kDone;
}

void Connection::ReadUntilDone(const Ticket& call, Deadline give_up, bool spin) {
  bool paused = false;
  while (true) {
    Status status;
    try {
      status = Advance(give_up, &paused, spin);
    } catch (const std::bad_alloc&) {
      status = Status::NoSpace("out of memory while reading a response");
    }
    if (!status.ok()) {
      if (alive()) log::Debug("connection to {} ends: {}", peer_, status.ToString());
      Close(status);
      return;
    }
    {
      WaitableLock lock(mu_);
      if (call->state == Call::State::kDone) return;
    }
    if (paused) return;
  }
}

Status Connection::ReadFor(const Ticket& call, Deadline deadline) {
  ReadUntilDone(call, deadline, /*spin=*/options_.busy_poll.count() > 0);
  WaitableLock lock(mu_);
  if (call->state != Call::State::kDone && alive_.load(std::memory_order_relaxed)) {
    // The deadline passed. Its response has not begun (a late one will be drained), or it is
    // the one half read: the next holder of the role discards the rest.
    if (call->state == Call::State::kWaiting) {
      ErasePending(call->id);
      call->state = Call::State::kDone;
      call->result = Status::Timeout("abandoned before its response began");
      ReleaseReader();
      return Status::Timeout("no response from " + peer_ + " before the deadline");
    }
    {
      MutexLock io(call->io_mu);
      call->abandoned = true;
    }
    ReleaseReader();
    return Status::Timeout("the response from " + peer_ +
                           " was still arriving at the deadline (its rest is discarded)");
  }
  // Done, or closed: a closed connection fails every pending call, this one with it.
  ReleaseReader();
  return call->result;
}

void Connection::ReleaseReader() {
  reader_ = Reader::kNone;
  watcher_idle_ = false;
  frame_open_ = frame_->open();
  free_since_ = MonotonicClock::now();
  if (!alive_.load(std::memory_order_relaxed)) {
    FailAllPending(close_reason_);
    return;
  }
  HandOff();
}

void Connection::HandOff() {
  if (!waiters_.empty()) {
    // The oldest waiter's response is likely the next on the stream.
    waiters_.front()->done.notify_all();
  } else {
    // A response is half read and nobody waits to go on with it: the watcher finishes (or
    // drains) it now. Otherwise it takes the role back after kReaderGrace, unless a call takes
    // it first (the time asked for then moves on: no system call per call).
    watcher_->Watch(this, /*readable=*/false,
                    frame_open_ ? MonotonicClock::now() : free_since_ + kReaderGrace);
  }
}

void Connection::OnWatch() {
  WaitableLock lock(mu_);
  if (!alive_.load(std::memory_order_relaxed)) {
    if (reader_ == Reader::kWatcher) ReleaseReader();  // fails what is pending
    return;
  }
  if (reader_ == Reader::kCaller) return;  // it asks for a callback when it lets the role go
  if (reader_ == Reader::kNone) {
    if (!waiters_.empty()) return;  // woken to take the role: a caller reads its own response
    const Deadline take_at = free_since_ + kReaderGrace;
    if (!frame_open_ && MonotonicClock::now() < take_at) {
      watcher_->Watch(this, /*readable=*/false, take_at);  // calls kept coming: look again then
      return;
    }
    reader_ = Reader::kWatcher;
  }
  watcher_idle_ = false;
  lock.unlock();
  // The watcher reads from here on: releases deferred until now go (later ones go at once).
  SendDeferredReleases();
  // What the socket holds now, response after response, never waiting for more. A callback is
  // the watcher's epoll finding the socket readable, or a time asked for: either way the
  // socket is asked again, whatever the last read of it found.
  stream_.SocketReadable();
  Status status;
  bool paused = false;
  bool yield = false;
  for (int responses = 0; status.ok() && !paused; ++responses) {
    if (responses == kResponsesPerVisit) {
      yield = true;  // the other connections' callbacks first
      break;
    }
    try {
      status = Advance(MonotonicClock::now(), &paused);
    } catch (const std::bad_alloc&) {
      // Decoding a response allocates (per-key tables, bounded by the bytes received); running
      // out of memory ends this connection, never the process.
      status = Status::NoSpace("out of memory while reading a response");
    }
    if (status.ok() && !paused) {
      WaitableLock check(mu_);
      if (!waiters_.empty()) break;  // a response ended and a caller waits: it goes on
    }
  }
  if (!status.ok()) {
    if (alive()) log::Debug("connection to {} ends: {}", peer_, status.ToString());
    Close(status);
  }
  lock.lock();
  if (!status.ok() || !alive_.load(std::memory_order_relaxed) || !waiters_.empty()) {
    // A caller waits: it reads its own response from here on (also the rest of a half-read
    // one).
    ReleaseReader();
    return;
  }
  watcher_idle_ = !frame_->open();
  if (yield || stream_.buffered() > 0) {
    // Bytes TLS already decrypted wake no epoll: they are read at the next callback.
    watcher_->Watch(this, /*readable=*/false, MonotonicClock::now());
  } else {
    // A response half read gives the node until its stall bound, and is failed there.
    watcher_->Watch(this, /*readable=*/true, frame_->open() ? frame_->until : kNoDeadline);
  }
}

}  // namespace kvport::client
