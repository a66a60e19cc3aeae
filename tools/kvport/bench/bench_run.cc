// SPDX-License-Identifier: Apache-2.0
#include "bench/bench_run.h"

#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "bench/bench_data.h"
#include "bench/bench_limits.h"
#include "bench/bench_node.h"
#include "bench/bench_peers.h"
#include "bench/kvport_phases.h"
#include "bench/model_shape.h"
#include "bench/socket_baseline.h"
#include "kvport/client.h"
#include "kvport/size.h"

namespace kvport::bench {
namespace {

// Deletes every thread's keys in options.ns through `client`: what one run of the phases wrote,
// so the next run (the cluster after the one node, or the one node of the next transport)
// reads only what it wrote itself and finds its nodes as empty as the first run did.
Status ClearKeys(const BenchOptions& options, Client& client, const BenchData& data) {
  DelOptions del;
  del.ns = options.ns;
  for (int t = 0; t < data.sets(); ++t) {
    Result<BatchResult> r = client.MDel(data.keys(t), del);
    if (!r.ok()) return r.status().WithContext("deleting the previous run's keys");
    for (KeyCode code : r->codes) {
      if (code != KeyCode::kSuccess && code != KeyCode::kKeyNotExist) {
        return r->error.WithContext("deleting the previous run's keys");
      }
    }
  }
  return Status::Ok();
}

// "127.0.0.1:P1;127.0.0.1:P2;...": the nodes as one static cluster (each reached over TCP, or
// over shared memory when the client's transport choice is automatic and the node offers it).
std::string StaticClusterEndpoint(const std::vector<Node>& nodes) {
  std::string endpoint;
  for (const Node& n : nodes)
    endpoint += (endpoint.empty() ? "" : ";") + n.tcp_endpoint;
  return endpoint;
}

// What a cluster URL resolved to: "URL (a cluster of N nodes: A, B, C)", from one untimed
// Stats call per node; the URL alone when it names one node or the nodes do not answer.
std::string DescribeUrl(const std::string& url, Client& client) {
  if (!client.is_cluster()) return url;
  Result<std::vector<NodeReport>> nodes = client.StatsPerNode();
  if (!nodes.ok()) return url;
  std::string list;
  for (const NodeReport& n : *nodes)
    list += (list.empty() ? "" : ", ") + n.address + (n.status.ok() ? "" : " (not answering)");
  return fmt::format("{} (a cluster of {} node{}: {})", url, nodes->size(),
                     nodes->size() == 1 ? "" : "s", list);
}

// Runs the phases over `transport` against `node` through a client of its own, appending them
// to `out` (with `system` as their system). Returns the client (null when Init failed) so the
// caller can clear its keys.
std::unique_ptr<Client> RunPhasesAgainst(const BenchOptions& options, const Node& node,
                                         Transport transport, BenchData& data,
                                         std::string_view system, std::vector<PhaseResult>* out,
                                         Status* init_error) {
  auto client = std::make_unique<Client>();
  *init_error = InitClient(*client, node, transport, options);
  if (!init_error->ok()) {
    for (PhaseResult& p : FailedPhases(options, transport, init_error->ToString())) {
      p.system = std::string(system);
      out->push_back(std::move(p));
    }
    return nullptr;
  }
  for (PhaseResult& p : RunKvportPhases(options, *client, data, transport)) {
    p.system = std::string(system);
    out->push_back(std::move(p));
  }
  return client;
}

// Runs the kvport phases over each transport against a node: the embedded one (started and
// stopped here, so its memory is free again before the baselines run) or the one at the URL.
// With options.nodes >= 2, against the first embedded node alone and then against all of them
// as one static cluster, per transport (BenchOptions::nodes).
Status RunKvport(const BenchOptions& options, BenchData& data, BenchReport* report,
                 const BenchLog& log) {
  const bool want_shm = Has(report->transports, Transport::kShm);
  std::vector<Node> nodes;
  if (options.url.empty()) {
    const ServerOptions so = EmbeddedServerOptions(
        EmbeddedCapacity(options), options.node_threads, options.busy_poll_us, options.value_bytes,
        std::max<uint64_t>(options.batch, options.exists_batch));
    for (int i = 0; i < options.nodes; ++i) {
      Result<Node> started =
          StartEmbeddedNode(so, want_shm, Has(report->transports, Transport::kUcx));
      if (!started.ok()) {
        for (Node& n : nodes)
          n.server->Stop();
        return options.nodes == 1 ? started.status()
                                  : started.status().WithContext(
                                        fmt::format("node {} of {}", i + 1, options.nodes));
      }
      nodes.push_back(std::move(started).value());
    }
  } else {
    nodes.push_back(UrlNode(options.url));
  }
  const Node& node = nodes.front();
  report->node = node.description;
  Node cluster;
  if (nodes.size() > 1) {
    cluster.tcp_endpoint = StaticClusterEndpoint(nodes);
    cluster.shm_endpoint = cluster.tcp_endpoint;  // the client picks shared memory per node
    cluster.description = cluster.tcp_endpoint;
    report->cluster_endpoint = cluster.tcp_endpoint;
    report->node +=
        fmt::format("; the cluster: {} such nodes, \"{}\"", nodes.size(), cluster.tcp_endpoint);
  }
  Note(log, fmt::format("kvport: node {}", report->node));
  // The cluster's warm-up: as many bytes per node as the one node's (the keys spread over the
  // nodes, so each gets about its share of the calls).
  BenchOptions cluster_options = options;
  cluster_options.warmup_bytes = options.warmup_bytes * nodes.size();
  Status status = Status::Ok();
  for (Transport transport : report->transports) {
    Status init;
    std::unique_ptr<Client> client =
        RunPhasesAgainst(options, node, transport, data, "kvport", &report->kvport, &init);
    // TCP is the node being there at all; shared memory failing leaves the TCP results.
    if (!init.ok() && transport == Transport::kTcp) {
      report->kvport.clear();
      status = init;
      break;
    }
    if (client != nullptr) {
      Note(log, fmt::format("kvport: {} ({})", TransportName(transport), client->transport()));
      if (!options.url.empty() && transport == report->transports.front()) {
        report->node = DescribeUrl(options.url, *client);
      }
    }
    if (nodes.size() == 1) continue;
    // (A one-node client that could not connect wrote nothing; the cluster's own Init says
    // whether it fares better.)
    const Status cleared = client != nullptr ? ClearKeys(options, *client, data) : Status::Ok();
    client.reset();
    if (!cleared.ok()) {
      for (PhaseResult& p : FailedPhases(options, transport, cleared.ToString())) {
        p.system = "cluster";
        report->cluster.push_back(std::move(p));
      }
      continue;
    }
    Note(log, fmt::format("kvport: {} nodes as one cluster, {}", nodes.size(),
                          TransportName(transport)));
    std::unique_ptr<Client> cluster_client = RunPhasesAgainst(
        cluster_options, cluster, transport, data, "cluster", &report->cluster, &init);
    if (cluster_client != nullptr) {
      const Status cleared_cluster = ClearKeys(options, *cluster_client, data);
      if (!cleared_cluster.ok()) Note(log, cleared_cluster.ToString());
    }
  }
  for (Node& n : nodes) {
    if (n.server) n.server->Stop();
  }
  return status;
}

}  // namespace

Result<BenchReport> RunBench(BenchOptions options, const BenchLog& log) {
  if (options.shape) {
    KVPORT_ASSIGN_OR_RETURN(options.value_bytes, ChunkBytes(*options.shape));
  }
  KVPORT_RETURN_IF_ERROR(options.Validate());
  KVPORT_ASSIGN_OR_RETURN(Transports transports, ResolveTransports(options.transport, options.url));
  if (options.warmup && options.warmup_bytes == 0) {
    options.warmup_bytes =
        options.url.empty() ? EmbeddedCapacity(options) : 2 * options.working_set_bytes();
  }
  BenchReport report;
  report.options = options;
  report.transports = transports.list;
  report.transport_note = transports.note;
  BenchData data(options);
  KVPORT_RETURN_IF_ERROR(RunKvport(options, data, &report, log));
  if (!Has(report.transports, Transport::kTcp)) {
    report.socket_skipped = "no TCP phase to compare with";
  } else if (options.socket_baseline) {
    RunSocket(options, &report, log);
  } else {
    report.socket_skipped = "not asked for (--no-socket)";
  }
  if (Has(report.transports, Transport::kShm)) {
    Note(log, fmt::format("memcpy: {} per call on {} thread(s)",
                          FormatSize(options.batch * options.value_bytes), data.threads()));
    CopyPool pool;
    report.memcpy = RunMemcpyBaseline(options, data, pool);
  }
  if (Has(report.transports, Transport::kUcx)) {
    for (Op op : options.ops) {
      if (op == Op::kExists) continue;
      Note(log, fmt::format("ucx_perftest: {} of {}", OpName(op), FormatSize(options.value_bytes)));
      report.ucx_perftest.push_back(UcxPerftestLimit(
          op, options.value_bytes, options.count * options.batch, options.max_seconds));
    }
  }
  if (options.redis_baseline) {
    RunRedis(options, data, &report, log);
  } else {
    report.redis_skipped = "not asked for (--peers, --no-redis)";
  }
  for (const std::string& system : options.python_peers)
    RunPythonPeer(system, options, &report, log);
  return report;
}

}  // namespace kvport::bench
