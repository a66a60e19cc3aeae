// SPDX-License-Identifier: Apache-2.0
#include "server/acceptor.h"

#include "kvport/log.h"

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
                   std::vector<Worker*> workers)
    : loop_(loop),
      listener_(std::move(listener)),
      kind_(listener_->kind()),
      name_(listener_->name()),
      workers_(std::move(workers)) {}

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
    Worker* worker = workers_[next_worker_];
    next_worker_ = (next_worker_ + 1) % workers_.size();
    worker->Adopt(std::move(accepted).value(), kind_);
  }
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
