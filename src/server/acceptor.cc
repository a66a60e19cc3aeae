// SPDX-License-Identifier: Apache-2.0
#include "server/acceptor.h"

#include <fmt/core.h>

#include <optional>
#include <string>

#include "kvport/log.h"
#include "server/parting_error.h"

namespace kvport::server {

namespace {
// Connections accepted per readiness event, so a connection storm cannot starve the loop's
// other connections.
constexpr int kMaxAcceptsPerEvent = 64;
// Back-off after accept fails (e.g. out of file descriptors): the pending connection stays
// queued, and a level-triggered listener would otherwise spin.
constexpr std::chrono::milliseconds kAcceptErrorPause(100);
}  // namespace

Acceptor::Acceptor(net::EventLoop* loop, std::unique_ptr<net::Listener> listener,
                   std::vector<Worker*> workers, CacheService* service,
                   UnauthenticatedConnections* unauthenticated, uint32_t max_connections,
                   WireProtocol protocol)
    : loop_(loop),
      listener_(std::move(listener)),
      kind_(listener_->kind()),
      name_(listener_->name()),
      workers_(std::move(workers)),
      service_(service),
      unauthenticated_(unauthenticated),
      max_connections_(max_connections),
      protocol_(protocol) {}

Acceptor::~Acceptor() {
  if (resume_timer_ != 0) loop_->CancelTimer(resume_timer_);
  if (watching_) loop_->Unwatch(listener_->fd());
}

Status Acceptor::Start() {
  KVPORT_RETURN_IF_ERROR(loop_->Watch(listener_->fd(), EPOLLIN, this));
  watching_ = true;
  return Status::Ok();
}

void Acceptor::StopAccepting() {
  if (stopped_) return;
  stopped_ = true;
  if (resume_timer_ != 0) {
    loop_->CancelTimer(resume_timer_);
    resume_timer_ = 0;
  }
  if (watching_) {
    loop_->Unwatch(listener_->fd());
    watching_ = false;
  }
  listener_.reset();  // closes the socket: the kernel refuses new connections from now on
}

void Acceptor::OnEvents(uint32_t) {
  if (stopped_ || !watching_) return;
  for (int i = 0; i < kMaxAcceptsPerEvent; ++i) {
    Result<net::Socket> accepted = listener_->Accept();
    if (!accepted.ok()) {
      log::Warn("{}; pausing accept for {} ms", accepted.status().ToString(),
                kAcceptErrorPause.count());
      PauseAfterError();
      return;
    }
    if (!accepted->valid()) return;  // nothing more pending
    Admit(std::move(accepted).value());
  }
}

void Acceptor::Admit(net::Socket socket) {
  ServerCounters& counters = service_->counters();
  const uint64_t id = service_->NewSessionId();
  const size_t worker = next_worker_;
  const std::string address = net::PeerAddress(socket.fd());
  if (AuthThrottle* throttle = unauthenticated_->throttle(); throttle != nullptr) {
    // A peer backed off after failed authentications gets no session to guess on, nor to hold
    // until its HELLO deadline.
    Status admitted = throttle->Admit(address);
    if (!admitted.ok()) {
      counters.CountAuthThrottled();
      // Such a peer may reconnect as fast as it can: one line per address and interval.
      counters.client_errors().Warn(address, "auth throttled",
                                    "connection refused: " + admitted.message(),
                                    MonotonicClock::now());
      Refuse(std::move(socket), admitted.message(), /*warn=*/false);
      return;
    }
  }
  if (!unauthenticated_->Add(id, worker, address)) {
    counters.CountRefusedForAddress();
    Refuse(std::move(socket), fmt::format("{} has {} connections that have not completed HELLO "
                                          "(max_unauthenticated_per_address); try again later",
                                          address, unauthenticated_->max_per_address()));
    return;
  }
  counters.AddUnauthenticated(1);
  if (!counters.TryAdmitConnection(max_connections_)) {
    // Full: the oldest connection that has not authenticated makes room, unless that is this
    // one (every other connection has authenticated). Never empty: this one is there.
    std::optional<UnauthenticatedConnections::Entry> victim = unauthenticated_->TakeOldest();
    counters.AddUnauthenticated(-1);
    if (victim->id == id) {
      counters.CountRefusedConnection();
      Refuse(std::move(socket), "the node serves its limit of " + std::to_string(max_connections_) +
                                    " connections (max_connections); try again later");
      return;
    }
    counters.CountUnauthenticatedEvicted();
    counters.AdmitConnectionInPlaceOfAnother();
    workers_[victim->worker]->CloseUnauthenticated(victim->id);
  }
  next_worker_ = (next_worker_ + 1) % workers_.size();
  workers_[worker]->Adopt(std::move(socket), kind_, id, protocol_);
}

void Acceptor::Refuse(net::Socket socket, const std::string& why, bool warn) {
  if (warn) log::Warn("refusing a connection on {}: {}", name_, why);
  // In the clear even on a TLS listener (no handshake is worth its cost for a refusal): a TLS
  // client sees a failed handshake, a plain one reads why.
  net::Stream stream(std::move(socket));
  if (protocol_ == WireProtocol::kResp) {
    SendPartingBytes(stream, "-ERR " + why + "\r\n");
  } else {
    SendPartingError(stream, Status::Unavailable(why));
  }
  // `stream` closes here.
}

void Acceptor::PauseAfterError() {
  loop_->Unwatch(listener_->fd());
  watching_ = false;
  resume_timer_ = loop_->RunAfter(kAcceptErrorPause, [this] {
    resume_timer_ = 0;
    if (stopped_) return;
    Status s = Start();
    if (!s.ok()) log::Error("cannot resume accepting: {}", s.ToString());
  });
}

}  // namespace kvport::server
