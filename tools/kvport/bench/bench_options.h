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

struct BenchOptions {
  // eic://HOST:PORT of an existing node; empty starts an embedded node in this process.
  std::string url;
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
  // Untimed puts of about this many bytes before the timed phases, on kvport and on redis
  // alike, so what is timed is a warm server: a fresh node's arena (and redis's heap) is
  // committed page by page on first write, which on VMs runs at a fraction of the network's
  // speed and happens once in a node's life. 0 with warmup on = the embedded node's capacity
  // (with --url: twice the working set). Bounded by max_seconds.
  bool warmup = true;
  uint64_t warmup_bytes = 0;
  // Baselines.
  bool socket_baseline = true;
  bool redis_baseline = true;
  std::string redis_server = "redis-server";  // a path, or a name looked up in PATH

  int worker_threads() const { return threads > 0 ? threads : connections; }
  // Warm-up puts, each one batch per thread: enough to write warmup_bytes.
  uint64_t warmup_calls() const {
    const uint64_t per_call = static_cast<uint64_t>(batch) * value_bytes;
    return warmup ? (warmup_bytes + per_call - 1) / per_call : 0;
  }
  // Distinct keys each thread writes and reads: one batch's worth.
  size_t keys_per_thread() const { return batch; }
  // The bytes every thread's keys hold together.
  uint64_t working_set_bytes() const {
    return static_cast<uint64_t>(worker_threads()) * keys_per_thread() * value_bytes;
  }
  // InvalidArgument naming the first option out of range.
  Status Validate() const;
};

}  // namespace kvport::bench
