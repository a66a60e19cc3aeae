// SPDX-License-Identifier: Apache-2.0
#include "bench/load_run.h"

#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <thread>

#include "bench/bench_node.h"
#include "bench/redis_server.h"
#include "kvport/size.h"

namespace kvport::bench {
namespace {

using ConnectFn = std::function<Result<std::unique_ptr<LoadConnection>>()>;

// Prefill with this many connections at most (the writes need no more to keep a node busy).
constexpr int kPrefillThreads = 8;

Result<std::vector<std::unique_ptr<LoadWorker>>> ConnectWorkers(const LoadMix& mix,
                                                                const ConnectFn& connect) {
  std::vector<std::unique_ptr<LoadWorker>> workers;
  for (int w = 0; w < mix.options().connections; ++w) {
    Result<std::unique_ptr<LoadConnection>> c = connect();
    if (!c.ok()) return c.status().WithContext(fmt::format("connection {}", w + 1));
    workers.push_back(std::make_unique<LoadWorker>(mix, std::move(c).value(), w));
  }
  return workers;
}

Status PrefillAll(std::vector<std::unique_ptr<LoadWorker>>& workers) {
  const int n = std::min<int>(kPrefillThreads, static_cast<int>(workers.size()));
  std::vector<Status> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] { results[i] = workers[i]->Prefill(n); });
  for (std::thread& t : threads)
    t.join();
  for (const Status& s : results)
    KVPORT_RETURN_IF_ERROR(s);
  return Status::Ok();
}

// Connects, prefills and runs the steps against one system until it saturates.
Result<std::vector<LoadStep>> RunSystem(std::string_view system, const LoadMix& mix,
                                        const ConnectFn& connect, const std::vector<int>& cpus,
                                        const BenchLog& log, const LoadStepProgressFn& progress) {
  const LoadOptions& o = mix.options();
  ScopedCpuAffinity on_clients(cpus);
  Note(log, fmt::format("{}: {} connections", system, o.connections));
  KVPORT_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<LoadWorker>> workers,
                          ConnectWorkers(mix, connect));
  Note(log, fmt::format("{}: writing the prompts' cached pages", system));
  KVPORT_RETURN_IF_ERROR(PrefillAll(workers).WithContext(std::string(system)));
  std::atomic<uint64_t> next_new_slot{0};
  const std::vector<double> rates = o.StepRates();
  std::vector<LoadStep> steps;
  for (size_t i = 0; i < rates.size(); ++i) {
    LoadStep step = RunLoadStep(workers, rates[i], &next_new_slot, [&](const LoadProgress& p) {
      if (progress) progress(system, i, rates.size(), rates[i], p);
    });
    step.system = std::string(system);
    const bool saturated = step.saturated();
    steps.push_back(std::move(step));
    if (saturated) break;
  }
  return steps;
}

}  // namespace

bool LoadReport::AllCorrect() const {
  for (const std::vector<LoadStep>* steps : {&kvport, &redis}) {
    for (const LoadStep& s : *steps) {
      if (s.wrong > 0 || s.failed > 0) return false;
    }
  }
  return true;
}

Result<LoadReport> RunLoad(const LoadOptions& options, const BenchLog& log,
                           const LoadStepProgressFn& progress) {
  KVPORT_RETURN_IF_ERROR(options.Validate());
  LoadReport report;
  report.options = options;
  KVPORT_ASSIGN_OR_RETURN(std::vector<int> allowed, AllowedCpus());
  report.cpus = SplitCpus(allowed);
  const LoadMix mix(options);
  // Every key written: the prompts' pages (at most all of them) and the new pages.
  const uint64_t data_bytes = (options.objects + options.new_slots()) * options.page_bytes;

  {
    std::optional<Node> node;
    if (options.url.empty()) {
      ServerOptions so = EmbeddedServerOptions(
          options.node_capacity > 0 ? options.node_capacity : 2 * data_bytes,
          options.node_threads > 0 ? options.node_threads
                                   : static_cast<unsigned>(report.cpus.servers.size()),
          0, options.page_bytes,
          static_cast<uint64_t>(
              std::max({options.prompt_pages, options.get_batch, options.write_batch})));
      // Every engine worker is a connection; the bench may open more than the default allows.
      so.max_connections =
          std::max<uint32_t>(so.max_connections, static_cast<uint32_t>(options.connections) + 16);
      ScopedCpuAffinity on_servers(report.cpus.servers);
      KVPORT_ASSIGN_OR_RETURN(Node started, StartEmbeddedNode(so, false, false));
      node = std::move(started);
    } else {
      node = UrlNode(options.url);
    }
    report.node = node->description;
    Note(log, fmt::format("kvport: node {}", report.node));
    const std::string endpoint = node->tcp_endpoint;
    KVPORT_ASSIGN_OR_RETURN(report.kvport,
                            RunSystem(
                                "kvport", mix, [&] { return ConnectKvport(endpoint, options.ns); },
                                report.cpus.clients, log, progress));
    if (node->server) node->server->Stop();
  }

  if (!options.redis) {
    report.redis_skipped = "not asked for (--no-redis)";
    return report;
  }
  Result<std::string> executable = RedisServer::FindExecutable(options.redis_server);
  if (!executable.ok()) {
    report.redis_skipped = executable.status().message();
    return report;
  }
  std::unique_ptr<RedisServer> redis;
  {
    ScopedCpuAffinity on_servers(report.cpus.servers);
    Result<std::unique_ptr<RedisServer>> started = RedisServer::Start(*executable);
    if (!started.ok()) {
      report.redis_skipped = started.status().ToString();
      return report;
    }
    redis = std::move(started).value();
  }
  const uint16_t port = redis->port();
  Result<std::vector<LoadStep>> steps = RunSystem(
      "redis", mix, [&] { return ConnectRedis(port); }, report.cpus.clients, log, progress);
  if (steps.ok()) {
    report.redis = std::move(steps).value();
  } else {
    report.redis_skipped = steps.status().ToString();
  }
  redis->Stop();
  return report;
}

}  // namespace kvport::bench
