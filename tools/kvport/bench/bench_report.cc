#include "bench/bench_report.h"

#include <fmt/core.h>

#include <cmath>

#include "common/json_quote.h"
#include "kvport/size.h"

namespace kvport::bench {
namespace {

std::string Micros(uint64_t nanos) {
  return fmt::format("{:.1f}", nanos / 1e3);
}

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

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt::format("{:.6g}", v);
}

std::string JsonRatio(const std::optional<double>& r) {
  return r ? JsonNumber(*r) : std::string("null");
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
  const BenchOptions& o = report.options;
  std::string ops;
  for (Op op : o.ops)
    ops += (ops.empty() ? "" : ",") + JsonQuote(OpName(op));
  std::string out = "{\"options\": {";
  out += fmt::format(
      "\"url\": {}, \"value_bytes\": {}, \"batch\": {}, \"connections\": {}, \"threads\": {}, "
      "\"ops\": [{}], \"count\": {}, \"max_seconds\": {}, \"exists_batch\": {}, "
      "\"exists_count\": {}, \"warmup_bytes\": {}",
      JsonQuote(o.url), o.value_bytes, o.batch, o.connections, o.worker_threads(), ops, o.count,
      JsonNumber(o.max_seconds), o.exists_batch, o.exists_count,
      o.warmup_calls() * o.batch * o.value_bytes);
  if (o.shape) {
    out += fmt::format(
        ", \"shape\": {{\"layers\": {}, \"kv_heads\": {}, \"head_dim\": {}, \"dtype\": {}, "
        "\"tokens_per_chunk\": {}}}",
        o.shape->layers, o.shape->kv_heads, o.shape->head_dim, JsonQuote(o.shape->dtype),
        o.shape->tokens_per_chunk);
  }
  out += "}, \"node\": " + JsonQuote(report.node) + ", \"phases\": [";
  bool first = true;
  for (const auto* list : {&report.kvport, &report.socket, &report.redis}) {
    for (const PhaseResult& p : *list) {
      if (!first) out += ", ";
      first = false;
      out += fmt::format(
          "{{\"system\": {}, \"variant\": {}, \"op\": {}, \"calls\": {}, \"keys\": {}, "
          "\"bytes\": {}, \"failed_keys\": {}, \"seconds\": {}, \"gb_per_s\": {}, "
          "\"keys_per_s\": {}, \"error\": {}",
          JsonQuote(p.system), JsonQuote(p.variant),
          JsonQuote(p.system == "socket" ? "stream" : OpName(p.op)), p.calls, p.keys, p.bytes,
          p.failed_keys, JsonNumber(p.seconds), JsonNumber(p.gb_per_second()),
          JsonNumber(p.keys_per_second()), JsonQuote(p.error));
      if (p.latency.count() > 0) {
        out += fmt::format(
            ", \"latency_us\": {{\"p50\": {}, \"p99\": {}, \"p999\": {}, \"max\": {}, "
            "\"mean\": {}}}}}",
            Micros(p.latency.Percentile(0.5)), Micros(p.latency.Percentile(0.99)),
            Micros(p.latency.Percentile(0.999)), Micros(p.latency.max()),
            JsonNumber(p.latency.mean() / 1e3));
      } else {
        out += ", \"latency_us\": null}";
      }
    }
  }
  out += "], \"limit\": ";
  const PhaseResult* limit = report.Limit();
  out += limit != nullptr
             ? fmt::format("{{\"variant\": {}, \"gb_per_s\": {}}}", JsonQuote(limit->variant),
                           JsonNumber(limit->gb_per_second()))
             : std::string("null");
  out += ", \"ratios\": {";
  first = true;
  for (Op op : o.ops) {
    if (!first) out += ", ";
    first = false;
    out += fmt::format("{}: {{\"vs_limit\": {}, \"vs_redis\": {}}}", JsonQuote(OpName(op)),
                       JsonRatio(report.RatioToLimit(op)), JsonRatio(report.RatioToRedis(op)));
  }
  out += fmt::format("}}, \"socket_skipped\": {}, \"redis_skipped\": {}, \"passed\": {}}}\n",
                     JsonQuote(report.socket_skipped), JsonQuote(report.redis_skipped),
                     report.AllPassed() ? "true" : "false");
  return out;
}

}  // namespace kvport::bench
