// SPDX-License-Identifier: Apache-2.0
// `kvport bench --resp`: redis-benchmark's own numbers against an embedded node's Redis-protocol
// port (docs/resp.md) and against redis-server, in the same run (docs/performance.md, "The
// Redis protocol").
//
// For each value size (4 KiB, 1 MiB) and pipeline depth (-P 1, -P 16), redis-benchmark runs
// `-t set,get -c CLIENTS -n N --csv` against the node, then against a redis-server started for
// the run (persistence off, loopback; bench/redis_server.h), and the report puts the two
// requests-per-second side by side with their ratio; beside them, kvport's binary protocol at
// the same shape (kvport::Client threads, an MSET or MGET of -P keys a call). redis-benchmark
// writes and reads one key per test (no -r), so neither server evicts and the sizes stay bounded. A
// missing redis-server leaves the baseline out, saying why; a missing redis-benchmark, or one that
// reports an error against the node, fails the run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/status.h"

namespace kvport::bench {

struct RespBenchOptions {
  std::vector<uint64_t> value_sizes = {4096, uint64_t{1} << 20};
  std::vector<unsigned> pipelines = {1, 16};
  unsigned clients = 4;
  // Requests per test: for values below 64 KiB, and for larger ones.
  uint64_t small_requests = 20000;
  uint64_t large_requests = 400;
  uint64_t node_capacity = uint64_t{1} << 30;
  unsigned node_threads = 2;
  std::string redis_benchmark = "redis-benchmark";
  std::string redis_server = "redis-server";
};

struct RespBenchRow {
  std::string op;  // "SET", "GET"
  uint64_t value_bytes = 0;
  unsigned pipeline = 1;
  double kvport_rps = 0;
  double redis_rps = 0;   // 0: no baseline
  double binary_rps = 0;  // kvport's binary protocol, keys per second
};

struct RespBenchReport {
  RespBenchOptions options;
  std::vector<RespBenchRow> rows;
  std::string baseline_note;  // why redis-server's numbers are missing, when they are
};

Result<RespBenchReport> RunRespBench(const RespBenchOptions& options,
                                     const std::function<void(std::string_view)>& log);
std::string FormatRespBenchText(const RespBenchReport& report);

// The requests per second of test `name` ("SET") in redis-benchmark's --csv output; 0 when the
// output has no such line.
double RedisBenchmarkCsvRps(std::string_view csv, std::string_view name);

}  // namespace kvport::bench
