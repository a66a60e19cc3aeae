// SPDX-License-Identifier: Apache-2.0
// `kvport bench`: throughput and latency of put / get / exists through the client SDK, measured
// in the same run against each transport's limit (the raw loopback socket for TCP, memcpy for
// shared memory) and redis-server. With no arguments: put and get of 8 MiB values in batches of
// 16 over 2 connections, mexist of 1024 keys per call, on an embedded node, over TCP and (when
// the node offers it) shared memory, every baseline; bounded by --count and --seconds per phase.
// `kvport bench --matrix` runs value sizes x batches x connections x transports instead, each row
// also against the round trip of one call of its shape on a bare socket;
// `kvport bench --nodes N` measures N embedded nodes as one cluster against one of them alone;
// `kvport bench --disk DIR` measures the disk tier against fio on the same filesystem.
// (`kvport load`, cmd_load.cc, is the open-loop counterpart: offered rates, tail latency.)
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_matrix.h"
#include "bench/bench_report.h"
#include "bench/bench_run.h"
#include "bench/peer_driver.h"
#include "bench/resp_bench.h"
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
  std::string peers = "redis";
  bool json = false;
  std::string transport = "auto";
  std::string redis_pipeline = "auto";
  bool matrix = false;
  std::string matrix_sizes = "64KiB,1MiB,4MiB,32MiB";
  std::string matrix_batches = "1,16";
  std::string matrix_connections = "1,4";
  // Options given on the command line (the matrix takes --count and --seconds only then).
  CLI::Option* count_option = nullptr;
  CLI::Option* seconds_option = nullptr;
  std::vector<CLI::Option*> shape_options;  // not for --matrix
  CLI::Option* nodes_option = nullptr;      // not for --matrix
  // --disk (bench/disk_bench.h): its value size and time bound default differently.
  std::string disk_data = "1GiB";
  std::string disk_memory = "64MiB";
  // --resp (bench/resp_bench.h): redis-benchmark against the RESP port and redis-server.
  bool resp = false;
  uint64_t resp_small_requests = 20000;
  uint64_t resp_large_requests = 400;
  unsigned resp_rounds = 3;
  CLI::Option* value_size_option = nullptr;
};

// A whole number of at least 1 ("16").
std::optional<uint64_t> ParseCount(std::string_view text) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v == 0) return std::nullopt;
  return v;
}

// "64KiB,1MiB" -> sizes (sizes = true); "1,16" -> counts. InvalidArgument naming the option.
Result<std::vector<uint64_t>> ParseList(std::string_view list, std::string_view option,
                                        bool sizes) {
  std::vector<uint64_t> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string_view item = list.substr(start, comma - start);
    if (sizes) {
      Result<uint64_t> v = ParseSize(item, SizeUnit::kBytes);
      if (!v.ok()) return v.status().WithContext(std::string(option));
      out.push_back(*v);
    } else {
      std::optional<uint64_t> v = ParseCount(item);
      if (!v) {
        return Status::InvalidArgument(std::string(option) + ": '" + std::string(item) +
                                       "' is not a whole number of at least 1");
      }
      out.push_back(*v);
    }
    start = comma + 1;
  }
  return out;
}

// --peers: a list of redis, mooncake, lmcache-server, all or none; the Python-driven ones go to
// *python_peers, in the order given.
Status ParsePeers(std::string_view list, bool* redis, std::vector<std::string>* python_peers) {
  *redis = false;
  python_peers->clear();
  auto add = [&](std::string_view peer) {
    if (std::find(python_peers->begin(), python_peers->end(), peer) == python_peers->end())
      python_peers->emplace_back(peer);
  };
  for (std::string_view rest = list; !rest.empty();) {
    const size_t comma = rest.find(',');
    const std::string_view peer = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const bool python = std::find(std::begin(bench::kPythonPeers), std::end(bench::kPythonPeers),
                                  peer) != std::end(bench::kPythonPeers);
    if (peer == "redis" || peer == "all") *redis = true;
    if (python) add(peer);
    if (peer == "all") {
      for (std::string_view p : bench::kPythonPeers)
        add(p);
    }
    if (peer != "redis" && !python && peer != "all" && peer != "none") {
      return Status::InvalidArgument(
          "--peers: expected a list of redis, mooncake, lmcache-server, all or none, got '" +
          std::string(peer) + "'");
    }
  }
  return Status::Ok();
}

int RunMatrixCommand(BenchFlags& f) {
  for (CLI::Option* option : f.shape_options) {
    if (option->count() > 0) {
      return Fail(Status::InvalidArgument(
          option->get_name() +
          " does not apply to --matrix: it runs --matrix-sizes x --matrix-batches x "
          "--matrix-connections"));
    }
  }
  if (f.nodes_option->count() > 0 && f.options.nodes != 1) {
    return Fail(Status::InvalidArgument(
        "--nodes does not apply to --matrix: the matrix runs on one embedded node"));
  }
  bench::MatrixOptions m;
  Result<std::vector<uint64_t>> sizes = ParseList(f.matrix_sizes, "--matrix-sizes", true);
  if (!sizes.ok()) return Fail(sizes.status());
  m.value_sizes = *sizes;
  Result<std::vector<uint64_t>> batches = ParseList(f.matrix_batches, "--matrix-batches", false);
  if (!batches.ok()) return Fail(batches.status());
  m.batches.assign(batches->begin(), batches->end());
  Result<std::vector<uint64_t>> conns =
      ParseList(f.matrix_connections, "--matrix-connections", false);
  if (!conns.ok()) return Fail(conns.status());
  m.connections.clear();  // the list given replaces the default
  for (uint64_t c : *conns) {
    if (c > 1024) return Fail(Status::InvalidArgument("--matrix-connections: at most 1024"));
    m.connections.push_back(static_cast<int>(c));
  }
  Result<bench::TransportChoice> transport = bench::ParseTransportChoice(f.transport);
  if (!transport.ok()) return Fail(transport.status());
  m.transport = *transport;
  if (f.count_option->count() > 0) m.count = f.options.count;
  if (f.seconds_option->count() > 0) m.max_seconds = f.options.max_seconds;
  m.node_threads = f.options.node_threads;
  m.busy_poll_us = f.options.busy_poll_us;
  m.socket_baseline = !f.no_socket;
  m.ns = f.options.ns;
  bool redis = false;  // the matrix has no redis column
  Status peers = ParsePeers(f.peers, &redis, &m.python_peers);
  if (!peers.ok()) return Fail(peers);
  m.peers_dir = f.options.peers_dir;
  Result<bench::MatrixReport> report = bench::RunMatrix(m, [](std::string_view note) {
    std::fprintf(stderr, "bench: %.*s\n", static_cast<int>(note.size()), note.data());
  });
  if (!report.ok()) return Fail(report.status());
  const std::string text =
      f.json ? bench::FormatMatrixJson(*report) : bench::FormatMatrixText(*report);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return report->AllPassed() ? 0 : 1;
}

// `kvport bench --disk DIR`: the disk tier against fio (bench/disk_bench.h). Takes the value
// size (default 1 MiB here), batch, connections, threads, busy poll, node threads, namespace and
// --seconds (default 60 here: per phase) of the usual options; the others do not apply.
int RunDiskCommand(BenchFlags& f) {
  bench::BenchOptions& o = f.options;
  if (f.value_size_option->count() == 0) o.value_bytes = uint64_t{1} << 20;
  if (f.seconds_option->count() == 0) o.max_seconds = 60;
  Result<uint64_t> data = ParseSize(f.disk_data, SizeUnit::kBytes);
  if (!data.ok()) return Fail(data.status().WithContext("--disk-data"));
  o.disk_data_bytes = *data;
  Result<uint64_t> memory = ParseSize(f.disk_memory, SizeUnit::kBytes);
  if (!memory.ok()) return Fail(memory.status().WithContext("--disk-memory"));
  o.disk_memory_bytes = *memory;
  Result<bench::TransportChoice> transport = bench::ParseTransportChoice(f.transport);
  if (!transport.ok()) return Fail(transport.status());
  o.transport = *transport;
  Result<bench::DiskBenchReport> report = bench::RunDiskBench(o, [](std::string_view note) {
    std::fprintf(stderr, "bench: %.*s\n", static_cast<int>(note.size()), note.data());
  });
  if (!report.ok()) return Fail(report.status());
  const std::string text =
      f.json ? bench::FormatDiskBenchJson(*report) : bench::FormatDiskBenchText(*report);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return report->AllPassed() ? 0 : 1;
}

// `kvport bench --resp`: redis-benchmark against an embedded node's Redis-protocol port and
// against redis-server (bench/resp_bench.h). Takes --capacity, --node-threads, --connections
// (redis-benchmark's -c) and --redis-server of the usual options.
int RunRespCommand(BenchFlags& f) {
  bench::RespBenchOptions o;
  if (f.capacity) {
    Result<uint64_t> capacity = ParseSize(*f.capacity, SizeUnit::kBytes);
    if (!capacity.ok()) return Fail(capacity.status().WithContext("--capacity"));
    o.node_capacity = *capacity;
  }
  o.node_threads = f.options.node_threads;  // 0: one per server CPU
  o.clients = static_cast<unsigned>(std::max(4, f.options.connections));
  o.redis_server = f.options.redis_server;
  o.small_requests = f.resp_small_requests;
  o.large_requests = f.resp_large_requests;
  o.rounds = f.resp_rounds;
  Result<bench::RespBenchReport> report = bench::RunRespBench(o, [](std::string_view note) {
    std::fprintf(stderr, "bench: %.*s\n", static_cast<int>(note.size()), note.data());
  });
  if (!report.ok()) return Fail(report.status());
  std::fputs(bench::FormatRespBenchText(*report).c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

int RunBenchCommand(BenchFlags& f) {
  if (f.resp) return RunRespCommand(f);
  if (f.matrix && !f.options.disk_dir.empty()) {
    return Fail(Status::InvalidArgument("--disk and --matrix are separate runs: give one"));
  }
  if (f.matrix) return RunMatrixCommand(f);
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
  if (!o.disk_dir.empty()) return RunDiskCommand(f);
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
  Status peers = ParsePeers(f.peers, &o.redis_baseline, &o.python_peers);
  if (!peers.ok()) return Fail(peers);
  if (f.no_redis) o.redis_baseline = false;
  Result<bench::TransportChoice> transport = bench::ParseTransportChoice(f.transport);
  if (!transport.ok()) return Fail(transport.status());
  o.transport = *transport;
  if (f.redis_pipeline != "auto") {
    std::optional<uint64_t> depth = ParseCount(f.redis_pipeline);
    if (!depth) {
      return Fail(Status::InvalidArgument(
          "--redis-pipeline: expected auto or a depth of at least 1, got '" + f.redis_pipeline +
          "'"));
    }
    o.redis_pipeline = static_cast<size_t>(*depth);
  }

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
      "Throughput and latency of put/get/exists over TCP and shared memory, against each "
      "transport's limit (loopback socket, memcpy) and redis-server, in one run (closed "
      "loop; `kvport load` offers an open-loop load shaped like the engines' instead, at "
      "stepped rates, and reports the tail latency they feel)");
  cmd->add_option("--url", o.url,
                  "An existing node (HOST:PORT, eic://HOST:PORT, unix:/PATH) or cluster "
                  "(\"HOST:PORT;HOST:PORT\", etcd:HOST:PORT/CLUSTER) (default: an embedded node "
                  "in this process)");
  flags->nodes_option =
      cmd->add_option(
             "--nodes", o.nodes,
             "Embedded nodes (1-16; not with --url). From 2: starts that many on loopback, each "
             "with the capacity and I/O threads one embedded node gets (--capacity, "
             "--node-threads apply per node), and measures every phase against the first node "
             "alone and then against all of them as one static cluster (--connections to each "
             "node), reporting cluster/node ratios")
          ->capture_default_str();
  cmd->add_option("--transport", flags->transport,
                  "tcp, shm (same-host shared memory), both, ucx (values as UCX messages the node "
                  "checks, over the "
                  "transports UCX_TLS allows, against ucx_perftest), or auto: both when the node "
                  "offers shared memory (an embedded node of a build whose server has it, or a "
                  "unix: URL), else tcp")
      ->capture_default_str();
  auto* value_size = cmd->add_option("--value-size", flags->value_size,
                                     "Bytes per value, with units (8MiB, 64KiB, 1000000; "
                                     "--disk: 1MiB)")
                         ->capture_default_str();
  flags->value_size_option = value_size;
  auto* layers =
      cmd->add_option("--layers", flags->layers,
                      "Value size from a model shape instead: layers (default 32; the shape's "
                      "other parts default to Llama-3-8B)");
  auto* kv_heads =
      cmd->add_option("--kv-heads", flags->kv_heads, "Model shape: KV heads (default 8)");
  auto* head_dim =
      cmd->add_option("--head-dim", flags->head_dim, "Model shape: head dim (default 128)");
  auto* dtype =
      cmd->add_option("--dtype", flags->dtype, "Model shape: bf16, fp16, fp32, fp8 (default bf16)");
  auto* tokens = cmd->add_option("--tokens-per-chunk", flags->tokens_per_chunk,
                                 "Model shape: tokens per chunk (default 256)");
  auto* batch = cmd->add_option("--batch", o.batch, "Keys per batched call")->capture_default_str();
  auto* connections =
      cmd->add_option("--connections", o.connections,
                      "Connections to the node, and streams of the socket baseline (which writes "
                      "one call's bytes at a time, 1-8 MiB; redis: one connection per thread)")
          ->capture_default_str();
  auto* threads =
      cmd->add_option("--threads", o.threads, "Threads issuing calls (0: one per connection)")
          ->capture_default_str();
  cmd->add_option("--inflight", o.inflight,
                  "kvport calls each thread keeps in flight (1-64; MSetAsync/MGetAsync/"
                  "MExistAsync, then Wait): a phase's call is then a group of that many")
      ->capture_default_str();
  cmd->add_option("--checksums", o.checksums,
                  "kvport client: compute each value's checksum at its put and check it at its "
                  "get (InitOptions::checksums; on or off)")
      ->capture_default_str();
  cmd->add_option("--busy-poll-us", o.busy_poll_us,
                  "kvport client and embedded node: how long a call polls for its answer, and "
                  "an I/O thread for the next request, before it sleeps (InitOptions::busy_poll, "
                  "ServerOptions::busy_poll; 0: at once; --matrix too)")
      ->capture_default_str();
  cmd->add_option("--ops", flags->ops, "Phases, in order: a list of put, get, exists")
      ->capture_default_str();
  flags->count_option =
      cmd->add_option("--count", o.count, "Batched calls per put/get phase (all threads together)")
          ->capture_default_str();
  flags->seconds_option =
      cmd->add_option("--seconds", o.max_seconds, "At most this long per phase (--matrix: 2)")
          ->capture_default_str();
  cmd->add_option("--exists-batch", o.exists_batch, "Keys per mexist call (one round trip)")
      ->capture_default_str();
  cmd->add_option("--exists-count", o.exists_count, "mexist calls in the exists phase")
      ->capture_default_str();
  flags->shape_options = {value_size, layers, kv_heads,    head_dim, dtype,
                          tokens,     batch,  connections, threads};
  cmd->add_flag("--matrix", flags->matrix,
                "Run put and get for every value size x batch x connections x transport (below), "
                "each row against its own limits (streaming, and the round trip of one call of "
                "its shape); --count (default: about 1 GiB per phase) and --seconds apply per "
                "phase");
  cmd->add_option("--matrix-sizes", flags->matrix_sizes, "--matrix: value sizes")
      ->capture_default_str();
  cmd->add_option("--matrix-batches", flags->matrix_batches, "--matrix: keys per call")
      ->capture_default_str();
  cmd->add_option("--matrix-connections", flags->matrix_connections,
                  "--matrix: connections (one calling thread each)")
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
  cmd->add_flag("--no-socket", flags->no_socket,
                "Skip the raw socket baselines (streaming, and --matrix's round trips)");
  cmd->add_flag("--no-redis", flags->no_redis, "Skip the redis-server baseline");
  cmd->add_flag("--resp", flags->resp,
                "Measure the Redis protocol instead: redis-benchmark (SET, GET; 4 KiB and 1 MiB; "
                "-P 1 and 16; -c --connections, at least 4) against an embedded node's RESP port "
                "and against redis-server, in one run (docs/performance.md, \"The Redis "
                "protocol\")");
  cmd->add_option("--resp-requests", flags->resp_small_requests,
                  "--resp: requests per test with 4 KiB values")
      ->capture_default_str();
  cmd->add_option("--resp-large-requests", flags->resp_large_requests,
                  "--resp: requests per test with 1 MiB values")
      ->capture_default_str();
  cmd->add_option("--resp-rounds", flags->resp_rounds,
                  "--resp: rounds of each test, the two servers in turn (the report gives the "
                  "medians)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 99u));
  cmd->add_option("--peers", flags->peers,
                  "Peers measured in the same run, each in its own best pattern: a list of redis, "
                  "mooncake (Mooncake Store, from `make peers`), lmcache-server (LMCache's own "
                  "server, from `make engines peers`), all, or none; a peer that cannot run is "
                  "skipped with the reason")
      ->capture_default_str();
  cmd->add_option("--peers-dir", o.peers_dir,
                  "Where `make peers` installed the peers (default: build/peers beside this "
                  "executable's bin/)");
  cmd->add_option("--redis-server", o.redis_server,
                  "redis-server executable (a path, or a name looked up in PATH)")
      ->capture_default_str();
  cmd->add_option(
         "--redis-pipeline", flags->redis_pipeline,
         "SET/GET commands in flight per redis connection: auto (redis's best for the "
         "value size: the whole batch below 256 KiB, one at a time from 256 KiB) or a depth")
      ->capture_default_str();
  cmd->add_option("--disk", o.disk_dir,
                  "Measure the disk tier instead, in a fresh folder in DIR (removed after): an "
                  "embedded node with --disk-memory of memory writes --disk-data through it (put, "
                  "every put evicting to disk), is restarted over it (restart time per GiB), and "
                  "reads it back from disk (get); fio reads and writes a file in DIR with "
                  "O_DIRECT and io_uring in the same run (docs/performance.md, \"What the disk "
                  "tier costs\")");
  cmd->add_option("--disk-data", flags->disk_data, "--disk: the data set written through the node")
      ->capture_default_str();
  cmd->add_option("--disk-memory", flags->disk_memory, "--disk: the node's memory capacity")
      ->capture_default_str();
  cmd->add_option("--fio", o.fio,
                  "--disk: the fio executable (a path, or a name looked up in PATH); missing, "
                  "its rows are skipped with the reason")
      ->capture_default_str();
  cmd->add_option("--fio-iodepth", o.fio_iodepth,
                  "--disk: fio's iodepth (0: the keys the bench keeps in flight, threads x batch, "
                  "at least 32)")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the results as one JSON object");
  cmd->callback([flags, exit_code] { *exit_code = RunBenchCommand(*flags); });
}

}  // namespace kvport::cli
