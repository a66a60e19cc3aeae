// SPDX-License-Identifier: Apache-2.0
#include "server/stream_connection.h"

#include <fmt/core.h>
#include <sys/epoll.h>

#include "kvport/log.h"
#include "server/cache_service.h"
#include "server/parting_error.h"
#include "server/request_deadline.h"

namespace kvport::server {

StreamConnection::StreamConnection(net::EventLoop* loop, net::Socket socket, net::StreamKind kind,
                                   uint64_t id, CacheService& service,
                                   const ConnectionOptions& options,
                                   std::function<void(StreamConnection*)> on_closed)
    : loop_(loop),
      stream_(std::move(socket)),
      kind_(kind),
      id_(id),
      service_(service),
      options_(options),
      on_closed_(std::move(on_closed)),
      peer_(net::PeerName(stream_.fd())),
      budget_(service.counters(), options_),
      last_activity_(loop->Now()),
      accepted_at_(loop->Now()),
      mailbox_(std::make_shared<ConnectionMailbox>(loop, this)) {}

StreamConnection::~StreamConnection() {
  mailbox_->Detach();  // the disk tier's threads may still finish work of ours: it is dropped
  if (phase_ != Phase::kClosed) {
    // The owner is destroying us (server stopping): release everything, but do not call back.
    on_closed_ = nullptr;
    Close("server stopped");
  }
}

void StreamConnection::HoldChange() {
  budget_.HoldChange();
}

void StreamConnection::ReleaseChange() {
  budget_.ReleaseChange();
  if (budget_.held_changes() == 0) {
    Flush();
  } else {
    UpdateInterest();  // below the cap again: it may read on
  }
}

Status StreamConnection::Start() {
  if (options_.tls != nullptr && kind_ == net::StreamKind::kTcp) {
    Status started = stream_.StartTls(*options_.tls, "");
    if (!started.ok()) {
      Close("cannot start TLS: " + started.ToString());
      return started;
    }
    phase_ = Phase::kTlsHandshake;
  } else {
    if (const size_t ahead = handler_->read_ahead_bytes(); ahead > 0)
      stream_.EnableReadAhead(ahead);
    handler_->Opened();
  }
  interest_ = EPOLLIN;
  Status watched = loop_->Watch(stream_.fd(), interest_, this);
  if (!watched.ok()) Close("cannot watch the socket: " + watched.ToString());
  return watched;
}

void StreamConnection::AdvanceTlsHandshake() {
  if (!first_byte_checked_) {
    // A client in the clear opens with its protocol's first byte, not a TLS record: tell it what
    // is wrong, in words it can read.
    Result<std::optional<bool>> opens_tls = net::FirstByteOpensTls(stream_.fd());
    if (!opens_tls.ok()) {
      Close(opens_tls.status().message());
      return;
    }
    if (!opens_tls->has_value()) return;  // nothing yet
    first_byte_checked_ = true;
    if (!**opens_tls) {
      service_.counters().CountTlsHandshakeFailure();
      net::Socket socket = std::move(stream_.socket());
      stream_ = net::Stream(std::move(socket));  // no TLS: the answer goes in the clear
      SendPartingBytes(stream_, handler_->PartingError(Status::PermissionDenied(
                                    "this node requires TLS: connect with TLS and the node's CA "
                                    "(docs/security.md)")));
      Close("peer does not speak TLS");
      return;
    }
  }
  Result<net::TlsWait> step = stream_.Handshake();
  if (!step.ok()) {
    service_.counters().CountTlsHandshakeFailure();
    log::Debug("{} {} from {}: {}", handler_->name(), id_, peer_, step.status().ToString());
    // OpenSSL has queued its alert (a missing or refused client certificate...). In TLS 1.3
    // the client may already be sending its first request: closing with that unread would be a
    // reset, which can destroy the alert before the client reads it. Half-close and drain.
    net::Socket socket = std::move(stream_.socket());
    stream_ = net::Stream(std::move(socket));
    HalfCloseAndLinger();
    return;
  }
  tls_wait_ = *step;
  if (tls_wait_ != net::TlsWait::kNone) {
    UpdateInterest();
    return;
  }
  service_.counters().CountTlsHandshake(stream_.tls()->kernel_send());
  log::Debug("{} {} from {}: {}{}", handler_->name(), id_, peer_, stream_.tls()->Describe(),
             stream_.tls()->kernel_send() ? " (kernel TLS)" : "");
  phase_ = Phase::kOpen;
  Touch();
  handler_->Opened();
  // The first request may already be in, behind the client's last handshake record.
  OnReadable();
}

void StreamConnection::OnEvents(uint32_t events) {
  if (closed()) return;  // an event fetched in the same batch as our close
  if (events & EPOLLERR) {
    Close("socket error");
    return;
  }
  if (events & (EPOLLIN | EPOLLHUP)) stream_.SocketReadable();
  if (phase_ == Phase::kTlsHandshake) {
    AdvanceTlsHandshake();
    return;
  }
  if (events & EPOLLOUT) Flush();
  if (closed()) return;
  if (events & (EPOLLIN | EPOLLHUP)) OnReadable();
  if (closed()) return;
  if ((events & EPOLLHUP) && !(interest_ & EPOLLIN) && out_.empty()) Close("peer hung up");
}

void StreamConnection::OnReadable() {
  if (phase_ == Phase::kLinger) {
    DiscardInput();
    return;
  }
  if (phase_ != Phase::kOpen) return;
  event_read_bytes_ = 0;
  handler_->OnReadable();
  if (closed()) return;
  // One shared counter update per readiness event, none for an event that read nothing.
  if (const uint64_t reads = stream_.TakeSocketReads(); reads > 0)
    service_.counters().AddSocketReads(reads);
  Flush();
}

void StreamConnection::BeginRequest(uint64_t already) {
  request_arrival_ = loop_->Now();
  request_bytes_ = already;
}

void StreamConnection::Received(size_t bytes) {
  if (bytes == 0) return;
  Touch();
  service_.counters().AddBytesReceived(bytes);
  request_bytes_ += bytes;
  event_read_bytes_ += bytes;
}

void StreamConnection::Flush() {
  if (closed()) return;
  // Before writing too: once the answer is out, its client may look at the node's gauges.
  SyncMemory();
  if (!out_.empty() && budget_.held_changes() == 0) {
    if (queue_was_empty_) output_waiting_since_ = loop_->Now();  // answers began to wait
    Result<net::IoProgress> r = out_.WriteTo(stream_, kMaxBytesPerEvent);
    if (!r.ok()) {
      Close(r.status().message());
      return;
    }
    if (r->bytes > 0) output_waiting_since_ = loop_->Now();
    if (r->bytes > 0) {
      Touch();
      service_.counters().AddBytesSent(r->bytes);
    }
  }
  SyncMemory();
  queue_was_empty_ = out_.empty();
  if (out_.empty() && budget_.held_changes() == 0) AfterOutputDrained();
  UpdateInterest();
}

void StreamConnection::AfterOutputDrained() {
  handler_->OutputDrained();
  if (phase_ == Phase::kFinishing) {
    HalfCloseAndLinger();
  } else if (phase_ == Phase::kOpen && shutting_down_ && !handler_->RequestUnderWay() &&
             !handler_->HasServableInput()) {
    HalfCloseAndLinger();
  }
}

void StreamConnection::Finish() {
  if (phase_ != Phase::kOpen) return;
  phase_ = Phase::kFinishing;
}

void StreamConnection::HalfCloseAndLinger() {
  // Our FIN follows the last answer; closing outright could turn it into a reset (if unread
  // input is pending) that destroys the answer before the peer reads it.
  stream_.ShutdownWrite();
  phase_ = Phase::kLinger;
  linger_timer_ = loop_->RunAfter(options_.linger, [this] {
    linger_timer_ = 0;
    Close("peer did not close after our half-close");
  });
  UpdateInterest();
}

void StreamConnection::DiscardInput() {
  DiscardedInput dropped = DiscardLingeringInput(stream_);
  discarded_bytes_ += dropped.bytes;
  if (!dropped.open) {
    Close("closed after half-close");
  } else if (!authenticated() && discarded_bytes_ > kMaxUnauthenticatedDiscard) {
    Close("unauthenticated peer went on sending after our half-close");
  }
}

void StreamConnection::BeginShutdown() {
  if (closed() || shutting_down_) return;
  shutting_down_ = true;
  const bool idle =
      phase_ == Phase::kTlsHandshake ||
      (phase_ == Phase::kOpen && !handler_->RequestUnderWay() && !handler_->HasServableInput());
  if (idle && out_.empty()) {
    Close("server stopping");  // nothing in flight to finish
    return;
  }
  UpdateInterest();
}

bool StreamConnection::WantsToRead() const {
  switch (phase_) {
    case Phase::kOpen:
      return handler_->WantsToRead();
    case Phase::kLinger:
      return true;
    case Phase::kTlsHandshake:  // reads only handshake records (AdvanceTlsHandshake)
    case Phase::kFinishing:
    case Phase::kClosed:
      return false;
  }
  return false;
}

void StreamConnection::ScheduleRead() {
  if (read_timer_ != 0) return;
  read_timer_ = loop_->RunAfter(std::chrono::milliseconds(0), [this] {
    read_timer_ = 0;
    if (!closed()) OnReadable();
  });
}

void StreamConnection::UpdateInterest() {
  if (closed()) return;
  uint32_t want = 0;
  if (phase_ == Phase::kTlsHandshake) {
    want = tls_wait_ == net::TlsWait::kWrite ? EPOLLOUT : EPOLLIN;
  } else {
    if (WantsToRead()) {
      want |= EPOLLIN;
      // Decrypted or read-ahead bytes already taken from the socket: epoll will not report them.
      if (phase_ == Phase::kOpen && stream_.buffered() > 0) ScheduleRead();
    }
    // Complete requests buffered wake no epoll event either; they run once the queues allow.
    if (phase_ == Phase::kOpen && handler_->HasServableInput() &&
        QueueThrottle() == Throttle::kNone) {
      ScheduleRead();
    }
    if (!out_.empty() && budget_.held_changes() == 0) want |= EPOLLOUT;
    WatchThrottle();
  }
  if (want == interest_) return;
  Status modified = loop_->Modify(stream_.fd(), want, this);
  if (!modified.ok()) {
    Close("cannot update epoll interest: " + modified.ToString());
    return;
  }
  interest_ = want;
}

void StreamConnection::WatchThrottle() {
  const Throttle throttle = phase_ == Phase::kOpen ? handler_->Throttled() : Throttle::kNone;
  budget_.SetPaused(throttle != Throttle::kNone);
  // Over our own cap, our queue's EPOLLOUT wakes us; over the node's, other connections'
  // queues must drain, which no event of ours tells: look again shortly.
  if (throttle == Throttle::kNode && resume_timer_ == 0) {
    resume_timer_ = loop_->RunAfter(kResumeCheck, [this] {
      resume_timer_ = 0;
      UpdateInterest();
    });
  } else if (throttle != Throttle::kNode && resume_timer_ != 0) {
    loop_->CancelTimer(resume_timer_);
    resume_timer_ = 0;
  }
}

void StreamConnection::Close(std::string_view reason) {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  for (net::TimerId* timer : {&linger_timer_, &resume_timer_, &read_timer_}) {
    if (*timer != 0) {
      loop_->CancelTimer(*timer);
      *timer = 0;
    }
  }
  loop_->Unwatch(stream_.fd());
  handler_->Closed();  // a request under way is aborted; leases, reservations, cursors end
  out_.Clear();        // pins of unsent answers are released
  budget_.Release();   // the node's gauges lose this connection's share
  if (!authenticated()) LeaveUnauthenticated();
  service_.SessionEnded(id_);
  service_.counters().ConnectionClosed();
  // Last: a peer that sees the connection end finds the node's counters already settled.
  stream_.Close();
  log::Debug("{} {} closed: {}", handler_->name(), peer_, reason);
  if (on_closed_) on_closed_(this);
}

void StreamConnection::SyncMemory() {
  budget_.Sync(out_.heap_bytes() + handler_->gathered_bytes(), handler_->input_buffer_bytes());
}

void StreamConnection::Authenticated() {
  LeaveUnauthenticated();
}

void StreamConnection::LeaveUnauthenticated() {
  if (options_.unauthenticated != nullptr && options_.unauthenticated->Remove(id_)) {
    service_.counters().AddUnauthenticated(-1);
  }
}

bool StreamConnection::HelloOverdue(MonotonicClock::time_point now) const {
  return options_.hello_timeout.count() > 0 && !closed() && !authenticated() &&
         now - accepted_at_ > options_.hello_timeout;
}

void StreamConnection::CloseWithError(const Status& status) {
  if (closed()) return;
  if (out_.empty() && phase_ != Phase::kLinger)
    SendPartingBytes(stream_, handler_->PartingError(status));
  Close(status.message());
}

bool StreamConnection::AnswersOverdue(MonotonicClock::time_point now) const {
  // Answers held for the disk wait for the node, not for the peer.
  if (options_.request_timeout.count() <= 0 || phase_ != Phase::kOpen || out_.empty() ||
      budget_.held_changes() > 0 || QueueThrottle() == Throttle::kNone) {
    return false;
  }
  return now - output_waiting_since_ > AllowedTime(options_.request_timeout,
                                                   options_.min_request_bytes_per_sec,
                                                   out_.memory_bytes());
}

bool StreamConnection::RequestOverdue(MonotonicClock::time_point now) const {
  if (options_.request_timeout.count() <= 0 || phase_ != Phase::kOpen) return false;
  if (AnswersOverdue(now)) return true;
  if (!handler_->RequestUnderWay()) return false;
  return now - request_arrival_ >
         AllowedTime(options_.request_timeout, options_.min_request_bytes_per_sec, request_bytes_);
}

size_t StreamConnection::AbortOverdueReservations(MonotonicClock::time_point now) {
  if (options_.request_timeout.count() <= 0) return 0;
  return handler_->AbortOverdueReservations(now);
}

void StreamConnection::AbortOverdueRequest() {
  if (phase_ != Phase::kOpen) return;
  const auto waited = [this](MonotonicClock::time_point since) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(loop_->Now() - since).count();
  };
  if (AnswersOverdue(loop_->Now())) {
    // Its answers cannot be followed by an error it would read: it reads nothing.
    service_.counters().CountUnreadAnswersClose();
    const std::string why = fmt::format(
        "peer took none of its {} queued answer bytes in {} ms while held back by backpressure "
        "(request_timeout {} ms, min_request_bytes_per_sec {})",
        out_.memory_bytes(), waited(output_waiting_since_), options_.request_timeout.count(),
        options_.min_request_bytes_per_sec);
    service_.counters().client_errors().Warn(peer_, "closed: answers not read", why, loop_->Now());
    Close(why);
    return;
  }
  service_.counters().CountRequestTimeout();
  handler_->FailRequest(Status::Timeout(
      fmt::format("{} did not arrive within the node's request deadline ({} bytes in {} ms; "
                  "request_timeout {} ms, min_request_bytes_per_sec {})",
                  handler_->RequestName(), request_bytes_, waited(request_arrival_),
                  options_.request_timeout.count(), options_.min_request_bytes_per_sec)));
  Finish();
  Flush();
}

}  // namespace kvport::server
