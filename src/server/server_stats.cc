// SPDX-License-Identifier: Apache-2.0
#include "server/server_stats.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

namespace kvport {

uint64_t ServerStats::Get(std::string_view name) const {
  for (const auto& [n, v] : counters) {
    if (n == name) return v;
  }
  return 0;
}

double ServerStats::Latency::QuantileNs(double q) const {
  if (count == 0 || counts.size() != upper_ns.size() || counts.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // The rank of the quantile among `count` sorted latencies, 1-based.
  const double rank = std::max(1.0, std::ceil(q * static_cast<double>(count)));
  uint64_t below = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    if (static_cast<double>(below + counts[i]) >= rank) {
      const double lower = i == 0 ? 0.0 : static_cast<double>(upper_ns[i - 1]);
      // The overflow bucket has no upper bound: report its lower bound.
      if (upper_ns[i] == std::numeric_limits<uint64_t>::max()) return lower;
      const double upper = static_cast<double>(upper_ns[i]);
      const double within = (rank - static_cast<double>(below)) / static_cast<double>(counts[i]);
      return lower + (upper - lower) * within;
    }
    below += counts[i];
  }
  return static_cast<double>(upper_ns.back());
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
    protocol::Opcode::kHello,     protocol::Opcode::kPing,         protocol::Opcode::kMset,
    protocol::Opcode::kMget,      protocol::Opcode::kMexist,       protocol::Opcode::kMdel,
    protocol::Opcode::kList,      protocol::Opcode::kStats,        protocol::Opcode::kNodeInfo,
    protocol::Opcode::kShmAttach, protocol::Opcode::kArenaReserve, protocol::Opcode::kArenaCommit,
    protocol::Opcode::kArenaGet,  protocol::Opcode::kArenaRelease, protocol::Opcode::kUcxAttach,
};

// "resp_get" from "GET".
std::string RespOpName(std::string_view command) {
  std::string name = "resp_";
  for (char c : command)
    name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return name;
}

}  // namespace

void ServerCounters::RecordRespCommand(size_t slot, const std::string_view* name, bool error,
                                       uint64_t ns) {
  if (slot >= kRespCommandSlots) return;
  // The name lives in the command table's static storage: publishing its address is enough.
  if (resp_names_[slot].load(std::memory_order_relaxed) == nullptr) {
    resp_names_[slot].store(name, std::memory_order_relaxed);
  }
  if (error) resp_errors_[slot].fetch_add(1, std::memory_order_relaxed);
  resp_latencies_.Record(slot, ns);
}

ServerCounters::RespCommandCounts ServerCounters::RespCommand(size_t slot) const {
  if (slot >= kRespCommandSlots) return {};
  const RequestLatencies::Snapshot s = resp_latencies_.Read(slot);
  return {s.count, resp_errors_[slot].load(std::memory_order_relaxed), s.sum_ns};
}

void ServerCounters::CountRequest(protocol::Opcode op) {
  size_t slot = static_cast<size_t>(op);
  if (slot < kOpcodeSlots) ops_[slot].fetch_add(1, std::memory_order_relaxed);
}

void ServerCounters::CountRequestError(protocol::Opcode op) {
  size_t slot = static_cast<size_t>(op);
  if (slot < kOpcodeSlots) op_errors_[slot].fetch_add(1, std::memory_order_relaxed);
}

std::vector<size_t> ServerCounters::CalledRespSlots() const {
  std::vector<size_t> slots;
  for (size_t slot = 0; slot < kRespCommandSlots; ++slot) {
    if (resp_names_[slot].load(std::memory_order_relaxed) != nullptr) slots.push_back(slot);
  }
  return slots;
}

void ServerCounters::AppendLatencies(std::vector<ServerStats::Latency>* out) const {
  AppendLatencies(CalledRespSlots(), out);
}

void ServerCounters::AppendLatencies(const std::vector<size_t>& resp_slots,
                                     std::vector<ServerStats::Latency>* out) const {
  std::vector<uint64_t> upper(RequestLatencies::kBuckets);
  for (size_t i = 0; i < upper.size(); ++i)
    upper[i] = RequestLatencies::UpperBoundNs(i);
  auto append = [&](std::string op, RequestLatencies::Snapshot s) {
    ServerStats::Latency latency;
    latency.op = std::move(op);
    latency.upper_ns = upper;
    latency.counts = std::move(s.counts);
    latency.count = s.count;
    latency.sum_ns = s.sum_ns;
    out->push_back(std::move(latency));
  };
  for (protocol::Opcode op : kCountedOps) {
    // "mget" from "op_mget"
    append(OpCounterName(op).substr(3), latencies_.Read(static_cast<size_t>(op)));
  }
  for (size_t slot : resp_slots) {
    append(RespOpName(*resp_names_[slot].load(std::memory_order_relaxed)),
           resp_latencies_.Read(slot));
  }
}

bool ServerCounters::TryAdmitConnection(uint32_t max) {
  uint64_t open = connections_.load(std::memory_order_relaxed);
  do {
    if (open >= max) return false;
  } while (!connections_.compare_exchange_weak(open, open + 1, std::memory_order_relaxed));
  connections_accepted_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ServerCounters::AdmitConnectionInPlaceOfAnother() {
  connections_.fetch_add(1, std::memory_order_relaxed);
  connections_accepted_.fetch_add(1, std::memory_order_relaxed);
}

void ServerCounters::ConnectionClosed() {
  connections_.fetch_sub(1, std::memory_order_relaxed);
}

void ServerCounters::AppendTo(std::vector<std::pair<std::string, uint64_t>>* out) const {
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  out->emplace_back("connections", get(connections_));
  out->emplace_back("connections_accepted", get(connections_accepted_));
  out->emplace_back("connections_refused", get(connections_refused_));
  out->emplace_back("unauthenticated_connections", get(unauthenticated_connections_));
  out->emplace_back("connections_refused_per_address", get(connections_refused_per_address_));
  out->emplace_back("hello_timeouts", get(hello_timeouts_));
  out->emplace_back("unauthenticated_evictions", get(unauthenticated_evictions_));
  out->emplace_back("tls_handshakes", get(tls_handshakes_));
  out->emplace_back("tls_handshake_failures", get(tls_handshake_failures_));
  out->emplace_back("tls_kernel_offloads", get(tls_kernel_offloads_));
  out->emplace_back("error_responses", get(error_responses_));
  out->emplace_back("idle_timeouts", get(idle_timeouts_));
  out->emplace_back("aborted_msets", get(aborted_msets_));
  out->emplace_back("bytes_received", get(bytes_received_));
  out->emplace_back("socket_reads", get(socket_reads_));
  out->emplace_back("busy_poll_hits", get(busy_poll_hits_));
  out->emplace_back("bytes_sent", get(bytes_sent_));
  out->emplace_back("shm_attaches", get(shm_attaches_));
  out->emplace_back("auth_failures", get(auth_failures_));
  out->emplace_back("auth_throttled", get(auth_throttled_));
  out->emplace_back("leases", get(leases_));
  out->emplace_back("leased_bytes", get(leased_bytes_));
  out->emplace_back("queued_response_bytes", get(queued_response_bytes_));
  out->emplace_back("max_queued_response_bytes", get(max_queued_response_bytes_));
  out->emplace_back("max_input_buffer_bytes", get(max_input_buffer_bytes_));
  out->emplace_back("input_buffer_bytes", get(input_buffer_bytes_));
  out->emplace_back("changes_waiting_for_disk", get(changes_waiting_for_disk_));
  out->emplace_back("backpressure_pauses", get(backpressure_pauses_));
  out->emplace_back("paused_connections", get(paused_connections_));
  out->emplace_back("request_timeouts", get(request_timeouts_));
  out->emplace_back("unread_answers_closes", get(unread_answers_closes_));
  out->emplace_back("cluster_registered", get(cluster_registered_));
  out->emplace_back("cluster_reregistrations", get(cluster_reregistrations_));
  out->emplace_back("cluster_etcd_failures", get(cluster_etcd_failures_));
  // The ops in AppendLatencies's order, with their errors: the opcodes, then the RESP commands
  // called so far.
  std::vector<uint64_t> errors;
  for (protocol::Opcode op : kCountedOps) {
    out->emplace_back(OpCounterName(op), get(ops_[static_cast<size_t>(op)]));
    errors.push_back(get(op_errors_[static_cast<size_t>(op)]));
  }
  const std::vector<size_t> resp_slots = CalledRespSlots();
  std::vector<ServerStats::Latency> latencies;
  AppendLatencies(resp_slots, &latencies);
  for (size_t i = 0; i < resp_slots.size(); ++i) {
    const ServerStats::Latency& l = latencies[std::size(kCountedOps) + i];
    out->emplace_back("op_" + l.op, l.count);  // its calls: its histogram's count
    errors.push_back(resp_errors_[resp_slots[i]].load(std::memory_order_relaxed));
  }
  // Per-op errors and latency quantiles (what `kvport top` shows), after every op_* counter.
  for (size_t i = 0; i < latencies.size(); ++i) {
    const ServerStats::Latency& l = latencies[i];
    out->emplace_back("errors_" + l.op, errors[i]);
    out->emplace_back("latency_" + l.op + "_p50_us",
                      static_cast<uint64_t>(std::llround(l.QuantileNs(0.50) / 1000.0)));
    out->emplace_back("latency_" + l.op + "_p99_us",
                      static_cast<uint64_t>(std::llround(l.QuantileNs(0.99) / 1000.0)));
  }
}

ServerStats CollectStats(const store::ObjectStore& store, const ServerCounters& counters,
                         bool namespaces) {
  ServerStats stats;
  store::StoreStats s = store.Stats();
  stats.counters = {
      {"capacity_bytes", s.capacity_bytes},
      {"used_bytes", s.used_bytes},
      {"value_bytes", s.value_bytes},
      {"reserved_bytes", s.reserved_bytes},
      {"reserved_unwritten_bytes", s.reserved_unwritten_bytes},
      {"reservation_moves", s.reservation_moves},
      {"reservation_moved_bytes", s.reservation_moved_bytes},
      {"retired_bytes", s.retired_bytes},
      {"objects", s.objects},
      {"hits", s.hits},
      {"misses", s.misses},
      {"evictions", s.evictions},
      {"expirations", s.expirations},
      {"free_extents", s.free_extents},
      {"largest_free_bytes", s.largest_free_bytes},
      {"index_bytes", s.index_bytes},
      {"max_index_bytes", s.max_index_bytes},
      {"max_reserved_bytes", s.max_reserved_bytes},
      {"pinned_bytes", s.pinned_bytes},
      {"max_pinned_bytes", s.max_pinned_bytes},
      {"reserve_cap_refusals", s.reserve_cap_refusals},
      {"pin_cap_refusals", s.pin_cap_refusals},
  };
  counters.AppendTo(&stats.counters);
  counters.AppendLatencies(&stats.latencies);
  if (!namespaces) return stats;  // a pass over every namespace: only for who asks for them
  for (const store::NamespaceUsage& u : store.NamespaceUsages()) {
    stats.namespaces.push_back({u.ns, u.objects, u.value_bytes + u.meta_bytes});
  }
  return stats;
}

}  // namespace server
}  // namespace kvport
