// SPDX-License-Identifier: Apache-2.0
#include "server/acceptor.h"

#include <sys/socket.h>

#include <string>

#include "kvport/log.h"
#include "protocol/messages.h"

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
                   std::vector<Worker*> workers, ServerCounters* counters, uint32_t max_connections)
    : loop_(loop),
      listener_(std::move(listener)),
      kind_(listener_->kind()),
      name_(listener_->name()),
      workers_(std::move(workers)),
      counters_(counters),
      max_connections_(max_connections) {}

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
    if (!counters_->TryAdmitConnection(max_connections_)) {
      Refuse(std::move(accepted).value());
      continue;
    }
    Worker* worker = workers_[next_worker_];
    next_worker_ = (next_worker_ + 1) % workers_.size();
    worker->Adopt(std::move(accepted).value(), kind_);
  }
}

void Acceptor::Refuse(net::Socket socket) {
  const std::string why = "the node serves its limit of " + std::to_string(max_connections_) +
                          " connections (max_connections); try again later";
  log::Warn("refusing a connection on {}: {}", name_, why);
  protocol::ErrorResponse error;
  error.code = StatusCode::kUnavailable;
  error.message = why;
  protocol::EncodedFrame frame;
  if (protocol::EncodeResponse(0, error, protocol::Limits{}, &frame).ok()) {
    // A fresh socket's send buffer takes these few bytes at once; nothing waits on it. The
    // peer reads the ERROR, then the end of the stream. Input already there is read first, so
    // that closing does not turn into a reset that could destroy the ERROR before it is read.
    iovec iov{frame.head.data(), frame.head.size()};
    (void)net::WriteV(socket.fd(), &iov, 1);
    ::shutdown(socket.fd(), SHUT_WR);
    char scratch[1024];
    iovec in{scratch, sizeof(scratch)};
    (void)net::ReadV(socket.fd(), &in, 1);
  }
  // `socket` closes here.
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
