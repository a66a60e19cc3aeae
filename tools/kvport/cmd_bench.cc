// `kvport bench`: throughput and latency of put / get / exists through the client SDK, measured
// in the same run against the raw loopback socket limit and redis-server. With no arguments:
// put and get of 8 MiB values in batches of 16 over 2 connections, mexist of 1024 keys per call,
// on an embedded node, both baselines; bounded by --count and --seconds per phase.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>

#include "bench/bench_report.h"
#include "bench/bench_run.h"
#include "commands.h"
#include "kvport/size.h"

namespace kvport::cli {
namespace {

struct BenchFlags {
  bench::BenchOptions options;
  std::string value_size = "8MiB";
  std::optional<int> layers, kv_heads, head_dim, tokens_per_chunk;
  std::optional<std::string> dtype;
  std::string ops = "put,get,exists";
  std::optional<std::string> capacity;
  std::optional<std::string> warmup;
  bool no_socket = false;
  bool no_redis = false;
  bool json = false;
};

int RunBenchCommand(BenchFlags& f) {
  bench::BenchOptions& o = f.options;
  Result<uint64_t> value_bytes = ParseSize(f.value_size, SizeUnit::kBytes);
  if (!value_bytes.ok()) return Fail(value_bytes.status().WithContext("--value-size"));
  o.value_bytes = *value_bytes;
  if (f.layers || f.kv_heads || f.head_dim || f.tokens_per_chunk || f.dtype) {
    bench::ModelShape shape;  // Llama-3-8B, for the parts not given
    shape.layers = f.layers.value_or(shape.layers);
    shape.kv_heads = f.kv_heads.value_or(shape.kv_heads);
    shape.head_dim = f.head_dim.value_or(shape.head_dim);
    shape.tokens_per_chunk = f.tokens_per_chunk.value_or(shape.tokens_per_chunk);
    shape.dtype = f.dtype.value_or(shape.dtype);
    o.shape = shape;
  }
  Result<std::vector<bench::Op>> ops = bench::ParseOps(f.ops);
  if (!ops.ok()) return Fail(ops.status());
  o.ops = *ops;
  if (f.capacity) {
    Result<uint64_t> capacity = ParseSize(*f.capacity, SizeUnit::kBytes);
    if (!capacity.ok()) return Fail(capacity.status().WithContext("--capacity"));
    o.node_capacity = *capacity;
  }
  if (f.warmup) {
    Result<uint64_t> warmup = ParseSize(*f.warmup, SizeUnit::kBytes);
    if (!warmup.ok()) return Fail(warmup.status().WithContext("--warmup"));
    o.warmup = *warmup > 0;
    o.warmup_bytes = *warmup;
  }
  o.socket_baseline = !f.no_socket;
  o.redis_baseline = !f.no_redis;

  Result<bench::BenchReport> report = bench::RunBench(o, [](std::string_view note) {
    std::fprintf(stderr, "bench: %.*s\n", static_cast<int>(note.size()), note.data());
  });
  if (!report.ok()) return Fail(report.status());
  const std::string text =
      f.json ? bench::FormatBenchJson(*report) : bench::FormatBenchText(*report);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return report->AllPassed() ? 0 : 1;
}

}  // namespace

void AddBenchCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<BenchFlags>();
  bench::BenchOptions& o = flags->options;
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Throughput and latency of put/get/exists against the raw loopback socket limit and "
      "redis-server, in one run");
  cmd->add_option("--url", o.url,
                  "An existing node, eic://HOST:PORT (default: an embedded node in this process)");
  cmd->add_option("--value-size", flags->value_size,
                  "Bytes per value, with units (8MiB, 64KiB, 1000000)")
      ->capture_default_str();
  cmd->add_option("--layers", flags->layers,
                  "Value size from a model shape instead: layers (default 32; the shape's other "
                  "parts default to Llama-3-8B)");
  cmd->add_option("--kv-heads", flags->kv_heads, "Model shape: KV heads (default 8)");
  cmd->add_option("--head-dim", flags->head_dim, "Model shape: head dim (default 128)");
  cmd->add_option("--dtype", flags->dtype, "Model shape: bf16, fp16, fp32, fp8 (default bf16)");
  cmd->add_option("--tokens-per-chunk", flags->tokens_per_chunk,
                  "Model shape: tokens per chunk (default 256)");
  cmd->add_option("--batch", o.batch, "Keys per batched call (redis: pipeline depth)")
      ->capture_default_str();
  cmd->add_option("--connections", o.connections,
                  "TCP connections to the node, and streams of the socket baseline (redis: one "
                  "connection per thread)")
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "Threads issuing calls (0: one per connection)")
      ->capture_default_str();
  cmd->add_option("--ops", flags->ops, "Phases, in order: a list of put, get, exists")
      ->capture_default_str();
  cmd->add_option("--count", o.count, "Batched calls per put/get phase (all threads together)")
      ->capture_default_str();
  cmd->add_option("--seconds", o.max_seconds, "At most this long per phase")->capture_default_str();
  cmd->add_option("--exists-batch", o.exists_batch, "Keys per mexist call (one round trip)")
      ->capture_default_str();
  cmd->add_option("--exists-count", o.exists_count, "mexist calls in the exists phase")
      ->capture_default_str();
  cmd->add_option("--ns", o.ns, "Namespace of the benchmark's keys")->capture_default_str();
  cmd->add_option("--capacity", flags->capacity,
                  "Embedded node capacity (default: twice the working set plus a batch per "
                  "thread)");
  cmd->add_option("--node-threads", o.node_threads, "Embedded node I/O threads (0: one per CPU)")
      ->capture_default_str();
  cmd->add_option("--warmup", flags->warmup,
                  "Untimed puts of this many bytes first, on kvport and redis alike (default: the "
                  "embedded node's capacity; 0: none)");
  cmd->add_flag("--no-socket", flags->no_socket, "Skip the raw socket baseline");
  cmd->add_flag("--no-redis", flags->no_redis, "Skip the redis-server baseline");
  cmd->add_option("--redis-server", o.redis_server,
                  "redis-server executable (a path, or a name looked up in PATH)")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the results as one JSON object");
  cmd->callback([flags, exit_code] { *exit_code = RunBenchCommand(*flags); });
}

}  // namespace kvport::cli
