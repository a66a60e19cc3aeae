// SPDX-License-Identifier: Apache-2.0
// kvport::Server: a cache node (the engine of `kvport serve`), embeddable in-process.
//
//   kvport::ServerOptions options;            // 127.0.0.1, ephemeral port, 1 GiB
//   options.capacity_bytes = 64 << 20;
//   auto server = kvport::Server::Start(options);
//   if (!server.ok()) ...;                    // the Status says what was wrong
//   connect to (*server)->address();          // e.g. "127.0.0.1:40123"
//   (*server)->Stop();                        // graceful; also done by the destructor
//
// A node owns one ObjectStore (its arena is allocated up front) and `threads` I/O threads, each
// running an epoll loop. The listeners (TCP; a Unix socket when configured) live on the first
// loop and hand accepted connections to the loops round-robin. Requests on one connection are
// served in order; connections are independent. docs/protocol.md describes the wire protocol.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvport/status.h"

namespace kvport {

struct ServerOptions {
  // HOST:PORT to listen on. Loopback unless told otherwise; port 0 picks an ephemeral port.
  std::string listen = "127.0.0.1:0";
  // A Unix-domain socket to listen on as well, for clients on this host: "" none; "auto"
  // $XDG_RUNTIME_DIR/kvport-PORT.sock (or /tmp/kvport-PORT.sock without XDG_RUNTIME_DIR), PORT
  // being the TCP port bound; or an absolute path. Created with mode 0600 and removed by Stop.
  // Clients of the node's user (or root) on it may map the arena (shared memory:
  // docs/transports.md); the node tells every client the path (NODE_INFO), so a same-host
  // client that connected over TCP switches to it by itself.
  std::string unix_socket;
  // Offer the arena to clients on the Unix socket. false: the Unix socket carries bytes like
  // TCP does.
  bool shared_memory = true;
  // Per shared-memory session: answers it may hold at once before releasing (leases: values it
  // is reading through its mapping) or committing (reservations). Beyond them keys are NoSpace.
  uint32_t max_leases_per_session = 4096;
  uint32_t max_reservations_per_session = 256;
  // Bytes of the arena that holds every value (rounded down to 4 KiB).
  uint64_t capacity_bytes = uint64_t{1} << 30;
  // I/O threads; 0 means one per online CPU.
  unsigned threads = 0;

  // Protocol limits, checked before anything is allocated and announced in the HELLO
  // response. They must pass protocol::ValidateLimits (Start says which one does not).
  // 8 KiB admits LMCache's warm-up probe keys (30 + 29 x eic_kv_ns length) for any namespace.
  uint64_t max_key_bytes = 8192;
  uint64_t max_namespace_bytes = 255;
  uint64_t max_meta_bytes = 4096;
  uint64_t max_value_bytes = uint64_t{1} << 30;
  uint64_t max_batch_keys = 4096;
  uint64_t max_frame_bytes = uint64_t{16} << 20;

  // Connections the node serves at once, TCP and Unix together. One more is answered with an
  // ERROR (Unavailable, naming this limit) and closed at once, so a flood of connections costs
  // the node a bounded number of sessions and file descriptors.
  uint32_t max_connections = 4096;
  // Backpressure: a connection stops reading requests while this many response bytes are
  // queued for it (a single response may exceed it; the next request then waits).
  uint64_t max_connection_outstanding_bytes = uint64_t{256} << 20;
  // A connection with no byte read or written for this long is closed (aborting a half-received
  // MSET). Zero: never.
  std::chrono::milliseconds idle_timeout = std::chrono::seconds(300);
  // How often expired objects are swept from the store. Zero: only lazily.
  std::chrono::milliseconds ttl_sweep_interval = std::chrono::seconds(1);
  // Stop() lets in-flight requests finish for at most this long, then closes what remains.
  std::chrono::milliseconds shutdown_grace = std::chrono::seconds(10);
  // Announced in the HELLO response.
  std::string server_name = "kvport";
};

// A snapshot of the node's counters: the same names and values a STATS request returns
// (store counters such as "used_bytes", "hits"; server counters such as "connections",
// "op_mget"), plus per-namespace usage.
struct ServerStats {
  struct Namespace {
    std::string ns;
    uint64_t objects = 0;
    uint64_t bytes = 0;  // value + meta bytes
  };
  std::vector<std::pair<std::string, uint64_t>> counters;
  std::vector<Namespace> namespaces;

  // The counter named `name`, or 0 if there is none.
  uint64_t Get(std::string_view name) const;
};

class Server {
 public:
  // Validates the options, allocates the store, binds the listener and starts the I/O threads.
  // Errors: InvalidArgument (bad listen address or limits), IoError (bind, epoll, arena), with
  // a message naming the option or address.
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& options);
  // Stops (gracefully) if still running.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The port actually bound (useful with port 0).
  uint16_t port() const;
  // The bound address as HOST:PORT, e.g. "127.0.0.1:40123".
  std::string address() const;
  // The Unix socket's path; empty when the node has none.
  std::string unix_socket_path() const;

  // Graceful shutdown: stops accepting; lets every request already being received or answered
  // finish (within shutdown_grace), reads no new request, closes every connection (aborting
  // unfinished MSET reservations, so nothing half-written becomes visible), and joins the
  // threads. Idempotent; returns when everything is stopped.
  void Stop();

  ServerStats Stats() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvport
