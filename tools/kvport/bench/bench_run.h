// SPDX-License-Identifier: Apache-2.0
// RunBench: one `kvport bench` run. kvport first (an embedded node, or --url), over each
// transport asked for; then the limits: the raw loopback socket for TCP (the fastest of three
// socket modes, same byte volume and number of streams, writes of one call's bytes within
// 1-8 MiB) and one memcpy of the same bytes for shared memory; then redis-server through hiredis
// with the same keys and values, in redis's best pattern for the value size. (RunMatrix,
// bench_matrix.h: the same measurement over a grid of shapes.)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_log.h"
#include "bench/bench_options.h"
#include "bench/phase_result.h"
#include "kvport/status.h"

namespace kvport::bench {

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

// With options.nodes >= 2: the phases against one embedded node and against all of them as a
// cluster, per transport (see BenchOptions::nodes and BenchReport::cluster). With a cluster
// endpoint in options.url ("a:1;b:2", "etcd:HOST:PORT/CLUSTER"): the phases against that
// cluster, reported in `kvport` like any node's, and `node` names the endpoint and its nodes.
// Errors: InvalidArgument for bad options (or a transport the node cannot offer); a node that
// cannot be started or reached. Failures inside a phase are reported in the phase, not here.
Result<BenchReport> RunBench(BenchOptions options, const BenchLog& log = {});

}  // namespace kvport::bench
