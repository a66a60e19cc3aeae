// SPDX-License-Identifier: Apache-2.0
// The node's Prometheus page (GET /metrics), its /health and /stats bodies: pure functions of a
// ServerStats snapshot and a few facts, so that they are tested without HTTP.
//
// Every metric is named kvport_* after Prometheus' conventions (base units bytes and seconds in
// the name, _total on counters); MetricCatalog() lists them all (docs/operations.md has the same
// table, and a test keeps the two equal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/server.h"

namespace kvport::http {

// One accelerator runtime or transport, for the kvport_runtime_info / kvport_transport_info
// metrics (what `kvport doctor` reports).
struct Availability {
  std::string name;  // "host", "cuda", "ascend"; "tcp", "shm", "rdma", "gdr"
  bool available = false;
  std::string version;  // runtimes: the version they report; "" if none
};

// Facts about the process and the node that are not in ServerStats.
struct MetricsContext {
  std::string version;    // kvport_build_info{version}
  std::string auth_mode;  // kvport_auth_info{mode}
  ServerState state = ServerState::kServing;
  uint64_t resident_bytes = 0;  // kvport_process_resident_memory_bytes
  std::vector<Availability> runtimes;
  std::vector<Availability> transports;
  // Namespaces with their own label: the largest by bytes. The rest are summed into the one
  // series with namespace="__other__" (a namespace really named "__other__" is counted there).
  size_t max_namespace_labels = 20;
};

inline constexpr std::string_view kOtherNamespaceLabel = "__other__";

struct MetricInfo {
  std::string_view name;    // without _bucket/_sum/_count
  std::string_view type;    // "counter", "gauge", "histogram"
  std::string_view unit;    // "bytes", "seconds", or "" (a count)
  std::string_view labels;  // comma-separated label names; "" for none
  std::string_view help;
  std::string_view stats_counter;  // the STATS counter it is read from, "" when it is not one
};

// Every metric RenderMetrics writes, in the order it writes them.
const std::vector<MetricInfo>& MetricCatalog();

// STATS counters that have no metric of their own: op_*, errors_* and latency_* (the
// kvport_requests_total, kvport_request_errors_total and kvport_request_duration_seconds
// families carry them). Every other STATS counter must map to a MetricCatalog entry.
bool IsFamilyCounter(std::string_view stats_counter);

// The Prometheus text exposition format (version 0.0.4).
std::string RenderMetrics(const ServerStats& stats, const MetricsContext& context);

// {"counters": {NAME: VALUE, ...}, "namespaces": [{"name", "objects", "bytes"}, ...]}: the
// STATS content, as `kvport stat --json` prints it (without "node"). Always valid JSON.
std::string RenderStatsJson(const ServerStats& stats);

// /health: {"status": "serving"|"starting"|"draining"|"stopped", "version": V}, one line.
std::string RenderHealthJson(std::string_view status, std::string_view version);

}  // namespace kvport::http
