// Worker: one I/O thread, its event loop and the connections it serves.
//
// The acceptor hands each accepted socket to a worker (Adopt, from any thread); from then on
// the connection lives and dies on that worker's thread. The worker closes connections idle
// longer than the idle timeout (a periodic sweep rather than a timer per connection: one
// timer per loop, and activity costs nothing but a timestamp).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <unordered_map>

#include "net/event_loop.h"
#include "net/socket.h"
#include "server/connection.h"
#include "server/request_context.h"

namespace kvport::server {

struct WorkerOptions {
  ConnectionOptions connection;
  std::chrono::milliseconds idle_timeout{0};  // 0: never
};

class Worker {
 public:
  // `on_connection_closed` runs on the worker thread after each connection closes.
  static Result<std::unique_ptr<Worker>> Create(const ServerContext& server,
                                                const WorkerOptions& options,
                                                std::function<void()> on_connection_closed);
  // Stops the loop and joins the thread if still running; closes every connection.
  ~Worker();

  net::EventLoop* loop() { return loop_.get(); }
  void StartThread();

  // Thread-safe. Serves `socket` on this worker; closes it at once if the worker is stopping.
  void Adopt(net::Socket socket);
  // Thread-safe. Every connection finishes what is in flight, then closes; new sockets are
  // refused from now on.
  void BeginShutdown();
  // Thread-safe. Closes every connection now (aborting what is in flight).
  void CloseAll();
  // Thread-safe. Stops the loop (after the tasks already posted) and joins the thread.
  void StopAndJoin();

 private:
  Worker(const ServerContext& server, const WorkerOptions& options,
         std::unique_ptr<net::EventLoop> loop, std::function<void()> on_connection_closed);
  void ScheduleIdleSweep();
  void SweepIdle();
  void OnClosed(Connection* connection);

  const ServerContext& server_;
  const WorkerOptions options_;
  std::unique_ptr<net::EventLoop> loop_;
  std::function<void()> on_connection_closed_;
  std::thread thread_;
  bool stopping_ = false;                                                     // loop thread only
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections_;  // loop thread only
};

}  // namespace kvport::server
