// SPDX-License-Identifier: Apache-2.0
#include "server/server_stats.h"

#include <cctype>

namespace kvport {

uint64_t ServerStats::Get(std::string_view name) const {
  for (const auto& [n, v] : counters) {
    if (n == name) return v;
  }
  return 0;
}

namespace server {

namespace {

// "op_mget" from "MGET".
std::string OpCounterName(protocol::Opcode op) {
  std::string name = "op_";
  for (char c : protocol::OpcodeName(op)) {
    name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return name;
}

constexpr protocol::Opcode kCountedOps[] = {
    protocol::Opcode::kHello,     protocol::Opcode::kPing,       protocol::Opcode::kMset,
    protocol::Opcode::kMget,      protocol::Opcode::kMexist,     protocol::Opcode::kMdel,
    protocol::Opcode::kList,      protocol::Opcode::kStats,      protocol::Opcode::kNodeInfo,
    protocol::Opcode::kShmAttach, protocol::Opcode::kShmReserve, protocol::Opcode::kShmCommit,
    protocol::Opcode::kShmGet,    protocol::Opcode::kShmRelease,
};

}  // namespace

void ServerCounters::CountRequest(protocol::Opcode op) {
  size_t slot = static_cast<size_t>(op);
  if (slot < kOpcodeSlots) ops_[slot].fetch_add(1, std::memory_order_relaxed);
}

bool ServerCounters::TryAdmitConnection(uint32_t max) {
  uint64_t open = connections_.load(std::memory_order_relaxed);
  do {
    if (open >= max) {
      connections_refused_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  } while (!connections_.compare_exchange_weak(open, open + 1, std::memory_order_relaxed));
  connections_accepted_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ServerCounters::ConnectionClosed() {
  connections_.fetch_sub(1, std::memory_order_relaxed);
}

void ServerCounters::AppendTo(std::vector<std::pair<std::string, uint64_t>>* out) const {
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  out->emplace_back("connections", get(connections_));
  out->emplace_back("connections_accepted", get(connections_accepted_));
  out->emplace_back("connections_refused", get(connections_refused_));
  out->emplace_back("error_responses", get(error_responses_));
  out->emplace_back("idle_timeouts", get(idle_timeouts_));
  out->emplace_back("aborted_msets", get(aborted_msets_));
  out->emplace_back("bytes_received", get(bytes_received_));
  out->emplace_back("bytes_sent", get(bytes_sent_));
  out->emplace_back("shm_attaches", get(shm_attaches_));
  out->emplace_back("leases", get(leases_));
  out->emplace_back("leased_bytes", get(leased_bytes_));
  for (protocol::Opcode op : kCountedOps) {
    out->emplace_back(OpCounterName(op), get(ops_[static_cast<size_t>(op)]));
  }
}

ServerStats CollectStats(const store::ObjectStore& store, const ServerCounters& counters) {
  ServerStats stats;
  store::StoreStats s = store.Stats();
  stats.counters = {
      {"capacity_bytes", s.capacity_bytes},
      {"used_bytes", s.used_bytes},
      {"value_bytes", s.value_bytes},
      {"reserved_bytes", s.reserved_bytes},
      {"retired_bytes", s.retired_bytes},
      {"objects", s.objects},
      {"hits", s.hits},
      {"misses", s.misses},
      {"evictions", s.evictions},
      {"expirations", s.expirations},
      {"free_extents", s.free_extents},
      {"largest_free_bytes", s.largest_free_bytes},
  };
  counters.AppendTo(&stats.counters);
  for (const store::NamespaceUsage& u : store.NamespaceUsages()) {
    stats.namespaces.push_back({u.ns, u.objects, u.value_bytes + u.meta_bytes});
  }
  return stats;
}

}  // namespace server
}  // namespace kvport
