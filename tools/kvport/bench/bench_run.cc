#include "bench/bench_run.h"

#include <fmt/core.h>

#include <algorithm>
#include <memory>

#include "bench/bench_data.h"
#include "bench/kvport_phases.h"
#include "bench/redis_phases.h"
#include "bench/redis_server.h"
#include "bench/socket_baseline.h"
#include "kvport/client.h"
#include "kvport/server.h"
#include "kvport/size.h"

namespace kvport::bench {
namespace {

void Note(const BenchLog& log, std::string_view text) {
  if (log) log(text);
}

bool Failed(const PhaseResult& p) {
  return !p.error.empty() || p.failed_keys > 0;
}

// The embedded node holds every thread's keys twice over (a put replaces a value only once the
// new one is in, so old and new coexist for a moment) plus room for one more batch per thread.
uint64_t EmbeddedCapacity(const BenchOptions& o) {
  if (o.node_capacity != 0) return o.node_capacity;
  const uint64_t batch_bytes = static_cast<uint64_t>(o.batch) * o.value_bytes;
  return 2 * o.working_set_bytes() + o.worker_threads() * batch_bytes + (uint64_t{64} << 20);
}

// Runs the kvport phases against a node: the embedded one (started and stopped here, so its
// memory is free again before the baselines run) or the one at options.url.
Status RunKvport(const BenchOptions& options, BenchData& data, BenchReport* report,
                 const BenchLog& log) {
  std::unique_ptr<Server> server;
  std::string endpoint = options.url;
  if (endpoint.empty()) {
    ServerOptions so;
    so.capacity_bytes = EmbeddedCapacity(options);
    so.threads = options.node_threads;
    so.max_value_bytes = std::max(so.max_value_bytes, options.value_bytes);
    so.max_batch_keys = std::max<uint64_t>(so.max_batch_keys,
                                           std::max<uint64_t>(options.batch, options.exists_batch));
    so.idle_timeout = std::chrono::milliseconds(0);
    Result<std::unique_ptr<Server>> started = Server::Start(so);
    if (!started.ok()) return started.status().WithContext("starting the embedded node");
    server = std::move(*started);
    endpoint = server->address();
    report->node =
        fmt::format("embedded {} (capacity {}, {})", endpoint, FormatSize(so.capacity_bytes),
                    so.threads == 0 ? std::string("one I/O thread per CPU")
                                    : fmt::format("{} I/O threads", so.threads));
  } else {
    report->node = endpoint;
  }
  Note(log, fmt::format("kvport: node {}", report->node));
  Client client;
  InitOptions init;
  init.connections = options.connections;
  init.timeout = std::chrono::seconds(120);
  KVPORT_RETURN_IF_ERROR(client.Init("kvport-bench", endpoint, init));
  report->kvport = RunKvportPhases(options, client, data);
  if (server) server->Stop();
  return Status::Ok();
}

void RunSocket(const BenchOptions& options, BenchReport* report, const BenchLog& log) {
  // The same byte volume as the largest kvport put or get phase (what the ratio compares), or
  // what the options ask for when kvport moved nothing.
  uint64_t bytes = 0;
  for (const PhaseResult& p : report->kvport) {
    if (p.op != Op::kExists) bytes = std::max(bytes, p.bytes);
  }
  if (bytes == 0) bytes = options.count * options.batch * options.value_bytes;
  SocketBaselineOptions so;
  so.bytes = bytes;
  so.streams = options.connections;
  so.write_bytes = std::clamp<uint64_t>(options.value_bytes, uint64_t{1} << 20, uint64_t{8} << 20);
  so.max_seconds = options.max_seconds;
  Note(log, fmt::format("socket: {} over {} loopback streams, three ways", FormatSize(bytes),
                        so.streams));
  Result<std::vector<PhaseResult>> r = MeasureSocketLimit(so);
  if (r.ok()) {
    report->socket = std::move(*r);
  } else {
    report->socket_skipped = r.status().ToString();
  }
}

void RunRedis(const BenchOptions& options, BenchData& data, BenchReport* report,
              const BenchLog& log) {
  Result<std::string> exe = RedisServer::FindExecutable(options.redis_server);
  if (!exe.ok()) {
    report->redis_skipped = exe.status().message();
    return;
  }
  Note(log, fmt::format("redis: starting {} on an ephemeral loopback port", *exe));
  Result<std::unique_ptr<RedisServer>> server = RedisServer::Start(*exe);
  if (!server.ok()) {
    report->redis_skipped = server.status().message();
    return;
  }
  Result<std::vector<PhaseResult>> r = RunRedisPhases(options, (*server)->port(), data);
  (*server)->Stop();
  if (r.ok()) {
    report->redis = std::move(*r);
  } else {
    report->redis_skipped = r.status().message();
  }
}

}  // namespace

const PhaseResult* BenchReport::Limit() const {
  const PhaseResult* best = nullptr;
  for (const PhaseResult& p : socket) {
    if (p.error.empty() && (best == nullptr || p.gb_per_second() > best->gb_per_second())) {
      best = &p;
    }
  }
  return best;
}

const PhaseResult* BenchReport::Find(std::string_view system, Op op) const {
  const std::vector<PhaseResult>& list = system == "kvport" ? kvport : redis;
  for (const PhaseResult& p : list) {
    if (p.system == system && p.op == op) return &p;
  }
  return nullptr;
}

std::optional<double> BenchReport::RatioToLimit(Op op) const {
  const PhaseResult* k = Find("kvport", op);
  const PhaseResult* limit = Limit();
  if (op == Op::kExists || k == nullptr || limit == nullptr || Failed(*k)) return std::nullopt;
  if (limit->gb_per_second() <= 0) return std::nullopt;
  return k->gb_per_second() / limit->gb_per_second();
}

std::optional<double> BenchReport::RatioToRedis(Op op) const {
  const PhaseResult* k = Find("kvport", op);
  const PhaseResult* r = Find("redis", op);
  if (k == nullptr || r == nullptr || Failed(*k) || Failed(*r)) return std::nullopt;
  if (op == Op::kExists) {
    if (r->keys_per_second() <= 0) return std::nullopt;
    return k->keys_per_second() / r->keys_per_second();
  }
  if (r->gb_per_second() <= 0) return std::nullopt;
  return k->gb_per_second() / r->gb_per_second();
}

bool BenchReport::AllPassed() const {
  for (const auto* list : {&kvport, &socket, &redis}) {
    for (const PhaseResult& p : *list) {
      if (Failed(p)) return false;
    }
  }
  return true;
}

Result<BenchReport> RunBench(BenchOptions options, const BenchLog& log) {
  if (options.shape) {
    KVPORT_ASSIGN_OR_RETURN(options.value_bytes, ChunkBytes(*options.shape));
  }
  KVPORT_RETURN_IF_ERROR(options.Validate());
  if (options.warmup && options.warmup_bytes == 0) {
    options.warmup_bytes =
        options.url.empty() ? EmbeddedCapacity(options) : 2 * options.working_set_bytes();
  }
  BenchReport report;
  report.options = options;
  BenchData data(options);
  KVPORT_RETURN_IF_ERROR(RunKvport(options, data, &report, log));
  if (options.socket_baseline) {
    RunSocket(options, &report, log);
  } else {
    report.socket_skipped = "not asked for (--no-socket)";
  }
  if (options.redis_baseline) {
    RunRedis(options, data, &report, log);
  } else {
    report.redis_skipped = "not asked for (--no-redis)";
  }
  return report;
}

}  // namespace kvport::bench
