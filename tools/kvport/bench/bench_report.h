// `kvport bench` output: a table for people and JSON for machines, from one BenchReport.
#pragma once

#include <string>

#include "bench/bench_run.h"

namespace kvport::bench {

// The table, the ratios and the reasons a baseline was skipped; ends with a newline.
std::string FormatBenchText(const BenchReport& report);

// One JSON object (see the keys below; numbers are plain JSON numbers, absent ratios null):
//   {"options": {...}, "node": "...", "phases": [{"system", "variant", "op", "calls", "keys",
//    "bytes", "failed_keys", "seconds", "gb_per_s", "keys_per_s", "error",
//    "latency_us": {"p50", "p99", "p999", "max", "mean"}}, ...],
//    "limit": {"variant", "gb_per_s"} | null,
//    "ratios": {"put": {"vs_limit", "vs_redis"}, "get": {...}, "exists": {...}},
//    "socket_skipped": "...", "redis_skipped": "...", "passed": true}
std::string FormatBenchJson(const BenchReport& report);

}  // namespace kvport::bench
