// SPDX-License-Identifier: Apache-2.0
#include "bench/resp_bench.h"

#include <fmt/core.h>
#include <sys/resource.h>

#include <algorithm>
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

// The user and system CPU seconds of the children waited for so far.
double ChildrenCpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// One redis-benchmark test (`op`: "SET", "GET") against `port`.
Result<RespRun> RunRedisBenchmark(const std::string& executable, uint16_t port, std::string_view op,
                                  uint64_t value_bytes, unsigned pipeline, unsigned clients,
                                  uint64_t requests) {
  const std::vector<std::string> args = {executable,
                                         "-h",
                                         "127.0.0.1",
                                         "-p",
                                         std::to_string(port),
                                         "-t",
                                         std::string(op),
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
  const double cpu_before = ChildrenCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  KVPORT_ASSIGN_OR_RETURN(std::string csv,
                          RunCapturingStdout(args, std::chrono::seconds(600), &status));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RespRun run;
  run.rps = RedisBenchmarkCsvRps(csv, op);
  run.load_busy = seconds > 0 ? (ChildrenCpuSeconds() - cpu_before) / seconds : 0;
  if (status != 0 || run.rps <= 0 || csv.find("rror") != std::string::npos) {
    return Status::Internal(
        fmt::format("redis-benchmark -t {} against port {} failed (status {}): {}", op, port,
                    status, csv.substr(0, 400)));
  }
  return run;
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

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

namespace {

// The median of one field of `runs`.
double MedianOf(const std::vector<RespRun>& runs, double RespRun::*field) {
  std::vector<double> values;
  for (const RespRun& run : runs)
    values.push_back(run.*field);
  return Median(std::move(values));
}

// kvport's rate over redis-server's, round by round.
std::vector<double> RoundRatios(const RespBenchRow& row) {
  std::vector<double> ratios;
  for (size_t i = 0; i < std::min(row.kvport_runs.size(), row.redis_runs.size()); ++i) {
    ratios.push_back(row.kvport_runs[i].rps / row.redis_runs[i].rps);
  }
  return ratios;
}

}  // namespace

double RespBenchRow::kvport_rps() const {
  return MedianOf(kvport_runs, &RespRun::rps);
}
double RespBenchRow::redis_rps() const {
  return MedianOf(redis_runs, &RespRun::rps);
}
double RespBenchRow::binary_rps() const {
  return Median(binary_rounds);
}
double RespBenchRow::kvport_load_busy() const {
  return MedianOf(kvport_runs, &RespRun::load_busy);
}
double RespBenchRow::redis_load_busy() const {
  return MedianOf(redis_runs, &RespRun::load_busy);
}

double RespBenchRow::ratio() const {
  return redis_rps() > 0 ? kvport_rps() / redis_rps() : 0;
}

double RespBenchRow::lowest_round_ratio() const {
  const std::vector<double> ratios = RoundRatios(*this);
  return ratios.empty() ? 0 : *std::min_element(ratios.begin(), ratios.end());
}

double RespBenchRow::highest_round_ratio() const {
  const std::vector<double> ratios = RoundRatios(*this);
  return ratios.empty() ? 0 : *std::max_element(ratios.begin(), ratios.end());
}

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
  KVPORT_ASSIGN_OR_RETURN(std::vector<int> allowed, AllowedCpus());
  report.cpus = SplitCpus(allowed);
  if (!report.cpus.split) {
    report.cpu_note = fmt::format("not split: {} CPU", allowed.size());
  }
  report.node_threads =
      o.node_threads != 0 ? o.node_threads : static_cast<unsigned>(report.cpus.servers.size());

  // The servers start on their CPUs; their threads and processes keep them.
  std::unique_ptr<Server> node;
  std::unique_ptr<RedisServer> redis;
  {
    ScopedCpuAffinity on_servers(report.cpus.servers);
    if (!on_servers.status().ok()) {
      report.cpu_note = "not split: " + on_servers.status().ToString();
      report.cpus.split = false;
    }
    ServerOptions so;
    so.capacity_bytes = o.node_capacity;
    so.threads = report.node_threads;
    so.resp_listen = "127.0.0.1:0";
    KVPORT_ASSIGN_OR_RETURN(node, Server::Start(so));
    log(fmt::format("node: RESP on {}, capacity {}, {} I/O threads", node->resp_address(),
                    FormatSize(o.node_capacity), report.node_threads));
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
  }
  if (!report.baseline_note.empty()) log("no redis-server baseline: " + report.baseline_note);
  if (report.cpus.split) {
    log(fmt::format("servers on CPU {}, load on CPU {}", FormatCpuList(report.cpus.servers),
                    FormatCpuList(report.cpus.clients)));
  }

  // redis-benchmark and the binary client threads start from here: they run on the load's CPUs.
  ScopedCpuAffinity on_clients(report.cpus.clients);
  const unsigned rounds = std::max(1u, o.rounds);
  for (uint64_t size : o.value_sizes) {
    for (unsigned pipeline : o.pipelines) {
      const uint64_t requests = size < (64 << 10) ? o.small_requests : o.large_requests;
      log(fmt::format("SET/GET {} -P {} -c {} -n {}, {} rounds", FormatSize(size), pipeline,
                      o.clients, requests, rounds));
      RespBenchRow set{"SET", size, pipeline, {}, {}, {}};
      RespBenchRow get{"GET", size, pipeline, {}, {}, {}};
      // SET then GET against one server (the GETs read what the SETs wrote).
      auto measure = [&](uint16_t port, std::vector<RespRun> RespBenchRow::*runs) -> Status {
        for (RespBenchRow* row : {&set, &get}) {
          KVPORT_ASSIGN_OR_RETURN(RespRun run, RunRedisBenchmark(*benchmark, port, row->op, size,
                                                                 pipeline, o.clients, requests));
          (row->*runs).push_back(run);
        }
        return Status::Ok();
      };
      for (unsigned round = 0; round < rounds; ++round) {
        // Each round the other server goes first: neither always meets a warmer machine.
        const bool redis_first = round % 2 == 1;
        for (int turn = 0; turn < 2; ++turn) {
          if ((turn == 0) != redis_first) {
            KVPORT_RETURN_IF_ERROR(measure(node->resp_port(), &RespBenchRow::kvport_runs));
          } else if (redis != nullptr) {
            Status measured = measure(redis->port(), &RespBenchRow::redis_runs);
            if (!measured.ok()) {
              report.baseline_note = measured.ToString();
              redis.reset();  // one failure ends the baseline: no row mixes runs with gaps
            }
          }
        }
        KVPORT_ASSIGN_OR_RETURN(
            auto binary, RunBinaryProtocol(node->port(), size, pipeline, o.clients, requests));
        set.binary_rounds.push_back(binary.first);
        get.binary_rounds.push_back(binary.second);
      }
      report.rows.push_back(std::move(set));
      report.rows.push_back(std::move(get));
    }
  }
  if (redis == nullptr) {
    for (RespBenchRow& row : report.rows)
      row.redis_runs.clear();
  }
  return report;
}

std::string FormatRespBenchText(const RespBenchReport& r) {
  std::string out = fmt::format(
      "redis-benchmark -t set, then -t get, -c {} --csv: kvport's RESP port (embedded node, {} I/O "
      "threads) and redis-server; beside them kvport's binary protocol (kvport::Client, {} "
      "threads, an MSET/MGET of -P keys a call). The median of {} rounds, the servers in turn; "
      "\"rounds\": the lowest and highest ratio of one round; \"load busy\": redis-benchmark's "
      "CPU time over its run time, against kvport / redis-server (near 100% for both: the "
      "row measures the load generator).\n",
      r.options.clients, r.node_threads, r.options.clients, std::max(1u, r.options.rounds));
  out += r.cpus.split ? fmt::format("Servers on CPU {}, the load on CPU {}.\n\n",
                                    FormatCpuList(r.cpus.servers), FormatCpuList(r.cpus.clients))
                      : fmt::format("Servers and load on the same CPUs ({}).\n\n", r.cpu_note);
  out += fmt::format("{:<4} {:>9} {:>3} {:>14} {:>14} {:>8} {:>13} {:>11} {:>14}\n", "op", "value",
                     "-P", "kvport req/s", "redis req/s", "ratio", "rounds", "load busy",
                     "binary keys/s");
  for (const RespBenchRow& row : r.rows) {
    out += fmt::format("{:<4} {:>9} {:>3} {:>14.0f} ", row.op, FormatSize(row.value_bytes),
                       row.pipeline, row.kvport_rps());
    if (row.redis_rps() > 0) {
      out += fmt::format(
          "{:>14.0f} {:>7.2f}x {:>13} {:>11}", row.redis_rps(), row.ratio(),
          fmt::format("{:.2f}-{:.2f}x", row.lowest_round_ratio(), row.highest_round_ratio()),
          fmt::format("{:.0f}/{:.0f}%", 100 * row.kvport_load_busy(), 100 * row.redis_load_busy()));
    } else {
      out += fmt::format("{:>14} {:>8} {:>13} {:>11}", "-", "-", "-",
                         fmt::format("{:.0f}%", 100 * row.kvport_load_busy()));
    }
    out += fmt::format(" {:>14.0f}\n", row.binary_rps());
  }
  if (!r.baseline_note.empty()) out += "\nredis-server baseline: " + r.baseline_note + "\n";
  return out;
}

}  // namespace kvport::bench
