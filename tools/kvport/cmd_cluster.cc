// SPDX-License-Identifier: Apache-2.0
// `kvport cluster status --etcd HOST:PORT[,HOST:PORT] --cluster NAME [--token-file F]
// [--timeout S] [--json] [--etcd-ca-file F [--etcd-cert-file F --etcd-key-file F]]
// [--etcd-user U --etcd-password-file F]`: every node registered in the cluster (from etcd), with
// its address, epoch, capacity, used bytes, objects (asked of the node itself with STATS) and when
// it last renewed its lease (docs/operations.md, "Cluster status").
//
// etcd unreachable: one line on stderr, exit 1. A node that does not answer STATS is listed as
// unreachable with the reason; the command still exits 0 (etcd's view of the cluster is what
// it reports; an unreachable node shows it).
#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/etcd_client.h"
#include "cluster/member.h"
#include "commands.h"
#include "common/endpoint_text.h"
#include "common/escape_text.h"
#include "kvport/client.h"
#include "kvport/log.h"
#include "kvport/size.h"

namespace kvport::cli {
namespace {

struct ClusterOptions {
  std::string etcd;
  cluster::EtcdOptions etcd_security;  // TLS and authentication (endpoints and timeout unset)
  std::string cluster;
  std::string token_file;
  double timeout_secs = 3;
  bool json = false;
};

// What the command learned about one registered node.
struct NodeReport {
  std::string key;  // its etcd key
  std::optional<cluster::Member> member;
  std::string record_error;          // the record could not be decoded: why
  std::optional<int64_t> heartbeat;  // seconds since its last lease renewal
  bool reachable = false;
  std::string error;  // STATS failed: why
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t objects = 0;
};

// STATS of one node through a client of its own (one TCP connection).
void AskNode(const ClusterOptions& o, std::chrono::milliseconds timeout, NodeReport* report) {
  InitOptions init;
  init.transport_type = 1;  // TCP: a status query has no use for the node's shared memory
  init.connections = 1;
  init.timeout = timeout;
  init.connect_timeout = timeout;
  init.token_file = o.token_file;
  Client client;
  Status connected = client.Init("kvport-cluster-status", report->member->address, init);
  if (!connected.ok()) {
    report->error = connected.ToString();
    return;
  }
  Result<NodeStats> stats = client.Stats();
  if (!stats.ok()) {
    report->error = stats.status().ToString();
    return;
  }
  report->reachable = true;
  report->capacity_bytes = stats->Get("capacity_bytes");
  report->used_bytes = stats->Get("used_bytes");
  report->objects = stats->Get("objects");
}

Result<std::vector<NodeReport>> Gather(const ClusterOptions& o) {
  if (o.cluster.empty()) return Status::InvalidArgument("--cluster NAME is required");
  if (o.etcd.empty()) return Status::InvalidArgument("--etcd HOST:PORT[,HOST:PORT] is required");
  if (!(o.timeout_secs > 0)) return Status::InvalidArgument("--timeout must be a positive number");
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_secs * 1000));
  cluster::EtcdOptions etcd_options = o.etcd_security;
  KVPORT_ASSIGN_OR_RETURN(etcd_options.endpoints, SplitEtcdEndpoints(o.etcd));
  etcd_options.request_timeout = timeout;
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<cluster::EtcdClient> etcd,
                          cluster::EtcdClient::Open(etcd_options));
  Result<cluster::EtcdRange> range = etcd->RangePrefix(cluster::EtcdNodesPrefix(o.cluster));
  if (!range.ok()) {
    return range.status().WithContext(
        fmt::format("cannot read cluster '{}' from etcd {}", o.cluster, etcd->Describe()));
  }
  std::vector<NodeReport> reports(range->kvs.size());
  for (size_t i = 0; i < range->kvs.size(); ++i) {
    const cluster::EtcdKeyValue& kv = range->kvs[i];
    NodeReport& report = reports[i];
    report.key = kv.key;
    Result<cluster::Member> member = cluster::DecodeMember(kv.value);
    if (!member.ok()) {
      report.record_error = member.status().message();
      continue;
    }
    report.member = *member;
    if (kv.lease != 0) {
      // Renewals reset the lease to its granted TTL, so what has run down since is the time
      // since the last one (to the second: etcd counts whole seconds).
      Result<cluster::EtcdLeaseTtl> ttl = etcd->TimeToLive(kv.lease);
      if (ttl.ok() && ttl->ttl_seconds >= 0) {
        report.heartbeat = std::max<int64_t>(0, ttl->granted_ttl_seconds - ttl->ttl_seconds);
      }
    }
  }
  // Every node at once: a dead node costs one timeout, not one per node before it.
  std::vector<std::future<void>> asks;
  for (NodeReport& report : reports) {
    if (!report.member) continue;
    asks.push_back(
        std::async(std::launch::async, [&o, timeout, &report] { AskNode(o, timeout, &report); }));
  }
  for (auto& ask : asks)
    ask.wait();
  return reports;
}

std::string EpochHex(uint64_t epoch) {
  return fmt::format("{:016x}", epoch);
}

std::string TextReport(const ClusterOptions& o, const std::vector<NodeReport>& reports) {
  std::string out =
      fmt::format("cluster {}: {} node{} registered (etcd {})\n", EscapeText(o.cluster),
                  reports.size(), reports.size() == 1 ? "" : "s", EscapeText(o.etcd));
  if (reports.empty()) return out;
  out += fmt::format("{:<24} {:<22} {:<16} {:>10} {:>10} {:>9} {}\n", "ID", "ADDRESS", "EPOCH",
                     "CAPACITY", "USED", "OBJECTS", "HEARTBEAT");
  for (const NodeReport& r : reports) {
    if (!r.member) {
      out += fmt::format("{:<24} bad record: {}\n", EscapeText(r.key), EscapeText(r.record_error));
      continue;
    }
    const cluster::Member& m = *r.member;
    const std::string heartbeat =
        r.heartbeat ? fmt::format("{} s ago", *r.heartbeat) : std::string("unknown");
    if (r.reachable) {
      out += fmt::format("{:<24} {:<22} {:<16} {:>10} {:>10} {:>9} {}\n", EscapeText(m.id),
                         EscapeText(m.address), EpochHex(m.epoch), FormatSize(r.capacity_bytes),
                         FormatSize(r.used_bytes), r.objects, heartbeat);
    } else {
      out += fmt::format("{:<24} {:<22} {:<16} {:>10} {:>10} {:>9} {}; unreachable: {}\n",
                         EscapeText(m.id), EscapeText(m.address), EpochHex(m.epoch),
                         FormatSize(m.capacity_bytes), "-", "-", heartbeat, EscapeText(r.error));
    }
  }
  return out;
}

std::string JsonReport(const ClusterOptions& o, const std::vector<NodeReport>& reports) {
  using Json = nlohmann::ordered_json;
  Json nodes = Json::array();
  for (const NodeReport& r : reports) {
    Json node = {{"key", r.key}};
    if (!r.member) {
      node["record_error"] = r.record_error;
      nodes.push_back(std::move(node));
      continue;
    }
    const cluster::Member& m = *r.member;
    node["id"] = m.id;
    node["address"] = m.address;
    node["epoch"] = std::to_string(m.epoch);  // decimal, as in the record (64 bits)
    node["epoch_hex"] = EpochHex(m.epoch);
    node["capacity_bytes"] = r.reachable ? r.capacity_bytes : m.capacity_bytes;
    node["protocol_version"] = m.protocol_version;
    node["transports"] = m.transports;
    node["started_unix_ms"] = m.started_unix_ms;
    node["last_heartbeat_secs"] = r.heartbeat ? Json(*r.heartbeat) : Json(nullptr);
    node["reachable"] = r.reachable;
    if (r.reachable) {
      node["used_bytes"] = r.used_bytes;
      node["objects"] = r.objects;
    } else {
      node["error"] = r.error;
    }
    nodes.push_back(std::move(node));
  }
  const Json json = {{"cluster", o.cluster}, {"etcd", o.etcd}, {"nodes", std::move(nodes)}};
  return json.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace) + "\n";
}

int RunStatus(const ClusterOptions& o) {
  // The clients' per-node connection lines would bury the table: warnings only, unless the
  // operator asked for a level.
  if (!LogLevelGivenOnCommandLine()) log::SetLevel(log::Level::kWarn);
  Result<std::vector<NodeReport>> reports = Gather(o);
  if (!reports.ok()) return Fail(reports.status());
  const std::string out = o.json ? JsonReport(o, *reports) : TextReport(o, *reports);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

void AddClusterCommand(CLI::App& app, int* exit_code) {
  CLI::App* cluster =
      app.add_subcommand("cluster", "Inspect a cluster of nodes registered in etcd");
  cluster->require_subcommand(1);
  auto o = std::make_shared<ClusterOptions>();
  CLI::App* status = cluster->add_subcommand(
      "status",
      "List every node of a cluster from etcd: id, address, epoch, capacity, used, objects "
      "(asked of each node) and its last heartbeat");
  status->add_option("--etcd", o->etcd, "etcd endpoints: HOST:PORT[,HOST:PORT]")->required();
  status->add_option("--etcd-ca-file", o->etcd_security.tls_ca_file,
                     "TLS to etcd: the CA its certificate must chain to (etcd_tls_ca_file)");
  status->add_option("--etcd-cert-file", o->etcd_security.tls_cert_file,
                     "TLS to etcd: a client certificate, for etcd --client-cert-auth");
  status->add_option("--etcd-key-file", o->etcd_security.tls_key_file,
                     "TLS to etcd: the client certificate's key");
  status->add_option("--etcd-user", o->etcd_security.user, "etcd authentication: the user");
  status->add_option("--etcd-password-file", o->etcd_security.password_file,
                     "etcd authentication: a file whose first line is the password");
  status->add_option("--cluster", o->cluster, "The cluster's name")->required();
  status->add_option("--token-file", o->token_file,
                     "File whose first line is a token the nodes accept (admin: STATS of every "
                     "namespace); default $KVPORT_TOKEN");
  status->add_option("--timeout", o->timeout_secs, "Seconds per etcd call and per node (3)");
  status->add_flag("--json", o->json, "Print one JSON object instead of text");
  status->callback([o, exit_code] { *exit_code = RunStatus(*o); });
}

}  // namespace kvport::cli
