#include "bench/bench_report.h"

#include <fmt/core.h>

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

std::string Row(const PhaseResult& p) {
  const bool has_latency = p.latency.count() > 0;
  std::string row =
      fmt::format("  {:<7} {:<7} {:<13} {:>7.2f} {:>9} {:>7}", p.system,
                  p.system == "socket" ? "stream" : OpName(p.op), p.variant, p.gb_per_second(),
                  p.system == "socket" ? "-" : Rate(p.keys_per_second()), p.calls);
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

std::string RatioText(const std::optional<double>& r) {
  return r ? fmt::format("{:.2f}x", *r) : std::string("-");
}

}  // namespace

std::string FormatBenchText(const BenchReport& report) {
  const BenchOptions& o = report.options;
  std::string ops;
  for (Op op : o.ops)
    ops += (ops.empty() ? "" : ",") + std::string(OpName(op));
  std::string out = fmt::format(
      "kvport bench: {} of {} values{}, batches of {}, {} connection(s), {} thread(s); "
      "mexist of {} keys per call\n",
      ops, FormatSize(o.value_bytes), o.shape ? " (" + o.shape->ToString() + ")" : "", o.batch,
      o.connections, o.worker_threads(), o.exists_batch);
  out += fmt::format("node: {}\n", report.node);
  out += o.warmup_calls() > 0
             ? fmt::format("warm-up: {} of untimed puts first, on kvport and redis alike\n\n",
                           FormatSize(o.warmup_calls() * o.batch * o.value_bytes))
             : std::string("warm-up: none\n\n");
  out += fmt::format("  {:<7} {:<7} {:<13} {:>7} {:>9} {:>7} {:>8} {:>8} {:>8}\n", "system", "op",
                     "mode", "GB/s", "keys/s", "calls", "p50 ms", "p99 ms", "p999 ms");
  for (const auto* list : {&report.kvport, &report.socket, &report.redis}) {
    for (const PhaseResult& p : *list)
      out += Row(p);
  }
  out += "\n(latency is per batched call, one round trip; GB/s is value bytes, 10^9 per GB)\n";
  if (!report.socket_skipped.empty()) {
    out += "socket baseline skipped: " + report.socket_skipped + "\n";
  }
  if (!report.redis_skipped.empty())
    out += "redis baseline skipped: " + report.redis_skipped + "\n";

  const PhaseResult* limit = report.Limit();
  out += limit != nullptr
             ? fmt::format("\nratios (limit = fastest socket mode, {} at {:.2f} GB/s):\n",
                           limit->variant, limit->gb_per_second())
             : std::string("\nratios:\n");
  for (Op op : o.ops) {
    if (report.Find("kvport", op) == nullptr) continue;
    out += fmt::format("  {:<7} kvport/limit {:>7}   kvport/redis {:>7}{}\n", OpName(op),
                       op == Op::kExists ? std::string("n/a") : RatioText(report.RatioToLimit(op)),
                       RatioText(report.RatioToRedis(op)),
                       op == Op::kExists ? "  (keys/s)" : "  (GB/s)");
  }
  if (!report.AllPassed()) out += "\nFAILED: some keys failed or did not verify (see above)\n";
  return out;
}

std::string FormatBenchJson(const BenchReport& report) {
  using Json = nlohmann::ordered_json;
  const BenchOptions& o = report.options;
  Json ops = Json::array();
  for (Op op : o.ops)
    ops.push_back(OpName(op));
  Json options = {{"url", o.url},
                  {"value_bytes", o.value_bytes},
                  {"batch", o.batch},
                  {"connections", o.connections},
                  {"threads", o.worker_threads()},
                  {"ops", std::move(ops)},
                  {"count", o.count},
                  {"max_seconds", o.max_seconds},
                  {"exists_batch", o.exists_batch},
                  {"exists_count", o.exists_count},
                  {"warmup_bytes", o.warmup_calls() * o.batch * o.value_bytes}};
  if (o.shape) {
    options["shape"] = {{"layers", o.shape->layers},
                        {"kv_heads", o.shape->kv_heads},
                        {"head_dim", o.shape->head_dim},
                        {"dtype", o.shape->dtype},
                        {"tokens_per_chunk", o.shape->tokens_per_chunk}};
  }
  Json phases = Json::array();
  for (const auto* list : {&report.kvport, &report.socket, &report.redis}) {
    for (const PhaseResult& p : *list) {
      Json phase = {{"system", p.system},
                    {"variant", p.variant},
                    {"op", p.system == "socket" ? std::string_view("stream") : OpName(p.op)},
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
      phases.push_back(std::move(phase));
    }
  }
  const PhaseResult* limit = report.Limit();
  Json ratios = Json::object();
  for (Op op : o.ops) {
    ratios[std::string(OpName(op))] = {{"vs_limit", Ratio(report.RatioToLimit(op))},
                                       {"vs_redis", Ratio(report.RatioToRedis(op))}};
  }
  const Json out = {
      {"options", std::move(options)},
      {"node", report.node},
      {"phases", std::move(phases)},
      {"limit", limit != nullptr
                    ? Json{{"variant", limit->variant}, {"gb_per_s", limit->gb_per_second()}}
                    : Json(nullptr)},
      {"ratios", std::move(ratios)},
      {"socket_skipped", report.socket_skipped},
      {"redis_skipped", report.redis_skipped},
      {"passed", report.AllPassed()},
  };
  // Non-finite numbers are written as null; invalid UTF-8 in a string (an error message from a
  // node or redis) becomes U+FFFD: the output is always valid JSON.
  return out.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace) + "\n";
}

}  // namespace kvport::bench
