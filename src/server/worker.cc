// SPDX-License-Identifier: Apache-2.0
#include "server/worker.h"

#include <algorithm>
#include <vector>

#include "kvport/log.h"

namespace kvport::server {

Result<std::unique_ptr<Worker>> Worker::Create(CacheService& service, const WorkerOptions& options,
                                               std::function<void()> on_connection_closed) {
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<net::EventLoop> loop, net::EventLoop::Create());
  return std::unique_ptr<Worker>(
      new Worker(service, options, std::move(loop), std::move(on_connection_closed)));
}

Worker::Worker(CacheService& service, const WorkerOptions& options,
               std::unique_ptr<net::EventLoop> loop, std::function<void()> on_connection_closed)
    : service_(service),
      options_(options),
      loop_(std::move(loop)),
      on_connection_closed_(std::move(on_connection_closed)) {}

Worker::~Worker() {
  StopAndJoin();
  stopping_ = true;  // tasks still queued (a late Adopt) must not create sessions now
  // No thread runs the loop any more: this thread may touch the sessions. Destroying them
  // aborts reservations and releases pins; the loop (and tasks still queued) go after.
  sessions_.clear();
  loop_.reset();
}

void Worker::StartThread() {
  loop_->Post([this] { ScheduleIdleSweep(); });
  thread_ = std::thread([this] { loop_->Run(); });
}

void Worker::Adopt(net::Socket socket, net::StreamKind kind) {
  // std::function needs a copyable task; the shared_ptr carries the move-only socket.
  auto carried = std::make_shared<net::Socket>(std::move(socket));
  loop_->Post([this, carried, kind] {
    if (stopping_) {
      service_.counters().ConnectionClosed();  // admitted, never served: `carried` closes it
      return;
    }
    auto session = std::make_unique<Session>(loop_.get(), std::move(*carried), kind, service_,
                                             options_.session, [this](Session* s) { OnClosed(s); });
    Session* raw = session.get();
    sessions_.emplace(raw, std::move(session));
    Status started = raw->Start();
    if (!started.ok()) log::Warn("cannot serve a new connection: {}", started.ToString());
  });
}

void Worker::BeginShutdown() {
  loop_->Post([this] {
    stopping_ = true;
    std::vector<Session*> all;
    for (auto& [raw, owned] : sessions_)
      all.push_back(raw);
    for (Session* c : all)
      c->BeginShutdown();
  });
}

void Worker::CloseAll() {
  loop_->Post([this] {
    stopping_ = true;
    std::vector<Session*> all;
    for (auto& [raw, owned] : sessions_)
      all.push_back(raw);
    for (Session* c : all)
      c->Close("server stopped before the connection finished");
  });
}

void Worker::StopAndJoin() {
  loop_->Stop();
  if (thread_.joinable()) thread_.join();
}

void Worker::OnClosed(Session* session) {
  // Called from inside the session: destroy it after the current event batch.
  loop_->Post([this, session] {
    sessions_.erase(session);
    if (on_connection_closed_) on_connection_closed_();
  });
}

void Worker::ScheduleIdleSweep() {
  const std::chrono::milliseconds idle = options_.idle_timeout;
  const std::chrono::milliseconds deadline = options_.session.request_timeout;
  if (idle.count() <= 0 && deadline.count() <= 0) return;
  // Check a few times per timeout so that a session closes at most ~1.25 timeouts after its
  // last byte (or past its request deadline), without a timer per session.
  std::chrono::milliseconds shortest = idle.count() <= 0       ? deadline
                                       : deadline.count() <= 0 ? idle
                                                               : std::min(idle, deadline);
  auto period =
      std::clamp(shortest / 4, std::chrono::milliseconds(5), std::chrono::milliseconds(1000));
  loop_->RunAfter(period, [this] {
    SweepIdle();
    ScheduleIdleSweep();
  });
}

void Worker::SweepIdle() {
  const MonotonicClock::time_point now = MonotonicClock::now();
  std::vector<Session*> idle;
  std::vector<Session*> overdue;
  for (auto& [raw, owned] : sessions_) {
    if (raw->closed()) continue;
    if (raw->holds_arena_ranges()) {
      if (const size_t aborted = raw->AbortOverdueReservations(now); aborted > 0) {
        log::Warn(
            "connection {}: {} shared-memory reservation(s) not committed within the request "
            "deadline: aborted (their space is free again; a late SHM_COMMIT is refused)",
            raw->peer(), aborted);
      }
    }
    if (raw->RequestOverdue(now)) {
      overdue.push_back(raw);  // the deadline, not idleness: bytes may still trickle in
    } else if (options_.idle_timeout.count() > 0 && !raw->holds_arena_ranges() &&
               now - raw->last_activity() >= options_.idle_timeout) {
      idle.push_back(raw);
    }
  }
  for (Session* c : overdue) {
    log::Info("connection {}: request not received within its deadline: closing", c->peer());
    c->AbortOverdueRequest();
  }
  for (Session* c : idle) {
    service_.counters().CountIdleTimeout();
    log::Info("connection {} idle for {} ms: closing", c->peer(), options_.idle_timeout.count());
    c->Close("idle timeout");
  }
}

}  // namespace kvport::server
