// SPDX-License-Identifier: Apache-2.0
#include "bench/bench_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "kvport/size.h"

namespace kvport::bench {
namespace {

std::string Millis(uint64_t nanos) {
  const double ms = nanos / 1e6;
  return ms < 10 ? fmt::format("{:.2f}", ms) : fmt::format("{:.1f}", ms);
}

// 1234567 -> "1.23M"; small rates keep one decimal.
std::string Rate(double per_second) {
  if (per_second >= 1e6) return fmt::format("{:.2f}M", per_second / 1e6);
  if (per_second >= 1e4) return fmt::format("{:.1f}k", per_second / 1e3);
  return fmt::format("{:.1f}", per_second);
}

// Microseconds rounded to 0.1, for JSON.
double Micros(uint64_t nanos) {
  return std::round(static_cast<double>(nanos) / 100.0) / 10.0;
}

// A ratio for JSON: null when absent (nlohmann writes a non-finite number as null too).
nlohmann::ordered_json Ratio(const std::optional<double>& r) {
  return r ? nlohmann::ordered_json(*r) : nlohmann::ordered_json(nullptr);
}

// What a phase did: the op, or "stream" (socket) and "copy" (memcpy) for the baselines.
std::string_view PhaseOpName(const PhaseResult& p) {
  if (p.system == "socket") return "stream";
  if (p.system == "memcpy") return "copy";
  if (p.system == "fio") return p.op == Op::kGet ? "read" : "write";
  return OpName(p.op);
}

std::string Row(const PhaseResult& p) {
  const bool has_latency = p.latency.count() > 0;
  const bool baseline = p.system == "socket" || p.system == "memcpy";
  std::string row =
      fmt::format("  {:<7} {:<7} {:<13} {:>7.2f} {:>9} {:>7}", p.system, PhaseOpName(p), p.variant,
                  p.gb_per_second(), baseline ? "-" : Rate(p.keys_per_second()), p.calls);
  if (has_latency) {
    row += fmt::format(" {:>8} {:>8} {:>8}", Millis(p.latency.Percentile(0.5)),
                       Millis(p.latency.Percentile(0.99)), Millis(p.latency.Percentile(0.999)));
  } else {
    row += fmt::format(" {:>8} {:>8} {:>8}", "-", "-", "-");
  }
  if (p.failed_keys > 0) row += fmt::format("  FAILED KEYS: {}", p.failed_keys);
  if (!p.error.empty()) row += "  ERROR: " + p.error;
  return row + "\n";
}

// How a Python-driven peer is driven (python/peers/*_bench.py).
std::string_view PeerPattern(std::string_view system) {
  if (system == "mooncake") {
    return "Mooncake Store over its TCP transport, a client per thread with registered buffers, "
           "one batch_upsert_from / batch_get_into / batch_is_exist per call, the store's memory "
           "in another process";
  }
  if (system == "lmcache-server") {
    return "LMCache's server (lm://) through LMCache's own connector, a worker per thread, one "
           "put / get / exists per chunk (LMCache's puts are not acknowledged)";
  }
  return "";
}

std::string RatioText(const std::optional<double>& r) {
  return r ? fmt::format("{:.2f}x", *r) : std::string("-");
}

using Json = nlohmann::ordered_json;

Json PhaseJson(const PhaseResult& p) {
  Json phase = {{"system", p.system},
                {"variant", p.variant},
                {"op", PhaseOpName(p)},
                {"calls", p.calls},
                {"keys", p.keys},
                {"bytes", p.bytes},
                {"failed_keys", p.failed_keys},
                {"seconds", p.seconds},
                {"gb_per_s", p.gb_per_second()},
                {"keys_per_s", p.keys_per_second()},
                {"error", p.error},
                {"latency_us", nullptr}};
  if (p.latency.count() > 0) {
    phase["latency_us"] = {{"p50", Micros(p.latency.Percentile(0.5))},
                           {"p99", Micros(p.latency.Percentile(0.99))},
                           {"p999", Micros(p.latency.Percentile(0.999))},
                           {"max", Micros(p.latency.max())},
                           {"mean", p.latency.mean() / 1e3}};
  }
  return phase;
}

// Non-finite numbers are written as null; invalid UTF-8 in a string (an error message from a
// node or redis) becomes U+FFFD: the output is always valid JSON.
std::string Dump(const Json& j) {
  return j.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace) + "\n";
}

std::string TransportList(const std::vector<Transport>& transports) {
  std::string out;
  for (Transport t : transports)
    out += (out.empty() ? "" : ", ") + std::string(TransportName(t));
  return out;
}

// "put/get one command at a time", "put/get pipelined 16 deep": what the redis phases did.
std::string RedisPattern(const BenchOptions& o) {
  const size_t depth = o.redis_depth();
  std::string put_get = depth == 1 ? std::string("one SET/GET per round trip (no pipeline)")
                                   : fmt::format("SET/GET pipelined {} deep", depth);
  return fmt::format("{}, one connection per thread; EXISTS pipelined {} deep", put_get,
                     o.exists_batch);
}

}  // namespace

std::string FormatBenchText(const BenchReport& report) {
  const BenchOptions& o = report.options;
  const std::string ops = OpList(o.ops);
  std::string out = fmt::format(
      "kvport bench: {} of {} values{}, batches of {}, {} connection(s), {} thread(s){}; "
      "mexist of {} keys per call; transport: {}\n",
      ops, FormatSize(o.value_bytes), o.shape ? " (" + o.shape->ToString() + ")" : "", o.batch,
      o.connections, o.worker_threads(),
      o.inflight > 1
          ? fmt::format(" with {} kvport calls in flight each (a call below is a group of {})",
                        o.inflight, o.inflight)
          : "",
      o.exists_batch, TransportList(report.transports));
  if (o.busy_poll_us > 0) {
    out += fmt::format("kvport client: busy polls {} us for each answer before it sleeps\n",
                       o.busy_poll_us);
  }
  if (!o.checksums) out += "kvport client: checksums off (--checksums off)\n";
  out += fmt::format("node: {}\n", report.node);
  if (o.nodes > 1) {
    out += fmt::format(
        "nodes: {0} embedded; 'kvport' rows: the first node alone, 'cluster' rows: all {0} as one "
        "static cluster ({1} connection(s) to each), the one node's keys deleted in between\n",
        o.nodes, o.connections);
  }
  if (!report.transport_note.empty()) out += report.transport_note + "\n";
  out += o.warmup_calls() > 0
             ? fmt::format("warm-up: {} of untimed puts first, on kvport and redis alike\n\n",
                           FormatSize(o.warmup_calls() * o.batch * o.value_bytes))
             : std::string("warm-up: none\n\n");
  out += fmt::format("  {:<7} {:<7} {:<13} {:>7} {:>9} {:>7} {:>8} {:>8} {:>8}\n", "system", "op",
                     "mode", "GB/s", "keys/s", "calls", "p50 ms", "p99 ms", "p999 ms");
  for (const auto* list : {&report.kvport, &report.cluster, &report.socket, &report.memcpy,
                           &report.redis, &report.ucx_perftest}) {
    for (const PhaseResult& p : *list)
      out += Row(p);
  }
  for (const BenchReport::Peer& peer : report.peers) {
    for (const PhaseResult& p : peer.phases)
      out += Row(p);
  }
  out += o.inflight > 1
             ? fmt::format(
                   "\n(kvport latency is per group of {} batched calls in flight at once, redis's "
                   "per batched call; GB/s is value bytes, 10^9 per GB)\n",
                   o.inflight)
             : "\n(latency is per batched call, one round trip; GB/s is value bytes, 10^9 per "
               "GB)\n";
  if (!report.socket_skipped.empty()) {
    out += "socket baseline skipped: " + report.socket_skipped + "\n";
  }
  if (!report.redis_skipped.empty()) {
    out += "redis baseline skipped: " + report.redis_skipped + "\n";
  } else {
    out += "redis pattern: " + RedisPattern(o) + "\n";
  }
  for (const BenchReport::Peer& peer : report.peers) {
    if (!peer.skipped.empty()) {
      out += fmt::format("{} baseline skipped: {}\n", peer.system, peer.skipped);
    } else {
      out += fmt::format("{} pattern: {}\n", peer.system, PeerPattern(peer.system));
    }
  }

  const PhaseResult* limit = report.Limit();
  const PhaseResult* memcpy_limit = report.MemcpyLimit();
  std::string limits;
  if (limit != nullptr) {
    limits += fmt::format("tcp limit = fastest socket mode, {} at {:.2f} GB/s", limit->variant,
                          limit->gb_per_second());
  }
  if (memcpy_limit != nullptr) {
    limits += fmt::format("{}shm limit = memcpy into {} at {:.2f} GB/s", limits.empty() ? "" : "; ",
                          memcpy_limit->variant, memcpy_limit->gb_per_second());
  }
  for (const PhaseResult& p : report.ucx_perftest) {
    if (!p.error.empty()) {
      out += fmt::format("ucx_perftest {} skipped: {}\n", OpName(p.op), p.error);
      continue;
    }
    limits += fmt::format("{}ucx {} limit = ucx_perftest {} at {:.2f} GB/s",
                          limits.empty() ? "" : "; ", OpName(p.op), p.variant, p.gb_per_second());
  }
  out += limits.empty() ? std::string("\nratios:\n") : "\nratios (" + limits + "):\n";
  for (Op op : o.ops) {
    for (Transport t : report.transports) {
      if (report.FindKvport(op, t) == nullptr) continue;
      const bool tcp = t == Transport::kTcp;
      std::string peers;
      for (const BenchReport::Peer& peer : report.peers) {
        if (peer.phases.empty()) continue;
        peers += fmt::format("   kvport/{} {:>7}", peer.system,
                             RatioText(report.RatioToPeer(peer.system, op, t)));
      }
      out += fmt::format(
          "  {:<7} {:<4} kvport/{:<7} {:>7}   kvport/redis {:>7}{}{}\n", OpName(op),
          TransportName(t), tcp ? "limit" : (t == Transport::kShm ? "memcpy" : "perftest"),
          op == Op::kExists ? std::string("n/a") : RatioText(report.RatioToLimit(op, t)),
          RatioText(report.RatioToRedis(op, t)), peers,
          op == Op::kExists ? "  (keys/s)" : "  (GB/s)");
    }
  }
  if (!report.cluster.empty()) {
    out += fmt::format("\ncluster of {} nodes over one node alone (same run, same phases):\n",
                       o.nodes);
    for (Op op : o.ops) {
      for (Transport t : report.transports) {
        if (report.FindCluster(op, t) == nullptr) continue;
        out += fmt::format("  {:<7} {:<4} cluster/node   {:>7}{}\n", OpName(op), TransportName(t),
                           RatioText(report.RatioClusterToNode(op, t)),
                           op == Op::kExists ? "  (keys/s)" : "  (GB/s)");
      }
    }
  }
  if (!report.AllPassed()) out += "\nFAILED: some keys failed or did not verify (see above)\n";
  return out;
}

std::string FormatBenchJson(const BenchReport& report) {
  const BenchOptions& o = report.options;
  Json ops = Json::array();
  for (Op op : o.ops)
    ops.push_back(OpName(op));
  Json transports = Json::array();
  for (Transport t : report.transports)
    transports.push_back(TransportName(t));
  Json options = {{"url", o.url},
                  {"value_bytes", o.value_bytes},
                  {"batch", o.batch},
                  {"connections", o.connections},
                  {"threads", o.worker_threads()},
                  {"inflight", o.inflight},
                  {"busy_poll_us", o.busy_poll_us},
                  {"checksums", o.checksums},
                  {"ops", std::move(ops)},
                  {"count", o.count},
                  {"max_seconds", o.max_seconds},
                  {"exists_batch", o.exists_batch},
                  {"exists_count", o.exists_count},
                  {"warmup_bytes", o.warmup_calls() * o.batch * o.value_bytes},
                  {"transports", std::move(transports)},
                  {"redis_pipeline", o.redis_depth()},
                  {"nodes", o.nodes}};
  if (o.shape) {
    options["shape"] = {{"layers", o.shape->layers},
                        {"kv_heads", o.shape->kv_heads},
                        {"head_dim", o.shape->head_dim},
                        {"dtype", o.shape->dtype},
                        {"tokens_per_chunk", o.shape->tokens_per_chunk}};
  }
  Json phases = Json::array();
  for (const auto* list : {&report.kvport, &report.cluster, &report.socket, &report.memcpy,
                           &report.redis, &report.ucx_perftest}) {
    for (const PhaseResult& p : *list)
      phases.push_back(PhaseJson(p));
  }
  Json peers_skipped = Json::object();
  for (const BenchReport::Peer& peer : report.peers) {
    for (const PhaseResult& p : peer.phases)
      phases.push_back(PhaseJson(p));
    if (!peer.skipped.empty()) peers_skipped[peer.system] = peer.skipped;
  }
  const PhaseResult* limit = report.Limit();
  const PhaseResult* memcpy_limit = report.MemcpyLimit();
  Json ratios = Json::object();
  Json ratios_shm = Json::object();
  Json ratios_ucx = Json::object();
  for (Op op : o.ops) {
    ratios_ucx[std::string(OpName(op))] = {
        {"vs_ucx_perftest", Ratio(report.RatioToLimit(op, Transport::kUcx))}};
    Json tcp = {{"vs_limit", Ratio(report.RatioToLimit(op))},
                {"vs_redis", Ratio(report.RatioToRedis(op))}};
    Json shm_ratios = {{"vs_memcpy", Ratio(report.RatioToLimit(op, Transport::kShm))},
                       {"vs_redis", Ratio(report.RatioToRedis(op, Transport::kShm))}};
    for (const BenchReport::Peer& peer : report.peers) {
      tcp["vs_" + peer.system] = Ratio(report.RatioToPeer(peer.system, op));
      shm_ratios["vs_" + peer.system] = Ratio(report.RatioToPeer(peer.system, op, Transport::kShm));
    }
    ratios[std::string(OpName(op))] = std::move(tcp);
    ratios_shm[std::string(OpName(op))] = std::move(shm_ratios);
  }
  const bool shm = std::find(report.transports.begin(), report.transports.end(), Transport::kShm) !=
                   report.transports.end();
  Json cluster(nullptr);
  if (!report.cluster.empty()) {
    Json cluster_ratios = Json::object();
    Json cluster_ratios_shm = Json::object();
    for (Op op : o.ops) {
      cluster_ratios[std::string(OpName(op))] = {
          {"vs_node", Ratio(report.RatioClusterToNode(op, Transport::kTcp))}};
      cluster_ratios_shm[std::string(OpName(op))] = {
          {"vs_node", Ratio(report.RatioClusterToNode(op, Transport::kShm))}};
    }
    cluster = {{"nodes", o.nodes},
               {"endpoint", report.cluster_endpoint},
               {"ratios", std::move(cluster_ratios)},
               {"ratios_shm", shm ? std::move(cluster_ratios_shm) : Json(nullptr)}};
  }
  const Json out = {
      {"options", std::move(options)},
      {"node", report.node},
      {"phases", std::move(phases)},
      {"limit", limit != nullptr
                    ? Json{{"variant", limit->variant}, {"gb_per_s", limit->gb_per_second()}}
                    : Json(nullptr)},
      {"memcpy_limit", memcpy_limit != nullptr ? Json{{"variant", memcpy_limit->variant},
                                                      {"gb_per_s", memcpy_limit->gb_per_second()}}
                                               : Json(nullptr)},
      {"ratios", std::move(ratios)},
      {"ratios_shm", shm ? std::move(ratios_shm) : Json(nullptr)},
      {"ratios_ucx", std::find(report.transports.begin(), report.transports.end(),
                               Transport::kUcx) != report.transports.end()
                         ? std::move(ratios_ucx)
                         : Json(nullptr)},
      {"cluster", std::move(cluster)},
      {"transport_note", report.transport_note},
      {"socket_skipped", report.socket_skipped},
      {"redis_skipped", report.redis_skipped},
      {"peers_skipped", std::move(peers_skipped)},
      {"passed", report.AllPassed()},
  };
  return Dump(out);
}

namespace {

std::string P50(const PhaseResult& p) {
  return p.latency.count() > 0 ? Millis(p.latency.Percentile(0.5)) : std::string("-");
}

// The row's limit, named; with the informative other measurement when it is not the limit.
std::string LimitMode(const MatrixRow& row) {
  if (row.limit.system.empty()) return "-";
  if (row.limit.system == "ucx_perftest") {
    return fmt::format("ucx_perftest put/get ({})",
                       row.limit.error.empty() ? row.limit.variant : row.limit.error);
  }
  if (row.limit.system != "memcpy") {
    if (row.socket_blocking.system.empty() || row.limit.variant == row.socket_blocking.variant) {
      return row.limit.variant;
    }
    return fmt::format("{} (blocking {:.2f})", row.limit.variant,
                       row.socket_blocking.gb_per_second());
  }
  if (row.memcpy_buffers.system.empty() || row.limit.variant == "buffers") {
    return "memcpy into " + row.limit.variant;
  }
  return fmt::format("memcpy into pool (buffers {:.2f})", row.memcpy_buffers.gb_per_second());
}

std::string GbText(const PhaseResult& p) {
  if (!p.error.empty()) return "ERROR";
  if (p.failed_keys > 0) return "FAILED";
  return fmt::format("{:.2f}", p.gb_per_second());
}

}  // namespace

std::string FormatMatrixText(const MatrixReport& report) {
  const MatrixOptions& o = report.options;
  std::string out = fmt::format(
      "kvport bench --matrix: put and get over {}; one calling thread per connection; per "
      "phase {} calls (at most {:g} s)\n",
      TransportList(report.transports),
      o.count ? fmt::format("{}", *o.count) : fmt::format("about {} of", FormatSize(o.phase_bytes)),
      o.max_seconds);
  out += fmt::format("node: {}\n", report.node);
  if (!report.transport_note.empty()) out += report.transport_note + "\n";
  out +=
      "limits: tcp = the fastest loopback socket mode with the row's connections as streams "
      "and writes of one call's bytes (1-8 MiB); shm = one memcpy of value x batch per thread "
      "through a 256 MiB pool (into the read buffers when larger); 'buffers' = the same copy "
      "into the same buffers every call, cache-warm, for information; ucx = ucx_perftest's "
      "ucp_put_bw (the limit column, put/limit) and ucp_get (get/limit) of value-size messages "
      "over the same UCX_TLS\n"
      "round trip (rt): one call of the row's shape at a time per connection on a bare socket, "
      "the faster of blocking and busy-poll: tcp = the put's request (values) and answer, the "
      "get's; shm = a small control round trip on a Unix socket plus the row's memcpy\n\n";
  out += fmt::format(
      "  {:>8} {:>5} {:>5} {:<4} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>9} "
      "{:>9}  {}\n",
      "value", "batch", "conns", "via", "put GB/s", "get GB/s", "limit", "put/limit", "get/limit",
      "rt put", "rt get", "put/rt", "get/rt", "put p50ms", "get p50ms", "limit mode");
  auto gb = [](const PhaseResult& p) {
    return p.system.empty() || !p.error.empty() ? std::string("-")
                                                : fmt::format("{:.2f}", p.gb_per_second());
  };
  for (const MatrixRow& row : report.rows) {
    out += fmt::format(
        "  {:>8} {:>5} {:>5} {:<4} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>9} "
        "{:>9}  {}\n",
        FormatSize(row.value_bytes), row.batch, row.connections, TransportName(row.transport),
        GbText(row.put), GbText(row.get), gb(row.limit), RatioText(row.RatioToLimit(Op::kPut)),
        RatioText(row.RatioToLimit(Op::kGet)), gb(row.round_trip_put), gb(row.round_trip_get),
        RatioText(row.RatioToRoundTrip(Op::kPut)), RatioText(row.RatioToRoundTrip(Op::kGet)),
        P50(row.put), P50(row.get), LimitMode(row));
  }
  for (const MatrixRow& row : report.rows) {
    for (const PhaseResult* p : {&row.put, &row.get}) {
      if (!p->error.empty() || p->failed_keys > 0) {
        out += fmt::format(
            "  {} x{} x{} {} {}: {}\n", FormatSize(row.value_bytes), row.batch, row.connections,
            TransportName(row.transport), OpName(p->op),
            !p->error.empty() ? p->error : fmt::format("{} failed keys", p->failed_keys));
      }
    }
  }
  out += "\n(GB/s is value bytes, 10^9 per GB; p50 is per batched call)\n";
  if (!report.socket_skipped.empty()) {
    out += "socket limits skipped: " + report.socket_skipped + "\n";
  }
  for (const auto& [system, why] : report.peers_skipped)
    out += fmt::format("{} skipped: {}\n", system, why);
  for (const std::string& system : o.python_peers) {
    bool any = false;
    for (const MatrixRow& row : report.rows) {
      for (const MatrixRow::Peer& peer : row.peers) {
        if (peer.system != system) continue;
        if (!any) {
          out += fmt::format(
              "\n{} at the same shapes ({}):\n  {:>8} {:>5} {:>5} {:>8} {:>8} {:>14} {:>14} {:>9} "
              "{:>9}\n",
              system, PeerPattern(system), "value", "batch", "conns", "put GB/s", "get GB/s",
              "put/" + system, "get/" + system, "put p50ms", "get p50ms");
          any = true;
        }
        out +=
            fmt::format("  {:>8} {:>5} {:>5} {:>8} {:>8} {:>14} {:>14} {:>9} {:>9}\n",
                        FormatSize(row.value_bytes), row.batch, row.connections, GbText(peer.put),
                        GbText(peer.get), RatioText(row.RatioToPeer(system, Op::kPut)),
                        RatioText(row.RatioToPeer(system, Op::kGet)), P50(peer.put), P50(peer.get));
        for (const PhaseResult* p : {&peer.put, &peer.get}) {
          if (!p->error.empty() || p->failed_keys > 0) {
            out += fmt::format(
                "    {} {}: {}\n", system, OpName(p->op),
                !p->error.empty() ? p->error : fmt::format("{} failed keys", p->failed_keys));
          }
        }
      }
    }
  }
  out += fmt::format("matrix: {} rows in {:.0f} s\n", report.rows.size(), report.seconds);
  if (!report.AllPassed()) out += "\nFAILED: some keys failed or did not verify (see above)\n";
  return out;
}

namespace {

Json RowPeersJson(const MatrixRow& row) {
  Json peers = Json::object();
  for (const MatrixRow::Peer& peer : row.peers) {
    peers[peer.system] = {{"put", PhaseJson(peer.put)},
                          {"get", PhaseJson(peer.get)},
                          {"put_vs_peer", Ratio(row.RatioToPeer(peer.system, Op::kPut))},
                          {"get_vs_peer", Ratio(row.RatioToPeer(peer.system, Op::kGet))}};
  }
  return peers;
}

Json PeersSkippedJson(const std::vector<std::pair<std::string, std::string>>& skipped) {
  Json out = Json::object();
  for (const auto& [system, why] : skipped)
    out[system] = why;
  return out;
}

}  // namespace

std::string FormatMatrixJson(const MatrixReport& report) {
  const MatrixOptions& o = report.options;
  Json transports = Json::array();
  for (Transport t : report.transports)
    transports.push_back(TransportName(t));
  Json rows = Json::array();
  for (const MatrixRow& row : report.rows) {
    rows.push_back(
        {{"value_bytes", row.value_bytes},
         {"batch", row.batch},
         {"connections", row.connections},
         {"transport", TransportName(row.transport)},
         {"put", PhaseJson(row.put)},
         {"get", PhaseJson(row.get)},
         {"limit", row.limit.system.empty() ? Json(nullptr) : PhaseJson(row.limit)},
         {"limit_get", row.limit_get.system.empty() ? Json(nullptr) : PhaseJson(row.limit_get)},
         {"socket_blocking",
          row.socket_blocking.system.empty() ? Json(nullptr) : PhaseJson(row.socket_blocking)},
         {"memcpy_buffers",
          row.memcpy_buffers.system.empty() ? Json(nullptr) : PhaseJson(row.memcpy_buffers)},
         {"put_vs_limit", Ratio(row.RatioToLimit(Op::kPut))},
         {"get_vs_limit", Ratio(row.RatioToLimit(Op::kGet))},
         {"round_trip_put",
          row.round_trip_put.system.empty() ? Json(nullptr) : PhaseJson(row.round_trip_put)},
         {"round_trip_get",
          row.round_trip_get.system.empty() ? Json(nullptr) : PhaseJson(row.round_trip_get)},
         {"put_vs_round_trip", Ratio(row.RatioToRoundTrip(Op::kPut))},
         {"get_vs_round_trip", Ratio(row.RatioToRoundTrip(Op::kGet))},
         {"peers", RowPeersJson(row)}});
  }
  Json socket = Json::array();
  for (const PhaseResult& p : report.socket)
    socket.push_back(PhaseJson(p));
  Json round_trips = Json::array();
  for (const PhaseResult& p : report.round_trips)
    round_trips.push_back(PhaseJson(p));
  const Json out = {
      {"options",
       {{"value_sizes", o.value_sizes},
        {"batches", o.batches},
        {"connections", o.connections},
        {"count", o.count ? Json(*o.count) : Json(nullptr)},
        {"phase_bytes", o.phase_bytes},
        {"max_seconds", o.max_seconds}}},
      {"node", report.node},
      {"transports", std::move(transports)},
      {"transport_note", report.transport_note},
      {"rows", std::move(rows)},
      {"socket", std::move(socket)},
      {"round_trips", std::move(round_trips)},
      {"socket_skipped", report.socket_skipped},
      {"peers_skipped", PeersSkippedJson(report.peers_skipped)},
      {"seconds", report.seconds},
      {"passed", report.AllPassed()},
  };
  return Dump(out);
}

// --- --disk --------------------------------------------------------------------------------------

namespace {

std::optional<double> PhaseGbps(const PhaseResult& p) {
  if (p.system.empty() || !p.error.empty() || p.failed_keys > 0) return std::nullopt;
  return p.gb_per_second();
}

std::string RestoreText(const DiskBenchReport& r) {
  return r.restore_ms ? fmt::format("{} ms", *r.restore_ms)
                      : std::string("not reported (the node's STATS have no disk_restore_ms)");
}

}  // namespace

std::string FormatDiskBenchText(const DiskBenchReport& r) {
  const BenchOptions& o = r.options;
  std::string out = fmt::format(
      "kvport bench --disk: {} of {} values through a node with {} of memory and a disk tier in "
      "{}; batches of {}, {} connection(s), {} thread(s), over TCP\n",
      FormatSize(r.keys_written * o.value_bytes), FormatSize(o.value_bytes),
      FormatSize(o.disk_memory_bytes), r.run_dir, o.batch, o.connections, o.worker_threads());
  out += fmt::format("node: {}\n", r.node);
  out += fmt::format(
      "keys: {} written ({} untimed first, filling memory, so every timed put evicts one); {} on "
      "disk after the restart, each read once in a shuffled order\n\n",
      r.keys_written, r.keys_filled, r.keys_on_disk);
  out += fmt::format("  {:<7} {:<7} {:<13} {:>7} {:>9} {:>7} {:>8} {:>8} {:>8}\n", "system", "op",
                     "mode", "GB/s", "keys/s", "calls", "p50 ms", "p99 ms", "p999 ms");
  for (const PhaseResult* p : {&r.put, &r.get, &r.fio_write, &r.fio_read}) {
    if (!p->system.empty()) out += Row(*p);
  }
  out += "\n(kvport latency is per batched call; GB/s is value bytes, 10^9 per GB)\n";
  out += fmt::format(
      "put: until the disk queue was empty again ({:.2f} s; the last put was answered after "
      "{:.2f} s), paced so that the node's 64 MiB disk queue never overflows: {} objects written "
      "to disk, {} dropped from a full queue\n",
      r.put.seconds, r.put_ack_seconds, r.put_disk_writes, r.put_queue_drops);
  out += fmt::format(
      "get: every value from disk (the tier's {} segment file(s) dropped from the page cache "
      "first{}); each get moves its object into memory and so evicts another, which the disk "
      "already holds: {} disk hits, {} disk writes, {} dropped from a full queue during the "
      "gets\n",
      r.page_cache_files, r.page_cache_note.empty() ? "" : "; " + r.page_cache_note,
      r.get_disk_hits, r.get_disk_writes, r.get_queue_drops);
  if (!r.fio_skipped.empty()) out += "fio skipped: " + r.fio_skipped + "\n";
  if (!r.fio_note.empty()) out += "fio: " + r.fio_note + "\n";
  if (!r.fio_read.system.empty()) {
    out += fmt::format(
        "fio: O_DIRECT on a file in the same folder, after the node stopped: a sequential write "
        "of the data set (its layout), then random reads of it, iodepth {}\n",
        o.fio_depth());
  }
  out += "\nagainst fio (same filesystem, same run):\n";
  out += fmt::format("  get  kvport/fio randread {:>7}  (GB/s; target >= 0.8x)\n",
                     RatioText(r.GetVsFio()));
  out += fmt::format("  put  kvport/fio write    {:>7}  (GB/s)\n", RatioText(r.PutVsFioWrite()));
  const std::optional<double> per_gib = r.RestartMsPerGib();
  out += fmt::format(
      "restart: Server::Start over {} of disk tier ({} objects restored) took {:.1f} ms: {} per "
      "GiB; the node's own restore_ms: {}\n",
      FormatSize(r.restored_disk_bytes), r.restored_objects, r.restart_ms,
      per_gib ? fmt::format("{:.1f} ms", *per_gib) : std::string("-"), RestoreText(r));
  if (!r.AllPassed()) {
    out += "\nFAILED: some keys failed or did not verify, or puts were dropped (see above)\n";
  }
  return out;
}

std::string FormatDiskBenchJson(const DiskBenchReport& r) {
  const BenchOptions& o = r.options;
  Json phases = Json::array();
  for (const PhaseResult* p : {&r.put, &r.get, &r.fio_write, &r.fio_read}) {
    if (!p->system.empty()) phases.push_back(PhaseJson(*p));
  }
  const Json out = {
      {"mode", "disk"},
      {"options",
       {{"value_bytes", o.value_bytes},
        {"batch", o.batch},
        {"connections", o.connections},
        {"threads", o.worker_threads()},
        {"busy_poll_us", o.busy_poll_us},
        {"max_seconds", o.max_seconds},
        {"disk_dir", o.disk_dir},
        {"data_bytes", o.disk_data_bytes},
        {"memory_bytes", o.disk_memory_bytes},
        {"disk_capacity", r.disk_capacity},
        {"fio", o.fio},
        {"fio_iodepth", o.fio_depth()}}},
      {"node", r.node},
      {"run_dir", r.run_dir},
      {"keys",
       {{"written", r.keys_written}, {"filled", r.keys_filled}, {"on_disk", r.keys_on_disk}}},
      {"phases", std::move(phases)},
      {"disk_get_gbps", Ratio(PhaseGbps(r.get))},
      {"fio_read_gbps", Ratio(PhaseGbps(r.fio_read))},
      {"vs_fio", Ratio(r.GetVsFio())},
      {"disk_put_gbps", Ratio(PhaseGbps(r.put))},
      {"fio_write_gbps", Ratio(PhaseGbps(r.fio_write))},
      {"put_vs_fio_write", Ratio(r.PutVsFioWrite())},
      {"restart_ms", r.restart_ms},
      {"restore_ms", r.restore_ms ? Json(*r.restore_ms) : Json(nullptr)},
      {"restart_ms_per_gib", Ratio(r.RestartMsPerGib())},
      {"restored_objects", r.restored_objects},
      {"restored_disk_bytes", r.restored_disk_bytes},
      {"put",
       {{"ack_seconds", r.put_ack_seconds},
        {"disk_writes", r.put_disk_writes},
        {"queue_drops", r.put_queue_drops}}},
      {"get",
       {{"disk_hits", r.get_disk_hits},
        {"disk_writes", r.get_disk_writes},
        {"queue_drops", r.get_queue_drops}}},
      {"page_cache", {{"files_dropped", r.page_cache_files}, {"note", r.page_cache_note}}},
      {"fio_skipped", r.fio_skipped},
      {"fio_note", r.fio_note},
      {"restore_ms_skipped",
       r.restore_ms ? std::string() : std::string("the node's STATS have no disk_restore_ms")},
      {"passed", r.AllPassed()},
  };
  return Dump(out);
}

}  // namespace kvport::bench
