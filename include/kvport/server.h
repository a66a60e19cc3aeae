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
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvport/export.h"
#include "kvport/status.h"

namespace kvport {

// One token a node accepts and what it grants (docs/security.md). A namespace pattern is a
// namespace's name ("" is the default namespace), a prefix ending in '*' ("tenant-a/*"), or "*"
// alone for every namespace.
struct KVPORT_API AccessToken {
  std::string name;                // who holds it, for logs and errors (not secret); unique
  std::string secret;              // what the client presents in HELLO: 16..255 bytes
  std::vector<std::string> read;   // namespaces whose objects it may get, probe and list
  std::vector<std::string> write;  // namespaces it may put to and delete from
  bool admin = false;              // STATS of every namespace, LIST of any namespace
  // The namespace its clients mean when they name none (the `eic` drop-in's never-assigned
  // `ns`): sent to them at HELLO (protocol version 5). It must be one the token may read and
  // write. nullopt: none named, and such a call means "any namespace the token may read".
  std::optional<std::string> default_namespace;
  // Client certificates that hold this token's grant without presenting its secret, on a node
  // with mutual TLS (tls_ca_file): a certificate one of whose names (its subject's commonName,
  // a DNS or URI subjectAltName) is listed here, exactly as spelled. A name maps to one token
  // at most. With names listed, `secret` may be empty: the token is then held by certificate
  // only.
  // Last: code that brace-initializes tokens lists the fields above in this order.
  std::vector<std::string> cert_names;
};

struct KVPORT_API ServerOptions {
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
  // The Redis protocol (RESP2/RESP3, docs/resp.md) on a TCP listener of its own: "" (the
  // default) none; "HOST:PORT", or a bare "PORT" for 127.0.0.1. Served on the same I/O threads
  // under the same limits and access rule as `listen` (beyond loopback it needs tokens or
  // `insecure`; it has no TLS of its own). Config key resp_listen, `kvport serve --resp`.
  std::string resp_listen;
  // The namespaces where the Redis protocol folds LMCache's `<P>metadata`/`<P>kv_bytes` key
  // pairs into one object (docs/resp.md, "LMCache's Redis connector"); "*" for every namespace,
  // "" for the default one. Elsewhere every key is its own object, as in Redis, unless the client
  // announces itself as LMCache. Config key resp_fold_pairs (ParseRespFoldPairs).
  std::set<std::string, std::less<>> resp_fold_namespaces;
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
  // Connections that have not completed HELLO yet (docs/security.md, "Bounds"): each must do so
  // within hello_timeout of its accept, or it is closed (zero: no deadline); one peer address
  // (an IP address; on the Unix socket, a uid) may have at most max_unauthenticated_per_address
  // of them at once (one more is refused). At max_connections the oldest of them is closed to
  // let a new connection in, so connections that never send a byte cannot lock out clients
  // that present a token.
  std::chrono::milliseconds hello_timeout = std::chrono::seconds(5);
  uint32_t max_unauthenticated_per_address = 256;
  // Backpressure: a connection stops reading requests while its queued responses cost this
  // much memory (heads, bookkeeping and the pinned values they send; a single response may
  // exceed it: the next request then waits).
  uint64_t max_connection_outstanding_bytes = uint64_t{256} << 20;
  // The same, node-wide, for the heap of every connection's queued responses together (heads
  // and bookkeeping; the values they pin are the arena's, bounded by max_pinned_bytes). One
  // connection's share is at most an eighth of it; at half of it, connections with responses
  // still queued stop reading; at all of it, every connection does (docs/store.md, "Bounds on
  // node memory"). Reading resumes as queues drain. 0: automatic, capacity / 16 within
  // [16 MiB, 1 GiB].
  uint64_t max_queued_response_bytes = 0;
  // Node-wide cap on the memory of requests being received (their headers and descriptors,
  // buffered as they arrive, and a RESP command's arguments): a connection whose buffer would
  // need more waits, unread, until others' shrink, or its request deadline passes
  // (docs/store.md). 0: automatic, capacity / 8 within [max(64 MiB, max_frame_bytes), 1 GiB].
  uint64_t max_input_buffer_bytes = 0;
  // Node-wide caps beside the arena (0: automatic). max_index_bytes: heap that objects' keys,
  // metadata and index entries may take, evicted like arena space (automatic: capacity / 8).
  // max_reserved_bytes: arena bytes of writes in progress reserved and not yet written (an
  // MSET item is reserved as its bytes arrive); beyond it a key is NoSpace and nothing is
  // evicted (automatic: capacity / 2); with tokens, one token's MSETs hold at most a quarter.
  // max_pinned_bytes: arena bytes of values being read (queued MGET answers, shared-memory
  // leases); beyond it a key is NoSpace (automatic: capacity / 2). Each admits one value (a
  // whole reservation) larger than itself when nothing else is held.
  uint64_t max_index_bytes = 0;
  uint64_t max_reserved_bytes = 0;
  uint64_t max_pinned_bytes = 0;
  // A connection with no byte read or written for this long is closed (aborting a half-received
  // MSET). Zero: never.
  std::chrono::milliseconds idle_timeout = std::chrono::seconds(300);
  // Busy polling (config key busy_poll_us, the client's key for the same idea): after serving
  // events an I/O thread keeps asking for the next ones without sleeping for this long before
  // it blocks. A client calling one request at a time then finds its answer without waiting
  // for the node's thread to wake (on a VM most of a small call's round trip; docs/
  // performance.md), at the cost of a core per busy I/O thread while traffic lasts. 0 (the
  // default): sleep at once. At most 1 s.
  std::chrono::microseconds busy_poll{0};
  // UCX (docs/transports.md, "UCX"): the node registers its arena with UCX and serves
  // UCX_ATTACH on its TCP port, so clients read and write values one-sided (RDMA where the host
  // has it). Start fails naming why when UCX is not usable here (kvport doctor says). ucx_library:
  // the libucp to load ("" searches libucp.so.0; config key ucx_library, env KVPORT_UCX_LIBRARY).
  bool ucx = false;
  std::string ucx_library;
  // The disk tier (docs/store.md, "The disk tier"): objects evicted from memory are written to
  // segment files in disk_dir (created when absent) up to disk_capacity bytes (at least 64 KiB),
  // a get that misses memory reads them back, and a restart finds them again. "" (the
  // default): no disk tier, an evicted object is gone. Config keys disk_dir, disk_capacity.
  std::string disk_dir;
  uint64_t disk_capacity = uint64_t{1} << 30;
  // Per namespace, whether its evicted objects go to disk (policy memory+disk: true) or are
  // dropped as without a disk tier (memory: false); "*" for every namespace not named; a
  // namespace in neither goes to disk. Config key namespace_tiers (ParseNamespaceTiers).
  std::map<std::string, bool> namespace_on_disk;
  // Start with the objects already in disk_dir (true), or remove them and start empty.
  bool disk_restore = true;
  // Stop() writes the objects in memory (of namespaces that go to disk) to the disk tier
  // first, for at most this long, so that a restart finds them; 0: no flush (they are gone).
  std::chrono::seconds disk_stop_flush{30};
  // Request deadline: a request (header, descriptor and payload) must arrive whole within
  // request_timeout plus one second per min_request_bytes_per_sec bytes of it received so far
  // (so a large value on a slow link may take longer; a trickle may not). Past it the node
  // answers ERROR Timeout, aborts what the request reserved and closes the connection (its
  // framing is lost). The same deadline for its reserved bytes, from the ARENA_RESERVE answer,
  // bounds a shared-memory reservation: not committed by then, it is aborted (the connection
  // stays). Zero request_timeout: no deadline; zero rate: request_timeout alone.
  std::chrono::milliseconds request_timeout = std::chrono::seconds(10);
  uint64_t min_request_bytes_per_sec = uint64_t{1} << 20;
  // How often expired objects are swept from the store. Zero: only lazily.
  std::chrono::milliseconds ttl_sweep_interval = std::chrono::seconds(1);
  // Stop() lets in-flight requests finish for at most this long, then closes what remains.
  std::chrono::milliseconds shutdown_grace = std::chrono::seconds(10);
  // Announced in the HELLO response.
  std::string server_name = "kvport";

  // Access control (docs/security.md). With no token and no tokens_file the node is open:
  // every client may do everything, and Start refuses a listen address other than loopback
  // unless `insecure` says that is intended. With either, every client must present a token in
  // HELLO and may do only what its token grants. tokens_file is a YAML file of tokens
  // (docs/security.md, "Token file"), read by Start and again by ReloadTokens; its tokens are
  // added to `tokens`.
  std::vector<AccessToken> tokens;
  std::string tokens_file;
  bool insecure = false;

  // TLS for the TCP listener (docs/security.md, "TLS"): with tls_cert_file and tls_key_file
  // (PEM) the node speaks TLS 1.3 only on its TCP port; a client speaking the protocol in the
  // clear is answered that TLS is required and closed. With tls_ca_file as well, a client must
  // present a certificate that chains to it (mutual TLS), and the node then counts as access
  // controlled: it may listen beyond loopback without tokens (with tokens, a certificate holds
  // the grant of the token whose cert_names name it, or none). The Unix socket (same host,
  // shared memory) stays plain. Start fails (InvalidArgument, naming the file) on a missing or
  // unreadable file, one that is not a regular file, a key its group or other users may access,
  // a key that does not match its certificate, or only one of cert and key. ReloadTls re-reads
  // them.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;

  // Cluster membership in etcd (docs/cluster.md). With `cluster` empty (the default) the node
  // is standalone and everything below is ignored. Otherwise, once its listeners are bound,
  // Start registers the node under the cluster's prefix in etcd with a lease of lease_ttl_secs
  // (its record: node_id, advertise, capacity, transports, protocol version, a new random
  // epoch), and a thread keeps the lease alive; Stop deregisters first. etcd unreachable at
  // Start: Start fails (Unavailable, naming the endpoints and the cluster). Lost later: the
  // node keeps serving and retries; if its lease lapsed meanwhile it registers again with a
  // new epoch (once per lapse), keeping or dropping what it stores as on_lease_loss says.
  std::string cluster;
  std::vector<std::string> etcd;  // etcd client endpoints, "HOST:PORT" each; required
  // TLS and authentication to etcd (docs/security.md, "etcd"): the CA etcd's certificate must
  // chain to (set: https to every endpoint), an optional client certificate and key, and an
  // etcd user with a file whose first line is its password.
  std::string etcd_tls_ca_file;
  std::string etcd_tls_cert_file;
  std::string etcd_tls_key_file;
  std::string etcd_user;
  std::string etcd_password_file;
  // HOST:PORT clients should connect to. Empty: the bound TCP address, unless that is a
  // wildcard (0.0.0.0, ::), which Start refuses: clients could not connect to it.
  std::string advertise;
  std::string node_id;           // the node's name in the cluster; empty: the advertise address
  uint32_t lease_ttl_secs = 10;  // 1..3600: a node that stops renewing is gone after this
  // What a node whose lease lapsed does with what it stores (docs/cluster.md, "Lease loss").
  // kKeep (the default): keeps it. Right for keys whose value never changes (LMCache's and
  // SGLang's keys are content hashes), and a whole fleet cut off from etcd at once does not go
  // cold. kDrop: forgets every object, for keys that are overwritten with other values (a
  // client may have written a key elsewhere while the node was out of the cluster).
  enum class LeaseLoss { kKeep, kDrop };
  LeaseLoss on_lease_loss = LeaseLoss::kKeep;
};

// A snapshot of the node's counters: the same names and values a STATS request returns
// (store counters such as "used_bytes", "hits"; server counters such as "connections",
// "op_mget"), plus per-namespace usage.
struct KVPORT_API ServerStats {
  struct Namespace {
    std::string ns;
    uint64_t objects = 0;
    uint64_t bytes = 0;  // value + meta bytes
  };
  std::vector<std::pair<std::string, uint64_t>> counters;
  std::vector<Namespace> namespaces;
  // Latency of the requests answered, per opcode, from the arrival of a request's header to its
  // response being queued (STATS carries p50/p99 of each as latency_<op>_p50_us/_p99_us).
  struct Latency {
    std::string op;  // "mget", as in the op_mget counter
    // counts[i] requests took less than upper_ns[i] and at least upper_ns[i - 1] nanoseconds;
    // the last bucket is unbounded (upper_ns UINT64_MAX). Every power of two of nanoseconds
    // from 1024 on is a bucket bound.
    std::vector<uint64_t> upper_ns;
    std::vector<uint64_t> counts;
    uint64_t count = 0;   // the sum of counts
    uint64_t sum_ns = 0;  // of every latency recorded
    // The q-quantile (0 <= q <= 1) in nanoseconds, interpolated within its bucket; 0 when empty.
    double QuantileNs(double q) const;
  };
  std::vector<Latency> latencies;

  // The counter named `name`, or 0 if there is none.
  uint64_t Get(std::string_view name) const;
};

// Where a node is in its life: kServing from Start until Stop begins, kDraining while Stop lets
// requests in flight finish, kStopped after (an HTTP /health answers 503 unless kServing).
enum class ServerState { kServing, kDraining, kStopped };

class KVPORT_API Server {
 public:
  // Validates the options, allocates the store, binds the listener and starts the I/O threads.
  // Errors: InvalidArgument (bad listen address or limits, bad cluster options), IoError
  // (bind, epoll, arena), Unavailable (etcd did not answer: the cluster options above), with a
  // message naming the option or address.
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
  // The Redis-protocol listener's port and HOST:PORT (ServerOptions::resp_listen); 0 and ""
  // when the node has none.
  uint16_t resp_port() const;
  std::string resp_address() const;
  // The epoch of the node's record in its cluster: random, nonzero, new on every Start and
  // whenever the node registers again after its lease lapsed. 0 for a standalone node.
  uint64_t epoch() const;

  // Graceful shutdown: deregisters from its cluster (if any; clients stop sending to it at
  // once), stops accepting; lets every request already being received or answered
  // finish (within shutdown_grace), reads no new request, closes every connection (aborting
  // unfinished MSET reservations, so nothing half-written becomes visible), and joins the
  // threads. Idempotent; returns when everything is stopped.
  void Stop();

  ServerStats Stats() const;
  ServerState state() const;
  // How clients are authenticated, for logs and /metrics: "token" (tokens required), "none"
  // (an open node on loopback) or "insecure" (an open node listening beyond loopback).
  std::string auth_mode() const;
  // True when `secret` is an accepted token with the admin grant, or the node is open (what
  // the HTTP endpoint asks of a bearer token). On a node with tokens, `peer` (an address as
  // net::PeerAddress gives it; "" for none) is held to the failed-authentication budget a
  // HELLO is (docs/security.md, "Failed authentications"): a wrong secret is charged to it, and
  // while it is backed off no secret from it is looked at.
  bool GrantsAdmin(std::string_view secret, std::string_view peer = {}) const;

  // Re-reads tokens_file (what `kvport serve` does on SIGHUP) and from then on accepts its
  // tokens (with ServerOptions::tokens): a session whose token is no longer accepted is refused
  // at its next request, one whose grant changed gets the new grant. On error (the file is
  // unreadable or invalid) the tokens in force stay and the Status says why. OK and nothing
  // to do without a tokens_file.
  Status ReloadTokens();
  // Re-reads tls_cert_file, tls_key_file and tls_ca_file (`kvport serve` does this on SIGHUP,
  // with ReloadTokens) and gives connections accepted from now on the new certificates;
  // connections already open keep theirs. On error (a file missing, too open, not PEM, a key
  // not matching its certificate) the certificates in force stay, the error is logged and the
  // Status says why. OK and nothing to do without TLS.
  Status ReloadTls();

  // Tests only: moves the clock that backs off peers after failed authentications
  // (docs/security.md, "Failed authentications") forward by `by`, so a test sees a back-off end
  // without waiting for it.
  void AdvanceAuthClockForTesting(std::chrono::milliseconds by);

  // Tests only: while paused, the node renews nothing in etcd and does not re-register, as if
  // cut off from etcd (its lease lapses after lease_ttl_secs); resuming lets it find out and
  // re-register with a new epoch. No-op for a standalone node.
  void PauseClusterKeepAliveForTesting(bool paused);

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvport
