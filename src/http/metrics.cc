// SPDX-License-Identifier: Apache-2.0
#include "http/metrics.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/escape_text.h"

namespace kvport::http {

namespace {

constexpr std::string_view kCounter = "counter";
constexpr std::string_view kGauge = "gauge";
constexpr std::string_view kHistogram = "histogram";

// Powers of two of nanoseconds exposed as `le` bounds of kvport_request_duration_seconds: every
// one is a bucket bound of the node's histograms (server/request_latency.h), so the cumulative
// counts are exact.
constexpr unsigned kFirstLeExponent = 12;  // 4.096 us
constexpr unsigned kLastLeExponent = 34;   // 17.18 s

std::vector<MetricInfo> MakeCatalog() {
  return {
      {"kvport_build_info", kGauge, "", "version", "kvport build; the value is 1", ""},
      {"kvport_auth_info", kGauge, "", "mode",
       "How clients authenticate (token, none, insecure); 1", ""},
      {"kvport_serving", kGauge, "", "", "1 while the node serves, 0 while draining or stopped",
       ""},
      {"kvport_runtime_info", kGauge, "", "runtime,available,version",
       "Accelerator runtimes this process found (kvport doctor); the value is 1", ""},
      {"kvport_transport_info", kGauge, "", "transport,available",
       "Transports a client on this host could use (kvport doctor); the value is 1", ""},
      {"kvport_process_resident_memory_bytes", kGauge, "bytes", "",
       "Resident set size of the node process (/proc/self/statm)", ""},
      {"kvport_capacity_bytes", kGauge, "bytes", "", "Bytes of the arena that holds the values",
       "capacity_bytes"},
      {"kvport_used_bytes", kGauge, "bytes", "",
       "Arena bytes in use: stored objects, reservations and retired extents", "used_bytes"},
      {"kvport_value_bytes", kGauge, "bytes", "", "Value bytes of the stored objects",
       "value_bytes"},
      {"kvport_reserved_bytes", kGauge, "bytes", "",
       "Arena bytes reserved by MSETs still being received", "reserved_bytes"},
      {"kvport_retired_bytes", kGauge, "bytes", "",
       "Arena bytes of replaced or deleted objects still pinned by readers", "retired_bytes"},
      {"kvport_free_extents", kGauge, "", "", "Free extents in the arena", "free_extents"},
      {"kvport_largest_free_extent_bytes", kGauge, "bytes", "", "Largest free extent",
       "largest_free_bytes"},
      {"kvport_objects", kGauge, "", "", "Objects stored", "objects"},
      {"kvport_index_bytes", kGauge, "bytes", "",
       "Heap bytes charged for the objects' index entries, keys, namespaces and metadata",
       "index_bytes"},
      {"kvport_index_limit_bytes", kGauge, "bytes", "", "Cap on kvport_index_bytes; 0 none",
       "max_index_bytes"},
      {"kvport_reserved_unwritten_bytes", kGauge, "bytes", "",
       "Of kvport_reserved_bytes, what the writers have not written yet",
       "reserved_unwritten_bytes"},
      {"kvport_reserved_limit_bytes", kGauge, "bytes", "",
       "Cap on kvport_reserved_unwritten_bytes; 0 none", "max_reserved_bytes"},
      {"kvport_reservation_moves_total", kCounter, "", "",
       "Stepwise reservations moved to grow (no room in place)", "reservation_moves"},
      {"kvport_reservation_moved_bytes_total", kCounter, "bytes", "",
       "Written bytes copied by those moves", "reservation_moved_bytes"},
      {"kvport_pinned_bytes", kGauge, "bytes", "",
       "Arena bytes of objects pinned by at least one reader", "pinned_bytes"},
      {"kvport_pinned_limit_bytes", kGauge, "bytes", "", "Cap on kvport_pinned_bytes; 0 none",
       "max_pinned_bytes"},
      {"kvport_reserve_cap_refusals_total", kCounter, "", "",
       "Reservations refused by the reserved-bytes cap", "reserve_cap_refusals"},
      {"kvport_pin_cap_refusals_total", kCounter, "", "", "Lookups refused by the pinned-bytes cap",
       "pin_cap_refusals"},
      {"kvport_hits_total", kCounter, "", "", "Keys found by MGET and ARENA_GET", "hits"},
      {"kvport_misses_total", kCounter, "", "", "Keys not found by MGET and ARENA_GET", "misses"},
      {"kvport_evictions_total", kCounter, "", "", "Objects evicted to make room", "evictions"},
      {"kvport_expirations_total", kCounter, "", "", "Objects removed when their TTL passed",
       "expirations"},
      {"kvport_connections", kGauge, "", "", "Connections open now (TCP and Unix)", "connections"},
      {"kvport_connections_accepted_total", kCounter, "", "", "Connections accepted",
       "connections_accepted"},
      {"kvport_connections_refused_total", kCounter, "", "",
       "Connections refused over max_connections", "connections_refused"},
      {"kvport_unauthenticated_connections", kGauge, "", "",
       "Connections open now that have not completed HELLO", "unauthenticated_connections"},
      {"kvport_connections_refused_per_address_total", kCounter, "", "",
       "Connections refused over max_unauthenticated_per_address",
       "connections_refused_per_address"},
      {"kvport_hello_timeouts_total", kCounter, "", "",
       "Connections closed without a HELLO within hello_timeout_secs", "hello_timeouts"},
      {"kvport_unauthenticated_evictions_total", kCounter, "", "",
       "Connections closed before HELLO to admit a newer one at max_connections",
       "unauthenticated_evictions"},
      {"kvport_tls_handshakes_total", kCounter, "", "", "TLS handshakes completed",
       "tls_handshakes"},
      {"kvport_tls_handshake_failures_total", kCounter, "", "",
       "TLS handshakes failed (certificate refused, peer not speaking TLS)",
       "tls_handshake_failures"},
      {"kvport_tls_kernel_offloads_total", kCounter, "", "",
       "TLS sessions whose records the kernel encrypts (kTLS)", "tls_kernel_offloads"},
      {"kvport_error_responses_total", kCounter, "", "", "ERROR frames sent", "error_responses"},
      {"kvport_idle_timeouts_total", kCounter, "", "", "Connections closed for being idle",
       "idle_timeouts"},
      {"kvport_aborted_msets_total", kCounter, "", "",
       "MSETs aborted before their payload was complete", "aborted_msets"},
      {"kvport_received_bytes_total", kCounter, "bytes", "",
       "Bytes read from client sockets (frames and payloads)", "bytes_received"},
      {"kvport_socket_reads_total", kCounter, "", "",
       "Read system calls on plain client sockets (one usually brings a whole small call)",
       "socket_reads"},
      {"kvport_busy_poll_hits_total", kCounter, "", "",
       "Times an I/O thread busy polling found a request instead of sleeping (busy_poll_us)",
       "busy_poll_hits"},
      {"kvport_sent_bytes_total", kCounter, "bytes", "",
       "Bytes written to client sockets (frames and payloads)", "bytes_sent"},
      {"kvport_shm_attaches_total", kCounter, "", "", "Shared-memory attaches granted",
       "shm_attaches"},
      {"kvport_auth_failures_total", kCounter, "", "",
       "HELLOs and AUTHs refused for a missing or unknown token", "auth_failures"},
      {"kvport_auth_throttled_total", kCounter, "", "",
       "Connections, HELLOs and AUTHs refused unchecked: their peer is backed off after failed "
       "authentications",
       "auth_throttled"},
      {"kvport_auth_required", kGauge, "", "", "1 when clients must present a token",
       "auth_required"},
      {"kvport_insecure", kGauge, "", "",
       "1 when the node is open (no tokens) and reachable beyond loopback", "insecure"},
      {"kvport_arena_leases", kGauge, "", "",
       "Arena leases held now (ARENA_GET answers not yet released)", "leases"},
      {"kvport_arena_leased_bytes", kGauge, "bytes", "", "Value bytes pinned by leases",
       "leased_bytes"},
      {"kvport_queued_response_bytes", kGauge, "bytes", "",
       "Heap of the responses queued on every connection (heads, bookkeeping)",
       "queued_response_bytes"},
      {"kvport_queued_response_limit_bytes", kGauge, "bytes", "",
       "Node-wide cap on kvport_queued_response_bytes", "max_queued_response_bytes"},
      {"kvport_input_buffer_bytes", kGauge, "bytes", "",
       "Bytes buffered of requests being received", "input_buffer_bytes"},
      {"kvport_input_buffer_limit_bytes", kGauge, "bytes", "",
       "Node-wide cap on kvport_input_buffer_bytes; 0 none", "max_input_buffer_bytes"},
      {"kvport_changes_waiting_for_disk", kGauge, "", "",
       "Changes whose answers wait for their tombstones to be durable on disk",
       "changes_waiting_for_disk"},
      {"kvport_backpressure_pauses_total", kCounter, "", "",
       "Times a connection stopped being read for its queued responses", "backpressure_pauses"},
      {"kvport_paused_connections", kGauge, "", "", "Connections not being read now",
       "paused_connections"},
      {"kvport_request_timeouts_total", kCounter, "", "",
       "Requests that did not arrive whole within their deadline", "request_timeouts"},
      {"kvport_unread_answers_closes_total", kCounter, "", "",
       "Connections closed for taking none of their queued answers within the deadline",
       "unread_answers_closes"},
      {"kvport_cluster_registered", kGauge, "", "",
       "1 while the node's record is in etcd (0 standalone)", "cluster_registered"},
      {"kvport_cluster_reregistrations_total", kCounter, "", "",
       "New epochs taken after the node's lease lapsed (its store dropped)",
       "cluster_reregistrations"},
      {"kvport_cluster_etcd_failures_total", kCounter, "", "",
       "Lease renewals and registrations etcd did not answer", "cluster_etcd_failures"},
      {"kvport_disk_objects", kGauge, "", "", "Objects in the disk tier (0 without one)",
       "disk_objects"},
      {"kvport_disk_bytes", kGauge, "bytes", "", "Bytes the disk tier's segments take",
       "disk_bytes"},
      {"kvport_disk_writes_total", kCounter, "", "",
       "Objects evicted from memory and written to disk", "disk_writes"},
      {"kvport_disk_write_errors_total", kCounter, "", "",
       "Disk writes that failed (the object was dropped)", "disk_write_errors"},
      {"kvport_disk_queue_drops_total", kCounter, "", "",
       "Evicted objects dropped: the disk writer's queue was full", "disk_queue_drops"},
      {"kvport_disk_pending_bytes", kGauge, "bytes", "",
       "Evicted bytes waiting for the disk writer", "disk_pending_bytes"},
      {"kvport_disk_pending_tombstones", kGauge, "", "",
       "Tombstones of replaced or deleted versions waiting for the disk writer",
       "disk_pending_tombstones"},
      {"kvport_disk_hits_total", kCounter, "", "",
       "Gets that missed memory and were served from disk", "disk_hits"},
      {"kvport_disk_evicted_objects_total", kCounter, "", "",
       "Objects dropped from disk with the oldest segments, for room", "disk_evicted_objects"},
      {"kvport_disk_dropped_records_total", kCounter, "", "",
       "Disk records dropped for failing their checksum", "disk_dropped_records"},
      {"kvport_disk_read_errors_total", kCounter, "", "", "Disk reads that failed (a miss)",
       "disk_read_errors"},
      {"kvport_disk_killed_records_total", kCounter, "", "",
       "Disk records deleted in place where no tombstone could be appended (a full disk)",
       "disk_killed_records"},
      {"kvport_disk_quarantined_segments", kGauge, "", "",
       "Segments the node's start could not open or scan, renamed aside to NAME.quarantined",
       "disk_quarantined_segments"},
      {"kvport_disk_restored_objects", kGauge, "", "",
       "Objects the disk tier found at the node's start", "disk_restored"},
      {"kvport_disk_restore_seconds", kGauge, "seconds", "",
       "How long the disk tier's index rebuild took at the node's start", "disk_restore_ms"},
      {"kvport_disk_torn_tails_total", kCounter, "", "",
       "Segments found ending in a torn record at the start (a crash mid-write): cut off",
       "disk_torn_tails"},
      {"kvport_disk_damaged_segments_total", kCounter, "", "",
       "Segments found at the start with a damaged record followed by others (a bad disk, not a "
       "crash): those after it are lost",
       "disk_damaged_segments"},
      {"kvport_disk_compacted_segments_total", kCounter, "", "",
       "Mostly-dead segments whose live records compaction moved forward (the file removed)",
       "disk_compacted_segments"},
      {"kvport_disk_compacted_bytes_total", kCounter, "bytes", "",
       "Record bytes compaction copied forward", "disk_compacted_bytes"},
      {"kvport_disk_index_bytes", kGauge, "bytes", "",
       "Heap the disk tier's index takes (counted against max_index_bytes)", "disk_index_bytes"},
      {"kvport_disk_index_drops_total", kCounter, "", "",
       "Evicted objects not written: the disk index had half of max_index_bytes",
       "disk_index_drops"},
      {"kvport_disk_batch_reads_total", kCounter, "", "",
       "Objects a batched get read from disk together with others", "disk_batch_reads"},
      {"kvport_requests_total", kCounter, "", "op", "Requests received, by opcode", ""},
      {"kvport_request_errors_total", kCounter, "", "op",
       "Requests answered with an ERROR, by opcode", ""},
      {"kvport_request_duration_seconds", kHistogram, "seconds", "op",
       "From a request's header arriving to its response being queued, by opcode", ""},
      {"kvport_namespaces", kGauge, "", "", "Namespaces holding objects", ""},
      {"kvport_namespace_objects", kGauge, "", "namespace",
       "Objects per namespace (the largest by bytes; the rest in namespace=\"__other__\")", ""},
      {"kvport_namespace_bytes", kGauge, "bytes", "namespace",
       "Value and meta bytes per namespace (the largest; the rest in namespace=\"__other__\")", ""},
  };
}

// A label value in the exposition format: outside text made one printable line
// (common/escape_text.h), then '\', '"' and newline escaped as the format asks.
std::string LabelValue(std::string_view text) {
  std::string escaped = EscapeText(text);
  std::string out;
  out.reserve(escaped.size());
  for (char c : escaped) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

class Writer {
 public:
  void Family(const MetricInfo& m) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", m.name, m.help, m.name, m.type);
  }
  void Sample(std::string_view name, std::string_view labels, uint64_t value) {
    out_ += name;
    if (!labels.empty()) out_ += fmt::format("{{{}}}", labels);
    out_ += fmt::format(" {}\n", value);
  }
  void Sample(std::string_view name, std::string_view labels, double value) {
    out_ += name;
    if (!labels.empty()) out_ += fmt::format("{{{}}}", labels);
    out_ += fmt::format(" {}\n", value);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

const MetricInfo& Find(std::string_view name) {
  for (const MetricInfo& m : MetricCatalog()) {
    if (m.name == name) return m;
  }
  static const MetricInfo kNone{};
  return kNone;
}

}  // namespace

const std::vector<MetricInfo>& MetricCatalog() {
  static const std::vector<MetricInfo> catalog = MakeCatalog();
  return catalog;
}

bool IsFamilyCounter(std::string_view name) {
  return name.starts_with("op_") || name.starts_with("errors_") || name.starts_with("latency_");
}

std::string RenderMetrics(const ServerStats& stats, const MetricsContext& context) {
  Writer w;
  for (const MetricInfo& m : MetricCatalog()) {
    if (!m.stats_counter.empty()) {
      w.Family(m);
      if (m.unit == "seconds") {  // STATS counts durations in ms; Prometheus wants seconds
        w.Sample(m.name, "", static_cast<double>(stats.Get(m.stats_counter)) / 1e3);
      } else {
        w.Sample(m.name, "", stats.Get(m.stats_counter));
      }
      continue;
    }
    const std::string_view name = m.name;
    if (name == "kvport_build_info") {
      w.Family(m);
      w.Sample(name, fmt::format("version=\"{}\"", LabelValue(context.version)), uint64_t{1});
    } else if (name == "kvport_auth_info") {
      w.Family(m);
      w.Sample(name, fmt::format("mode=\"{}\"", LabelValue(context.auth_mode)), uint64_t{1});
    } else if (name == "kvport_serving") {
      w.Family(m);
      w.Sample(name, "", uint64_t{context.state == ServerState::kServing ? 1u : 0u});
    } else if (name == "kvport_runtime_info") {
      w.Family(m);
      for (const Availability& a : context.runtimes) {
        w.Sample(name,
                 fmt::format("runtime=\"{}\",available=\"{}\",version=\"{}\"", LabelValue(a.name),
                             a.available ? "true" : "false", LabelValue(a.version)),
                 uint64_t{1});
      }
    } else if (name == "kvport_transport_info") {
      w.Family(m);
      for (const Availability& a : context.transports) {
        w.Sample(name,
                 fmt::format("transport=\"{}\",available=\"{}\"", LabelValue(a.name),
                             a.available ? "true" : "false"),
                 uint64_t{1});
      }
    } else if (name == "kvport_process_resident_memory_bytes") {
      w.Family(m);
      w.Sample(name, "", context.resident_bytes);
    } else if (name == "kvport_requests_total" || name == "kvport_request_errors_total") {
      w.Family(m);
      const std::string prefix = name == "kvport_requests_total" ? "op_" : "errors_";
      for (const ServerStats::Latency& l : stats.latencies) {
        w.Sample(name, fmt::format("op=\"{}\"", LabelValue(l.op)), stats.Get(prefix + l.op));
      }
    } else if (name == "kvport_request_duration_seconds") {
      w.Family(m);
      const std::string bucket = std::string(name) + "_bucket";
      for (const ServerStats::Latency& l : stats.latencies) {
        const std::string op = LabelValue(l.op);
        uint64_t cumulative = 0;
        size_t i = 0;
        for (unsigned e = kFirstLeExponent; e <= kLastLeExponent; ++e) {
          const uint64_t bound = uint64_t{1} << e;
          for (; i < l.counts.size() && i < l.upper_ns.size() && l.upper_ns[i] <= bound; ++i)
            cumulative += l.counts[i];
          w.Sample(bucket, fmt::format("op=\"{}\",le=\"{}\"", op, static_cast<double>(bound) / 1e9),
                   cumulative);
        }
        w.Sample(bucket, fmt::format("op=\"{}\",le=\"+Inf\"", op), l.count);
        w.Sample(std::string(name) + "_sum", fmt::format("op=\"{}\"", op),
                 static_cast<double>(l.sum_ns) / 1e9);
        w.Sample(std::string(name) + "_count", fmt::format("op=\"{}\"", op), l.count);
      }
    } else if (name == "kvport_namespaces") {
      w.Family(m);
      w.Sample(name, "", static_cast<uint64_t>(stats.namespaces.size()));
    }
  }

  // The per-namespace families last, from one ranking: the largest by bytes get a label.
  std::vector<const ServerStats::Namespace*> ranked;
  ServerStats::Namespace other;
  bool any_other = false;
  for (const ServerStats::Namespace& ns : stats.namespaces) {
    if (ns.ns == kOtherNamespaceLabel) {
      other.objects += ns.objects;
      other.bytes += ns.bytes;
      any_other = true;
    } else {
      ranked.push_back(&ns);
    }
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto* a, const auto* b) {
    return a->bytes != b->bytes ? a->bytes > b->bytes : a->ns < b->ns;
  });
  if (ranked.size() > context.max_namespace_labels) {
    for (size_t i = context.max_namespace_labels; i < ranked.size(); ++i) {
      other.objects += ranked[i]->objects;
      other.bytes += ranked[i]->bytes;
    }
    any_other = true;
    ranked.resize(context.max_namespace_labels);
  }
  for (std::string_view family : {"kvport_namespace_objects", "kvport_namespace_bytes"}) {
    const bool objects = family == "kvport_namespace_objects";
    w.Family(Find(family));
    for (const ServerStats::Namespace* ns : ranked) {
      w.Sample(family, fmt::format("namespace=\"{}\"", LabelValue(ns->ns)),
               objects ? ns->objects : ns->bytes);
    }
    if (any_other) {
      w.Sample(family, fmt::format("namespace=\"{}\"", kOtherNamespaceLabel),
               objects ? other.objects : other.bytes);
    }
  }
  return w.Take();
}

std::string RenderStatsJson(const ServerStats& stats) {
  using Json = nlohmann::ordered_json;
  Json counters = Json::object();
  for (const auto& [name, value] : stats.counters)
    counters[name] = value;
  Json namespaces = Json::array();
  for (const auto& ns : stats.namespaces) {
    namespaces.push_back({{"name", ns.ns}, {"objects", ns.objects}, {"bytes", ns.bytes}});
  }
  const Json json = {{"counters", std::move(counters)}, {"namespaces", std::move(namespaces)}};
  return json.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace) + "\n";
}

std::string RenderHealthJson(std::string_view status, std::string_view version) {
  const nlohmann::ordered_json json = {{"status", status}, {"version", version}};
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace kvport::http
