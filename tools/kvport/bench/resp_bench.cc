// SPDX-License-Identifier: Apache-2.0
#include "bench/resp_bench.h"

#include <fmt/core.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "bench/child_process.h"
#include "bench/redis_server.h"
#include "kvport/client.h"
#include "kvport/server.h"
#include "kvport/size.h"

namespace kvport::bench {

namespace {

// One redis-benchmark run of SET and GET against `port`: their rates, or why it failed.
Result<std::pair<double, double>> RunRedisBenchmark(const std::string& executable, uint16_t port,
                                                    uint64_t value_bytes, unsigned pipeline,
                                                    unsigned clients, uint64_t requests) {
  const std::vector<std::string> args = {executable,
                                         "-h",
                                         "127.0.0.1",
                                         "-p",
                                         std::to_string(port),
                                         "-t",
                                         "set,get",
                                         "-d",
                                         std::to_string(value_bytes),
                                         "-P",
                                         std::to_string(pipeline),
                                         "-c",
                                         std::to_string(clients),
                                         "-n",
                                         std::to_string(requests),
                                         "--csv"};
  int status = 0;
  KVPORT_ASSIGN_OR_RETURN(std::string csv,
                          RunCapturingStdout(args, std::chrono::seconds(600), &status));
  const double set = RedisBenchmarkCsvRps(csv, "SET");
  const double get = RedisBenchmarkCsvRps(csv, "GET");
  if (status != 0 || set <= 0 || get <= 0 || csv.find("rror") != std::string::npos) {
    return Status::Internal(fmt::format("redis-benchmark against port {} failed (status {}): {}",
                                        port, status, csv.substr(0, 400)));
  }
  return std::make_pair(set, get);
}

// The same shape over kvport's binary protocol, in its best pattern: `clients` threads, each
// with its own kvport::Client on TCP, each call an MSET (then an MGET) of `pipeline` keys of
// its own, rewritten (read) over and over, as redis-benchmark's -P sends `pipeline` commands
// of one key at a time. Keys (requests) per second of the SETs and of the GETs.
Result<std::pair<double, double>> RunBinaryProtocol(uint16_t port, uint64_t value_bytes,
                                                    unsigned pipeline, unsigned clients,
                                                    uint64_t requests) {
  const uint64_t calls_per_client = std::max<uint64_t>(1, requests / clients / pipeline);
  std::vector<std::unique_ptr<Client>> connected;
  for (unsigned i = 0; i < clients; ++i) {
    auto client = std::make_unique<Client>();
    KVPORT_RETURN_IF_ERROR(client->Init("resp-bench", fmt::format("127.0.0.1:{}", port)));
    connected.push_back(std::move(client));
  }
  std::atomic<bool> failed{false};
  auto run = [&](bool set) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < clients; ++t) {
      threads.emplace_back([&, t] {
        std::vector<std::string> keys;
        std::vector<std::vector<char>> values(pipeline, std::vector<char>(value_bytes, 'x'));
        IOBuffers buffers;
        for (unsigned k = 0; k < pipeline; ++k) {
          keys.push_back(fmt::format("bench:{}:{}", t, k));
          buffers.Append(values[k].data(), values[k].size());
        }
        for (uint64_t call = 0; call < calls_per_client && !failed; ++call) {
          bool ok = false;
          if (set) {
            Result<BatchResult> r = connected[t]->MSet(keys, buffers);
            ok = r.ok() && r->status == BatchCode::kSuccess;
          } else {
            Result<GetResult> r = connected[t]->MGet(keys, GetOptions{}, buffers);
            ok = r.ok() && r->status == BatchCode::kSuccess;
          }
          if (!ok) failed = true;
        }
      });
    }
    for (std::thread& thread : threads)
      thread.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return static_cast<double>(calls_per_client * clients * pipeline) / seconds;
  };
  const double set_rps = run(true);
  const double get_rps = run(false);
  if (failed) return Status::Internal("the binary protocol's MSET/MGET failed against the node");
  return std::make_pair(set_rps, get_rps);
}

}  // namespace

double RedisBenchmarkCsvRps(std::string_view csv, std::string_view name) {
  const std::string head = fmt::format("\"{}\",\"", name);
  size_t at = 0;
  while ((at = csv.find(head, at)) != std::string_view::npos) {
    if (at == 0 || csv[at - 1] == '\n') {
      const size_t begin = at + head.size();
      const size_t end = csv.find('"', begin);
      if (end == std::string_view::npos) return 0;
      return std::strtod(std::string(csv.substr(begin, end - begin)).c_str(), nullptr);
    }
    ++at;
  }
  return 0;
}

Result<RespBenchReport> RunRespBench(const RespBenchOptions& o,
                                     const std::function<void(std::string_view)>& log) {
  RespBenchReport report;
  report.options = o;
  Result<std::string> benchmark = RedisServer::FindExecutable(o.redis_benchmark);
  if (!benchmark.ok()) {
    return benchmark.status().WithContext(
        "--resp runs redis-benchmark (Debian redis-tools; scripts/bootstrap installs it)");
  }

  ServerOptions so;
  so.capacity_bytes = o.node_capacity;
  so.threads = o.node_threads;
  so.resp_listen = "127.0.0.1:0";
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<Server> node, Server::Start(so));
  log(fmt::format("node: RESP on {}, capacity {}, {} I/O threads", node->resp_address(),
                  FormatSize(o.node_capacity), o.node_threads));

  std::unique_ptr<RedisServer> redis;
  Result<std::string> redis_path = RedisServer::FindExecutable(o.redis_server);
  if (redis_path.ok()) {
    Result<std::unique_ptr<RedisServer>> started = RedisServer::Start(*redis_path);
    if (started.ok()) {
      redis = std::move(started).value();
      log(fmt::format("baseline: redis-server on 127.0.0.1:{}", redis->port()));
    } else {
      report.baseline_note = started.status().ToString();
    }
  } else {
    report.baseline_note = redis_path.status().ToString();
  }
  if (!report.baseline_note.empty()) log("no redis-server baseline: " + report.baseline_note);

  for (uint64_t size : o.value_sizes) {
    for (unsigned pipeline : o.pipelines) {
      const uint64_t requests = size < (64 << 10) ? o.small_requests : o.large_requests;
      log(fmt::format("SET/GET {} -P {} -c {} -n {}", FormatSize(size), pipeline, o.clients,
                      requests));
      KVPORT_ASSIGN_OR_RETURN(auto kvport, RunRedisBenchmark(*benchmark, node->resp_port(), size,
                                                             pipeline, o.clients, requests));
      std::pair<double, double> baseline{0, 0};
      if (redis != nullptr) {
        Result<std::pair<double, double>> measured =
            RunRedisBenchmark(*benchmark, redis->port(), size, pipeline, o.clients, requests);
        if (measured.ok()) {
          baseline = *measured;
        } else {
          report.baseline_note = measured.status().ToString();
        }
      }
      KVPORT_ASSIGN_OR_RETURN(auto binary,
                              RunBinaryProtocol(node->port(), size, pipeline, o.clients, requests));
      report.rows.push_back({"SET", size, pipeline, kvport.first, baseline.first, binary.first});
      report.rows.push_back({"GET", size, pipeline, kvport.second, baseline.second, binary.second});
    }
  }
  return report;
}

std::string FormatRespBenchText(const RespBenchReport& r) {
  std::string out = fmt::format(
      "redis-benchmark -t set,get -c {} --csv: kvport's RESP port (embedded node) and "
      "redis-server; beside them kvport's binary protocol (kvport::Client, {} threads, an "
      "MSET/MGET of -P keys a call)\n\n",
      r.options.clients, r.options.clients);
  out += fmt::format("{:<4} {:>9} {:>3} {:>14} {:>14} {:>8} {:>14}\n", "op", "value", "-P",
                     "kvport req/s", "redis req/s", "ratio", "binary keys/s");
  for (const RespBenchRow& row : r.rows) {
    out += fmt::format("{:<4} {:>9} {:>3} {:>14.0f} ", row.op, FormatSize(row.value_bytes),
                       row.pipeline, row.kvport_rps);
    if (row.redis_rps > 0) {
      out += fmt::format("{:>14.0f} {:>7.2f}x", row.redis_rps, row.kvport_rps / row.redis_rps);
    } else {
      out += fmt::format("{:>14} {:>8}", "-", "-");
    }
    out += fmt::format(" {:>14.0f}\n", row.binary_rps);
  }
  if (!r.baseline_note.empty()) out += "\nredis-server baseline: " + r.baseline_note + "\n";
  return out;
}

}  // namespace kvport::bench
