// SPDX-License-Identifier: Apache-2.0
#include "server/worker.h"

#include <fmt/core.h>

#include <algorithm>
#include <vector>

#include "kvport/log.h"
#include "server/kvport_protocol.h"
#include "server/resp_protocol.h"

namespace kvport::server {

Result<std::unique_ptr<Worker>> Worker::Create(CacheService& service, const WorkerOptions& options,
                                               std::function<void()> on_connection_closed) {
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<net::EventLoop> loop, net::EventLoop::Create());
  if (options.busy_poll.count() > 0) {
    ServerCounters* counters = &service.counters();
    loop->SetBusyPoll(options.busy_poll, [counters] { counters->CountBusyPollHit(); });
  }
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

void Worker::Adopt(net::Socket socket, net::StreamKind kind, uint64_t id, WireProtocol protocol) {
  // std::function needs a copyable task; the shared_ptr carries the move-only socket.
  auto carried = std::make_shared<net::Socket>(std::move(socket));
  loop_->Post([this, carried, kind, id, protocol] {
    if (stopping_) {
      // Admitted, never served: `carried` closes it.
      if (options_.connection.unauthenticated != nullptr &&
          options_.connection.unauthenticated->Remove(id)) {
        service_.counters().AddUnauthenticated(-1);
      }
      service_.counters().ConnectionClosed();
      return;
    }
    ConnectionOptions options = options_.connection;
    if (options_.tls != nullptr) options.tls = options_.tls->current();
    auto session =
        std::make_unique<StreamConnection>(loop_.get(), std::move(*carried), kind, id, service_,
                                           options, [this](StreamConnection* c) { OnClosed(c); });
    if (protocol == WireProtocol::kResp) {
      session->set_handler(std::make_unique<RespProtocol>(*session, loop_.get()));
    } else {
      session->set_handler(std::make_unique<KvportProtocol>(*session));
    }
    StreamConnection* raw = session.get();
    sessions_.emplace(raw, std::move(session));
    Status started = raw->Start();
    if (!started.ok()) log::Warn("cannot serve a new connection: {}", started.ToString());
  });
}

void Worker::CloseUnauthenticated(uint64_t id) {
  loop_->Post([this, id] {
    for (auto& [raw, owned] : sessions_) {
      if (raw->id() != id) continue;
      if (!raw->authenticated() && !raw->closed()) {
        log::Debug(
            "connection {} closed before HELLO to make room for a new connection "
            "(max_connections)",
            raw->peer());
        raw->CloseWithError(Status::Unavailable(
            "closed before HELLO: the node is at max_connections and a newer connection took "
            "the slot of the oldest one that had not authenticated"));
      }
      return;
    }
  });
}

void Worker::BeginShutdown() {
  loop_->Post([this] {
    stopping_ = true;
    std::vector<StreamConnection*> all;
    for (auto& [raw, owned] : sessions_)
      all.push_back(raw);
    for (StreamConnection* c : all)
      c->BeginShutdown();
  });
}

void Worker::CloseAll() {
  loop_->Post([this] {
    stopping_ = true;
    std::vector<StreamConnection*> all;
    for (auto& [raw, owned] : sessions_)
      all.push_back(raw);
    for (StreamConnection* c : all)
      c->Close("server stopped before the connection finished");
  });
}

void Worker::StopAndJoin() {
  loop_->Stop();
  if (thread_.joinable()) thread_.join();
}

void Worker::OnClosed(StreamConnection* session) {
  // Called from inside the session: destroy it after the current event batch.
  loop_->Post([this, session] {
    sessions_.erase(session);
    if (on_connection_closed_) on_connection_closed_();
  });
}

void Worker::ScheduleIdleSweep() {
  // Check a few times per timeout so that a session closes at most ~1.25 timeouts after its
  // last byte (or past its request or HELLO deadline), without a timer per session.
  std::chrono::milliseconds shortest = std::chrono::milliseconds::max();
  for (std::chrono::milliseconds timeout :
       {options_.idle_timeout, options_.connection.request_timeout,
        options_.connection.hello_timeout}) {
    if (timeout.count() > 0) shortest = std::min(shortest, timeout);
  }
  if (shortest == std::chrono::milliseconds::max()) return;
  auto period =
      std::clamp(shortest / 4, std::chrono::milliseconds(5), std::chrono::milliseconds(1000));
  loop_->RunAfter(period, [this] {
    SweepIdle();
    ScheduleIdleSweep();
  });
}

void Worker::SweepIdle() {
  const MonotonicClock::time_point now = MonotonicClock::now();
  std::vector<StreamConnection*> idle;
  std::vector<StreamConnection*> overdue;
  std::vector<StreamConnection*> no_hello;
  for (auto& [raw, owned] : sessions_) {
    if (raw->closed()) continue;
    if (raw->HelloOverdue(now)) {
      no_hello.push_back(raw);
      continue;
    }
    if (raw->holds_arena_ranges()) {
      if (const size_t aborted = raw->AbortOverdueReservations(now); aborted > 0) {
        log::Warn(
            "connection {}: {} shared-memory reservation(s) not committed within the request "
            "deadline: aborted (their space is free again; a late ARENA_COMMIT is refused)",
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
  for (StreamConnection* c : no_hello) {
    // A silent connection counts against its address like a wrong token, so an address that
    // renews connections which never authenticate is backed off as a guesser is.
    if (options_.connection.unauthenticated != nullptr)
      options_.connection.unauthenticated->ChargeHelloTimeout(c->id());
    service_.counters().CountHelloTimeout();
    log::Debug("connection {}: no HELLO within {} ms: closing", c->peer(),
               options_.connection.hello_timeout.count());
    c->CloseWithError(
        Status::Timeout(fmt::format("no HELLO within the node's hello_timeout ({} ms)",
                                    options_.connection.hello_timeout.count())));
  }
  for (StreamConnection* c : overdue) {
    log::Info("connection {}: request not received within its deadline: closing", c->peer());
    c->AbortOverdueRequest();
  }
  for (StreamConnection* c : idle) {
    service_.counters().CountIdleTimeout();
    log::Info("connection {} idle for {} ms: closing", c->peer(), options_.idle_timeout.count());
    c->Close("idle timeout");
  }
}

}  // namespace kvport::server
