// SPDX-License-Identifier: Apache-2.0
// Worker: one I/O thread, its event loop and the connections it serves.
//
// An acceptor hands each accepted socket to a worker (Adopt, from any thread); from then on
// its session lives and dies on that worker's thread. The worker closes sessions idle longer
// than the idle timeout (a periodic sweep rather than a timer per session: one timer per loop,
// and activity costs nothing but a timestamp); a session whose shared-memory client holds
// leases or reservations is not idle (its bytes move without touching the socket). The same
// sweep aborts requests past their deadline (ConnectionOptions::request_timeout): a trickle of
// bytes keeps a session from being idle, never a request from being late. It also closes
// connections that have not completed HELLO within ConnectionOptions::hello_timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <unordered_map>

#include "net/event_loop.h"
#include "net/socket.h"
#include "server/node_tls.h"
#include "server/request_context.h"
#include "server/stream_connection.h"

namespace kvport::server {

struct WorkerOptions {
  ConnectionOptions connection;
  // The node's TLS, or null: each connection accepted gets its current context as
  // ConnectionOptions::tls (and keeps it), so a reload reaches new connections only.
  const NodeTls* tls = nullptr;
  std::chrono::milliseconds idle_timeout{0};  // 0: never
  std::chrono::microseconds busy_poll{0};     // ServerOptions::busy_poll
};

class Worker {
 public:
  // `on_connection_closed` runs on the worker thread after each session closes.
  static Result<std::unique_ptr<Worker>> Create(CacheService& service, const WorkerOptions& options,
                                                std::function<void()> on_connection_closed);
  // Stops the loop and joins the thread if still running; closes every session.
  ~Worker();

  net::EventLoop* loop() { return loop_.get(); }
  void StartThread();

  // Thread-safe. Serves `socket` (accepted by a listener of `kind` speaking `protocol`) on this
  // worker as session `id` (CacheService::NewSessionId); closes it at once if the worker is
  // stopping.
  void Adopt(net::Socket socket, net::StreamKind kind, uint64_t id,
             WireProtocol protocol = WireProtocol::kKvport);
  // Thread-safe. Closes session `id` if it is still here and has not completed HELLO (the
  // acceptor makes room for a newer connection); nothing otherwise.
  void CloseUnauthenticated(uint64_t id);
  // Thread-safe. Every session finishes what is in flight, then closes; new sockets are
  // refused from now on.
  void BeginShutdown();
  // Thread-safe. Closes every session now (aborting what is in flight).
  void CloseAll();
  // Thread-safe. Stops the loop (after the tasks already posted) and joins the thread.
  void StopAndJoin();

 private:
  Worker(CacheService& service, const WorkerOptions& options, std::unique_ptr<net::EventLoop> loop,
         std::function<void()> on_connection_closed);
  void ScheduleIdleSweep();
  void SweepIdle();
  void OnClosed(StreamConnection* connection);

  CacheService& service_;
  const WorkerOptions options_;
  std::unique_ptr<net::EventLoop> loop_;
  std::function<void()> on_connection_closed_;
  std::thread thread_;
  bool stopping_ = false;  // loop thread only
  // Loop thread only.
  std::unordered_map<StreamConnection*, std::unique_ptr<StreamConnection>> sessions_;
};

}  // namespace kvport::server
