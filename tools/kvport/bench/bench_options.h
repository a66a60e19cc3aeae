// SPDX-License-Identifier: Apache-2.0
// What `kvport bench` runs: the workload, the node it runs against, and the baselines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/model_shape.h"
#include "kvport/status.h"

namespace kvport::bench {

enum class Op { kPut, kGet, kExists };

// "put", "get", "exists".
std::string_view OpName(Op op);
// Parses "put,get,exists" (any order, no repeats, at least one); InvalidArgument otherwise.
Result<std::vector<Op>> ParseOps(std::string_view list);
// The inverse of ParseOps: "put,get".
std::string OpList(const std::vector<Op>& ops);

// How the client reaches the node: TCP (loopback here), the same-host shared-memory transport
// (a Unix socket for control frames, value bytes copied through the node's arena mapped into
// the client), or UCX (control frames over TCP, value bytes as UCX messages that the node
// copies into and out of its arena, over the transports UCX_TLS allows). Each is compared with its
// own limit: the raw loopback socket for TCP, one memcpy of the same bytes for shared memory,
// ucx_perftest's put and get of the same message size for UCX.
enum class Transport { kTcp, kShm, kUcx };
// "tcp", "shm", "ucx".
std::string_view TransportName(Transport transport);

// --transport: tcp, shm, both, ucx (alone: the node then offers UCX and no shared memory, so
// the client's eic_trans_type 2 takes UCX), or auto (both when the node offers shared memory,
// else tcp).
enum class TransportChoice { kAuto, kTcp, kShm, kBoth, kUcx };
Result<TransportChoice> ParseTransportChoice(std::string_view name);
std::string_view TransportChoiceName(TransportChoice choice);

// The most embedded nodes --nodes starts.
inline constexpr int kMaxBenchNodes = 16;

struct BenchOptions {
  // eic://HOST:PORT (TCP) or unix:/PATH (shared memory) of an existing node; empty starts an
  // embedded node in this process, which offers both when this build's server can.
  std::string url;
  // Which transports to measure (RunBench resolves kAuto; see TransportChoice).
  TransportChoice transport = TransportChoice::kAuto;
  // Value bytes per key. When `shape` is set, its chunk size is used instead.
  uint64_t value_bytes = uint64_t{8} << 20;
  std::optional<ModelShape> shape;
  // Keys per batched call (MSet/MGet; the pipeline depth for redis).
  size_t batch = 16;
  // TCP connections to the node, and streams of the socket baseline. Redis gets one connection
  // per thread (a hiredis context is not thread-safe).
  int connections = 2;
  // Threads issuing calls; 0 = one per connection.
  int threads = 0;
  // kvport calls each thread keeps in flight (1..64): the thread starts this many batched calls
  // (Client::MSetAsync and the others), each on keys of its own, then waits for all of them,
  // and counts them as one call of the phase (its latency is the group's). 1 = the blocking
  // calls. The baselines ignore it: redis has its own pipeline, the socket its own streams.
  int inflight = 1;
  // The kvport client's InitOptions::busy_poll, in microseconds (0..1000000).
  int64_t busy_poll_us = 0;
  // The kvport client's InitOptions::checksums: each value's checksum computed at its put and
  // checked at its get (--checksums off measures what they cost).
  bool checksums = true;
  // Phases, run in this order; get and exists read what put wrote (written untimed first when
  // there is no put phase).
  std::vector<Op> ops = {Op::kPut, Op::kGet, Op::kExists};
  // Batched calls per put/get phase (all threads together), and at most this many seconds.
  uint64_t count = 64;
  double max_seconds = 8;
  // MExist: keys per call (one round trip) and calls in the exists phase.
  size_t exists_batch = 1024;
  uint64_t exists_count = 1000;
  // Namespace the benchmark's keys live in.
  std::string ns = "bench";
  // The embedded node: capacity (0 = sized from the workload) and I/O threads (0 = per CPU).
  uint64_t node_capacity = 0;
  unsigned node_threads = 0;
  // Embedded nodes (1..kMaxBenchNodes; not with `url`). From 2, RunBench starts that many on
  // loopback, each with the capacity and I/O threads one embedded node would have, and measures
  // every phase twice in the same run: against the first node alone, then against all of them
  // as one static cluster ("a;b;c"), in that order per transport. Between the two the one-node
  // run's keys are deleted, so each run reads only what it wrote.
  int nodes = 1;
  // Untimed puts of about this many bytes before the timed phases, on kvport and on redis
  // alike, so what is timed is a warm server: a fresh node's arena (and redis's heap) is
  // committed page by page on first write, which on VMs runs at a fraction of the network's
  // speed and happens once in a node's life. 0 with warmup on = the embedded node's capacity
  // (with --url: twice the working set). Bounded by max_seconds.
  bool warmup = true;
  uint64_t warmup_bytes = 0;
  // The warm-up's own time bound; 0 = max_seconds.
  double warmup_max_seconds = 0;
  // Baselines. The memcpy baseline runs whenever a shared-memory phase does (it is that
  // phase's limit); the socket baseline is the TCP phases' limit.
  bool socket_baseline = true;
  bool redis_baseline = true;
  std::string redis_server = "redis-server";  // a path, or a name looked up in PATH
  // Redis commands in flight per connection (one connection per thread): 0 = redis's best for
  // the value size (RedisPipelineDepth), 1 = one command at a time, N = pipelines of N.
  size_t redis_pipeline = 0;
  // Peers driven from Python (bench/peer_driver.h: "mooncake", "lmcache-server"), run in this
  // order after redis, from the venvs the make targets made (peers_dir: see FindPeerDriver).
  std::vector<std::string> python_peers;
  std::string peers_dir;
  // --disk DIR: the disk tier against fio instead of the phases above (bench/disk_bench.h):
  // an embedded node with disk_memory_bytes of memory and its disk tier in a fresh folder in
  // DIR, disk_data_bytes written through it (values of value_bytes), read back from disk, the
  // node restarted over it; fio (a path, or a name looked up in PATH) on a file in DIR.
  // fio_iodepth 0: the keys the bench's calls keep in flight, at least 32.
  std::string disk_dir;
  uint64_t disk_data_bytes = uint64_t{1} << 30;
  uint64_t disk_memory_bytes = uint64_t{64} << 20;
  std::string fio = "fio";
  int fio_iodepth = 0;

  // The keys a --disk run writes (the data set in whole values), and the iodepth fio gets.
  uint64_t disk_keys() const { return disk_data_bytes / value_bytes; }
  int fio_depth() const;

  int worker_threads() const { return threads > 0 ? threads : connections; }
  // Warm-up calls, each `inflight` batches per thread: enough to write warmup_bytes.
  uint64_t warmup_calls() const {
    const uint64_t per_call = static_cast<uint64_t>(batch) * value_bytes * inflight;
    return warmup ? (warmup_bytes + per_call - 1) / per_call : 0;
  }
  // Key sets (one batch of keys and buffers each): one per call in flight per thread.
  int key_sets() const { return worker_threads() * inflight; }
  // Distinct keys each set writes and reads: one batch's worth.
  size_t keys_per_thread() const { return batch; }
  // The bytes every set's keys hold together.
  uint64_t working_set_bytes() const {
    return static_cast<uint64_t>(key_sets()) * keys_per_thread() * value_bytes;
  }
  // The pipeline depth the redis baseline uses (redis_pipeline resolved; at most batch).
  size_t redis_depth() const;
  // InvalidArgument naming the first option out of range.
  Status Validate() const;
  // The --disk part of Validate (called by it when disk_dir is set).
  Status ValidateDisk() const;
};

// Redis's best pattern for a value size, measured with redis-server 7.0 and hiredis on
// loopback (docs/performance.md): small values gain from pipelining a whole batch; from
// kRedisNoPipelineBytes up, a pipeline only piles big commands into hiredis's output buffer
// and redis's query buffer (which then loses its copy-free path for big arguments), so one
// command at a time per connection is faster.
inline constexpr uint64_t kRedisNoPipelineBytes = uint64_t{256} << 10;
size_t RedisPipelineDepth(uint64_t value_bytes, size_t batch);

}  // namespace kvport::bench
