// SPDX-License-Identifier: Apache-2.0
// Acceptor: accepts connections on one of the node's listeners and deals them to the workers.
//
// Each listener (TCP; the Unix socket when configured), watched by the first worker's loop,
// hands connections round-robin to every worker (itself included), tagged with its kind. The
// alternative, one SO_REUSEPORT listener per loop, lets the kernel spread connections by a hash of
// the 4-tuple: with the few long-lived connections of an inference cluster (a handful of clients,
// each with a small pool) hashing can leave loops idle while others serve several busy connections,
// and an ephemeral port (port 0) would need the first bind to pick it for the others. Round-robin
// is exact and accept() is rare here.
//
// Admission (docs/security.md, "Bounds"): a connection is registered as unauthenticated
// (server/unauthenticated.h) until its HELLO succeeds. One more from an address that has
// max_unauthenticated_per_address of them is refused; at max_connections the oldest
// unauthenticated connection is closed to let the new one in, and only when there is none is
// the new one refused. Refusals are an ERROR (Unavailable, request id 0, naming the limit),
// then the close.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "net/event_loop.h"
#include "net/listener.h"
#include "server/cache_service.h"
#include "server/stream_connection.h"
#include "server/unauthenticated.h"
#include "server/worker.h"

namespace kvport::server {

class Acceptor final : public net::EventHandler {
 public:
  // `loop` runs the acceptor; `workers` receive the connections; `service` names them and
  // counts them (at most `max_connections` open at once, see above); `unauthenticated` holds
  // those that have not completed HELLO. All must outlive it.
  Acceptor(net::EventLoop* loop, std::unique_ptr<net::Listener> listener,
           std::vector<Worker*> workers, CacheService* service,
           UnauthenticatedConnections* unauthenticated, uint32_t max_connections,
           WireProtocol protocol = WireProtocol::kKvport);
  ~Acceptor() override;

  // Loop thread (or before the loop runs).
  Status Start();
  // Loop thread: stops accepting and closes the listening socket (pending connections are
  // refused by the kernel from then on).
  void StopAccepting();

  // Where it listens, for logs (still known after StopAccepting).
  const std::string& name() const { return name_; }
  void OnEvents(uint32_t events) override;

 private:
  void PauseAfterError();
  // Admits `socket` (or refuses it) and hands it to the next worker.
  void Admit(net::Socket socket);
  // Tells a refused connection why (ERROR Unavailable, request id 0) and closes it; logs a
  // warning unless `warn` is false (the caller rate-limits its own).
  void Refuse(net::Socket socket, const std::string& why, bool warn = true);

  net::EventLoop* const loop_;
  std::unique_ptr<net::Listener> listener_;  // null once stopped
  const net::StreamKind kind_;
  const std::string name_;
  std::vector<Worker*> workers_;
  CacheService* const service_;
  UnauthenticatedConnections* const unauthenticated_;
  const uint32_t max_connections_;
  const WireProtocol protocol_;
  size_t next_worker_ = 0;
  bool watching_ = false;
  bool stopped_ = false;
  net::TimerId resume_timer_ = 0;
};

}  // namespace kvport::server
