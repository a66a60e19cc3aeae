#include "server/worker.h"

#include <algorithm>
#include <vector>

#include "kvport/log.h"

namespace kvport::server {

Result<std::unique_ptr<Worker>> Worker::Create(const ServerContext& server,
                                               const WorkerOptions& options,
                                               std::function<void()> on_connection_closed) {
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<net::EventLoop> loop, net::EventLoop::Create());
  return std::unique_ptr<Worker>(
      new Worker(server, options, std::move(loop), std::move(on_connection_closed)));
}

Worker::Worker(const ServerContext& server, const WorkerOptions& options,
               std::unique_ptr<net::EventLoop> loop, std::function<void()> on_connection_closed)
    : server_(server),
      options_(options),
      loop_(std::move(loop)),
      on_connection_closed_(std::move(on_connection_closed)) {}

Worker::~Worker() {
  StopAndJoin();
  stopping_ = true;  // tasks still queued (a late Adopt) must not create connections now
  // No thread runs the loop any more: this thread may touch the connections. Destroying them
  // aborts reservations and releases pins; the loop (and tasks still queued) go after.
  connections_.clear();
  loop_.reset();
}

void Worker::StartThread() {
  loop_->Post([this] { ScheduleIdleSweep(); });
  thread_ = std::thread([this] { loop_->Run(); });
}

void Worker::Adopt(net::Socket socket) {
  // std::function needs a copyable task; the shared_ptr carries the move-only socket.
  auto carried = std::make_shared<net::Socket>(std::move(socket));
  loop_->Post([this, carried] {
    if (stopping_) return;  // `carried` closes the socket
    auto connection =
        std::make_unique<Connection>(loop_.get(), std::move(*carried), server_, options_.connection,
                                     [this](Connection* c) { OnClosed(c); });
    Connection* raw = connection.get();
    connections_.emplace(raw, std::move(connection));
    Status started = raw->Start();
    if (!started.ok()) log::Warn("cannot serve a new connection: {}", started.ToString());
  });
}

void Worker::BeginShutdown() {
  loop_->Post([this] {
    stopping_ = true;
    std::vector<Connection*> all;
    for (auto& [raw, owned] : connections_)
      all.push_back(raw);
    for (Connection* c : all)
      c->BeginShutdown();
  });
}

void Worker::CloseAll() {
  loop_->Post([this] {
    stopping_ = true;
    std::vector<Connection*> all;
    for (auto& [raw, owned] : connections_)
      all.push_back(raw);
    for (Connection* c : all)
      c->Close("server stopped before the connection finished");
  });
}

void Worker::StopAndJoin() {
  loop_->Stop();
  if (thread_.joinable()) thread_.join();
}

void Worker::OnClosed(Connection* connection) {
  // Called from inside the connection: destroy it after the current event batch.
  loop_->Post([this, connection] {
    connections_.erase(connection);
    if (on_connection_closed_) on_connection_closed_();
  });
}

void Worker::ScheduleIdleSweep() {
  if (options_.idle_timeout.count() <= 0) return;
  // Check a few times per timeout so that a connection closes at most ~1.25 timeouts after its
  // last byte, without a timer per connection.
  auto period = std::clamp(options_.idle_timeout / 4, std::chrono::milliseconds(5),
                           std::chrono::milliseconds(1000));
  loop_->RunAfter(period, [this] {
    SweepIdle();
    ScheduleIdleSweep();
  });
}

void Worker::SweepIdle() {
  const net::Clock::time_point now = net::Clock::now();
  std::vector<Connection*> idle;
  for (auto& [raw, owned] : connections_) {
    if (!raw->closed() && now - raw->last_activity() >= options_.idle_timeout) idle.push_back(raw);
  }
  for (Connection* c : idle) {
    server_.counters->CountIdleTimeout();
    log::Info("connection {} idle for {} ms: closing", c->peer(), options_.idle_timeout.count());
    c->Close("idle timeout");
  }
}

}  // namespace kvport::server
