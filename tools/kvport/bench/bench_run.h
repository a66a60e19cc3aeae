// SPDX-License-Identifier: Apache-2.0
// RunBench: one `kvport bench` run. kvport first (an embedded node, or --url), over each
// transport asked for; then the limits: the raw loopback socket for TCP (the fastest of three
// socket modes, same byte volume and number of streams, writes of one call's bytes within
// 1-8 MiB) and one memcpy of the same bytes for shared memory; then redis-server through hiredis
// with the same keys and values, in redis's best pattern for the value size.
//
// RunMatrix: the same measurement over a grid of shapes (value size x batch x connections x
// transport), each row with its limits from the same run (the streaming limit, and the round
// trip of a call of its shape), bounded in time per row.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_options.h"
#include "bench/phase_result.h"
#include "kvport/server.h"
#include "kvport/status.h"

namespace kvport::bench {

// Whether this build's embedded node can offer the shared-memory transport (the server has a
// Unix-socket listener: ServerOptions::unix_socket).
bool EmbeddedNodeOffersShm();

// The options of an embedded node (RunBench, RunMatrix, RunDiskBench): `capacity` bytes of
// memory, `threads` I/O threads (0: one per CPU), values and batches up to the bench's, no idle
// timeout. It busy polls as long as the bench's client does (--busy-poll-us): a round trip
// spins on both ends or on neither, as the round-trip limit's busy-poll mode does.
ServerOptions EmbeddedServerOptions(uint64_t capacity, unsigned threads, int64_t busy_poll_us,
                                    uint64_t max_value, uint64_t max_batch);

struct BenchReport {
  BenchOptions options;  // as run: value_bytes resolved from the shape when one was given
  std::string node;      // "embedded 127.0.0.1:PORT (capacity ..., N I/O threads)" or the URL
  std::vector<Transport> transports;  // the transports measured, in order
  std::string transport_note;         // why shared memory was not measured (auto), or empty
  std::vector<PhaseResult> kvport;    // variant: the transport ("tcp", "shm")
  std::vector<PhaseResult> socket;    // every socket mode measured
  std::vector<PhaseResult> memcpy;    // the memcpy baseline's ways (when shm was measured)
  std::vector<PhaseResult> redis;     // variant: the pattern ("pipeline 16", "no pipeline")
  // With UCX measured: ucx_perftest's put and get of the value size (the UCX limit).
  std::vector<PhaseResult> ucx_perftest;
  std::string socket_skipped;  // why there is no socket baseline, when there is none
  std::string redis_skipped;   // why there is no redis baseline, when there is none
  // The Python-driven peers asked for (BenchOptions::python_peers), in order: each one's
  // phases (variant: its release), or why it has none.
  struct Peer {
    std::string system;
    std::vector<PhaseResult> phases;
    std::string skipped;
  };
  std::vector<Peer> peers;
  // --nodes N (N >= 2): `kvport` holds the phases against the first node alone, `cluster` the
  // same phases against the N nodes as one static cluster (system "cluster", variant the
  // transport), measured in the same run; cluster_endpoint is the endpoint that cluster's
  // client was given ("127.0.0.1:P1;127.0.0.1:P2;..."). Empty with one node.
  std::vector<PhaseResult> cluster;
  std::string cluster_endpoint;

  // The fastest socket mode (the TCP limit), or null.
  const PhaseResult* Limit() const;
  // The shared-memory limit: the memcpy through the pool when it ran, else into the read
  // buffers (see RunMemcpyBaseline); null when there is none.
  const PhaseResult* MemcpyLimit() const;
  // The limit of a transport's `op`: Limit() for TCP, MemcpyLimit() for shm, ucx_perftest's
  // phase of `op` for UCX.
  const PhaseResult* LimitFor(Transport transport, Op op = Op::kPut) const;
  // The kvport phase of `op` over `transport`, or null.
  const PhaseResult* FindKvport(Op op, Transport transport = Transport::kTcp) const;
  // The phase of `system` ("kvport": over TCP; "redis", or a Python-driven peer) for `op`, or
  // null.
  const PhaseResult* Find(std::string_view system, Op op) const;
  // kvport GB/s over its transport's limit (put and get), and kvport over redis (GB/s for put
  // and get, keys/s for exists); nullopt when either side is missing or failed.
  std::optional<double> RatioToLimit(Op op, Transport transport = Transport::kTcp) const;
  std::optional<double> RatioToRedis(Op op, Transport transport = Transport::kTcp) const;
  // The same against any peer ("redis", "mooncake", "lmcache-server").
  std::optional<double> RatioToPeer(std::string_view peer, Op op,
                                    Transport transport = Transport::kTcp) const;
  // --nodes: the cluster's phase of `op` over `transport`, or null; and the cluster over the
  // one node (GB/s for put and get, keys/s for exists), nullopt when either is missing or failed.
  const PhaseResult* FindCluster(Op op, Transport transport = Transport::kTcp) const;
  std::optional<double> RatioClusterToNode(Op op, Transport transport = Transport::kTcp) const;
  // True when every phase ran without an error or a failed key.
  bool AllPassed() const;
};

// Progress notes ("starting redis-server ...") for the person waiting; may be empty.
using BenchLog = std::function<void(std::string_view)>;

// With options.nodes >= 2: the phases against one embedded node and against all of them as a
// cluster, per transport (see BenchOptions::nodes and BenchReport::cluster). With a cluster
// endpoint in options.url ("a:1;b:2", "etcd:HOST:PORT/CLUSTER"): the phases against that
// cluster, reported in `kvport` like any node's, and `node` names the endpoint and its nodes.
// Errors: InvalidArgument for bad options (or a transport the node cannot offer); a node that
// cannot be started or reached. Failures inside a phase are reported in the phase, not here.
Result<BenchReport> RunBench(BenchOptions options, const BenchLog& log = {});

// --- The matrix ------------------------------------------------------------------------------

struct MatrixOptions {
  std::vector<uint64_t> value_sizes = {uint64_t{64} << 10, uint64_t{1} << 20, uint64_t{4} << 20,
                                       uint64_t{32} << 20};
  std::vector<size_t> batches = {1, 16};
  std::vector<int> connections = {1, 4};  // one calling thread per connection
  TransportChoice transport = TransportChoice::kAuto;
  // Calls per put/get phase: `count` when set, else enough calls to move about `phase_bytes`
  // (at least 8, at most 20000); every phase stops at `max_seconds` anyway.
  std::optional<uint64_t> count;
  uint64_t phase_bytes = uint64_t{1} << 30;
  double max_seconds = 2;
  unsigned node_threads = 0;  // embedded node I/O threads (0: one per CPU)
  // Client and embedded node busy poll this long (BenchOptions::busy_poll_us); the round-trip
  // limit is the faster of its blocking and busy-poll modes either way.
  int64_t busy_poll_us = 0;
  bool socket_baseline = true;
  std::string ns = "bench";
  // Python-driven peers (bench/peer_driver.h) at every shape, beside the shape's TCP row.
  std::vector<std::string> python_peers;
  std::string peers_dir;

  // The calls of a row's phases.
  uint64_t calls_for(uint64_t value_bytes, size_t batch) const;
  Status Validate() const;
};

struct MatrixRow {
  uint64_t value_bytes = 0;
  size_t batch = 0;
  int connections = 0;
  Transport transport = Transport::kTcp;
  PhaseResult put;
  PhaseResult get;
  // The row's limit: the fastest socket mode with its connections as streams and writes of one
  // call's bytes (1-8 MiB) (TCP), the faster memcpy of its batch on as many threads (shm), or
  // ucx_perftest's ucp_put_bw of its value size (UCX; `limit_get` then holds its ucp_get, the
  // get's limit). Empty system when it was not measured.
  PhaseResult limit;
  PhaseResult limit_get;
  // shm rows: the memcpy into the same buffers every call (for information: cache-warm for
  // small batches, so faster than any copy into an arena larger than the caches).
  PhaseResult memcpy_buffers;
  // tcp rows: the blocking socket mode (for information when a busy-polling mode is the limit).
  PhaseResult socket_blocking;
  // The row's round-trip limits (round_trip_baseline.h), what a call of its shape costs when,
  // like a kvport call, it is a request and a response one at a time per connection: tcp rows,
  // a put's request (its values) and answer, and a get's, on bare loopback sockets, the faster
  // of blocking and busy-poll; shm rows, a small control round trip on a Unix socket plus one
  // copy of the batch at the row's memcpy limit. Empty system when not measured.
  PhaseResult round_trip_put;
  PhaseResult round_trip_get;
  // tcp rows, with MatrixOptions::python_peers: each peer at the same shape, in that order.
  struct Peer {
    std::string system;
    PhaseResult put;
    PhaseResult get;
  };
  std::vector<Peer> peers;

  std::optional<double> RatioToLimit(Op op) const;
  std::optional<double> RatioToRoundTrip(Op op) const;
  // kvport over peer `system` (GB/s); nullopt when it was not measured or failed.
  std::optional<double> RatioToPeer(std::string_view system, Op op) const;
  bool Passed() const;
};

struct MatrixReport {
  MatrixOptions options;
  std::string node;
  std::vector<Transport> transports;
  std::string transport_note;
  std::vector<MatrixRow> rows;           // in the order run: largest values first
  std::vector<PhaseResult> socket;       // every socket measurement (variant: "mode, N streams, W")
  std::vector<PhaseResult> round_trips;  // every round-trip measurement (variant: its shape)
  std::string socket_skipped;
  // Python-driven peers asked for that could not run at all: (system, why).
  std::vector<std::pair<std::string, std::string>> peers_skipped;
  double seconds = 0;  // the whole matrix, wall time

  bool AllPassed() const;
};

// Runs every row on one embedded node (sized for the largest row, warmed once; each
// shared-memory client's mapping warmed once), then the socket limits. Errors as RunBench's.
Result<MatrixReport> RunMatrix(const MatrixOptions& options, const BenchLog& log = {});

}  // namespace kvport::bench
