// SPDX-License-Identifier: Apache-2.0
#include "demo/demo_report.h"

#include <fmt/core.h>

#include "kvport/size.h"

namespace kvport::demo {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string Count(uint64_t n) {
  if (n >= 10'000'000) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 10'000) return fmt::format("{:.1f}k", n / 1e3);
  return std::to_string(n);
}

std::string Ms(uint64_t nanos) {
  return fmt::format("{:.2f} ms", nanos / 1e6);
}

uint64_t Counter(const DemoReport& r, std::string_view name) {
  for (const auto& [k, v] : r.node_counters) {
    if (k == name) return v;
  }
  return 0;
}

}  // namespace

std::string FormatProgress(const DemoProgress& p) {
  const double rate = p.tokens == 0 ? 0 : 100.0 * p.hit_tokens / p.tokens;
  return fmt::format(
      "  {}/{} requests  prefix hit {:.1f}% of {} tokens  {:.2f} GiB moved  {:.1f} s", p.done,
      p.total, rate, Count(p.tokens), p.bytes_moved / kGiB, p.seconds);
}

std::string FormatDemoReport(const DemoReport& r, const DemoOptions& o) {
  std::string out;
  out += fmt::format("kvport demo: {} requests from conversations sharing {} system prompts\n",
                     r.requests, o.workload.system_prompts);
  out += fmt::format("  model      {} KV shape: {}; KV_2LTD chunks of {}\n", o.model_name,
                     r.shape.ToString(), FormatSize(r.chunk_bytes));
  out += fmt::format("  node       {}, through eic:// and a CacheEngine\n", r.node);
  out += fmt::format("  transport  {}{}\n", r.transport.empty() ? "unknown" : r.transport,
                     r.transport_reason.empty() ? std::string() : " (" + r.transport_reason + ")");
  out += fmt::format("  tokens     {} prompt tokens, {} found cached ({:.1f}% prefix hit rate)\n",
                     r.tokens, r.hit_tokens, 100.0 * r.hit_rate());
  out +=
      fmt::format("  prefill    {} tokens avoided, {} computed\n", r.hit_tokens, r.computed_tokens);
  out += fmt::format(
      "  written    {:.2f} GiB ({} chunks){}\n", r.bytes_written / kGiB, r.chunks_written,
      r.store_failures ? fmt::format(", {} chunks refused", r.store_failures) : std::string());
  out += fmt::format("  read       {:.2f} GiB ({} chunks, {} verified byte for byte)\n",
                     r.bytes_read / kGiB, r.chunks_read, r.chunks_verified);
  const double moved = (r.bytes_read + r.bytes_written) / kGiB;
  out += fmt::format(
      "  throughput {:.2f} GiB/s over the run ({:.1f} s), {:.2f} GiB/s inside cache calls; "
      "{:.1f} requests/s\n",
      r.seconds > 0 ? moved / r.seconds : 0, r.seconds,
      r.cache_seconds > 0 ? moved / r.cache_seconds : 0,
      r.seconds > 0 ? r.requests / r.seconds : 0);
  out += fmt::format(
      "  latency    per chunk: retrieve p50 {} p99 {}, store p50 {} p99 {}; lookup p50 {} p99 {}\n",
      Ms(r.retrieve_chunk_latency.Percentile(0.5)), Ms(r.retrieve_chunk_latency.Percentile(0.99)),
      Ms(r.store_chunk_latency.Percentile(0.5)), Ms(r.store_chunk_latency.Percentile(0.99)),
      Ms(r.lookup_latency.Percentile(0.5)), Ms(r.lookup_latency.Percentile(0.99)));
  if (!r.node_counters.empty()) {
    out += fmt::format("  node       {} objects, {} used, {} evictions\n", Counter(r, "objects"),
                       FormatSize(Counter(r, "used_bytes")), Counter(r, "evictions"));
  }
  if (r.lookup_retrieve_mismatches > 0) {
    out += fmt::format(
        "  note       {} requests retrieved fewer chunks than their lookup found "
        "(evicted in between)\n",
        r.lookup_retrieve_mismatches);
  }
  if (r.verify_failures() > 0) {
    out += fmt::format("FAILED: {} chunks did not verify; first: {}\n", r.verify_failures(),
                       r.first_failure);
  } else {
    out += "  verified   every chunk read back holds the bytes stored for it\n";
  }
  return out;
}

}  // namespace kvport::demo
