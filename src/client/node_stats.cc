// SPDX-License-Identifier: Apache-2.0
// NodeStats: a node's counters, and the sum of several nodes' (what a cluster reports).
#include <algorithm>
#include <map>
#include <string>
#include <string_view>

#include "kvport/client.h"

namespace kvport {
namespace {

// The counters a sum would make meaningless: quantiles, a largest size, 0/1 flags.
bool Additive(std::string_view name) {
  return !name.starts_with("latency_") && name != "largest_free_bytes" && name != "auth_required" &&
         name != "insecure";
}

}  // namespace

uint64_t NodeStats::Get(std::string_view name, uint64_t fallback) const {
  for (const auto& [key, value] : counters) {
    if (key == name) return value;
  }
  return fallback;
}

Result<NodeStats> SumNodeStats(const std::vector<NodeReport>& reports) {
  NodeStats sum;
  std::map<std::string, size_t, std::less<>> counter_at;
  std::map<std::string, NodeStats::Namespace, std::less<>> namespaces;
  size_t answered = 0;
  Status first_failure;
  for (const NodeReport& report : reports) {
    if (!report.status.ok()) {
      if (first_failure.ok()) first_failure = report.status;
      continue;
    }
    ++answered;
    for (const auto& [name, value] : report.stats.counters) {
      auto [it, added] = counter_at.emplace(name, sum.counters.size());
      if (added) {
        sum.counters.emplace_back(name, value);
      } else if (Additive(name)) {
        sum.counters[it->second].second += value;
      } else {
        sum.counters[it->second].second = std::max(sum.counters[it->second].second, value);
      }
    }
    for (const NodeStats::Namespace& ns : report.stats.namespaces) {
      NodeStats::Namespace& merged = namespaces[ns.name];
      merged.name = ns.name;
      merged.objects += ns.objects;
      merged.bytes += ns.bytes;
    }
  }
  if (answered == 0 && !reports.empty()) return first_failure.WithContext("Stats");
  for (auto& [name, ns] : namespaces)
    sum.namespaces.push_back(std::move(ns));
  return sum;
}

}  // namespace kvport
