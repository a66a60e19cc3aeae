// SPDX-License-Identifier: Apache-2.0
// `kvport bench --resp`: redis-benchmark's own numbers against an embedded node's Redis-protocol
// port (docs/resp.md) and against redis-server, in the same run (docs/performance.md, "The
// Redis protocol").
//
// For each value size (4 KiB, 1 MiB) and pipeline depth (-P 1, -P 16), redis-benchmark runs
// `-t set -c CLIENTS -n N --csv`, then `-t get ...`, against the node and against a redis-server
// started for the run (persistence off, loopback; bench/redis_server.h), `rounds` times, the two
// servers in turn (each round the other goes first); beside them, kvport's binary protocol at the
// same shape (kvport::Client threads, an MSET or MGET of -P keys a call). The report gives each
// side's median of the rounds and the ratio of the medians, with the lowest and highest ratio
// of one round (on a small machine a single run moved 2x), and how busy redis-benchmark was
// against each server (the rusage of the child: near 100% for both, the row measured the load
// generator).
//
// With 2 or more CPUs the servers (the node's I/O threads, redis-server) run on the lower part
// and the load (redis-benchmark, the binary client threads) on the upper half
// (bench/cpu_split.h), so neither server shares its cores with the load it is measured under;
// the node gets one I/O thread per server CPU unless told otherwise. redis-benchmark writes and
// reads one key per test (no -r), so neither server evicts and the sizes stay bounded. A
// missing redis-server leaves the baseline out, saying why; a missing redis-benchmark, or one
// that reports an error against the node, fails the run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/cpu_split.h"
#include "kvport/status.h"

namespace kvport::bench {

struct RespBenchOptions {
  std::vector<uint64_t> value_sizes = {4096, uint64_t{1} << 20};
  std::vector<unsigned> pipelines = {1, 16};
  unsigned clients = 4;
  // Requests per test: for values below 64 KiB, and for larger ones.
  uint64_t small_requests = 20000;
  uint64_t large_requests = 400;
  unsigned rounds = 3;
  uint64_t node_capacity = uint64_t{1} << 30;
  unsigned node_threads = 0;  // 0: one per server CPU
  std::string redis_benchmark = "redis-benchmark";
  std::string redis_server = "redis-server";
};

// One redis-benchmark test against one server.
struct RespRun {
  double rps = 0;
  // redis-benchmark's CPU time (user + system) over its run time: near 1, the load generator,
  // not the server, set the rate.
  double load_busy = 0;
};

struct RespBenchRow {
  std::string op;  // "SET", "GET"
  uint64_t value_bytes = 0;
  unsigned pipeline = 1;
  // A run a round; redis_runs is empty without a baseline.
  std::vector<RespRun> kvport_runs;
  std::vector<RespRun> redis_runs;
  std::vector<double> binary_rounds;  // the binary protocol's keys per second, a round each

  double kvport_rps() const;  // the medians; 0 when there is no round
  double redis_rps() const;
  double binary_rps() const;
  double kvport_load_busy() const;
  double redis_load_busy() const;
  // kvport_rps() / redis_rps(), and the lowest and highest ratio of the same round; 0 without
  // a baseline.
  double ratio() const;
  double lowest_round_ratio() const;
  double highest_round_ratio() const;
};

struct RespBenchReport {
  RespBenchOptions options;
  std::vector<RespBenchRow> rows;
  std::string baseline_note;  // why redis-server's numbers are missing, when they are
  CpuSplit cpus;              // where the servers and the load ran
  std::string cpu_note;       // why they were not split, when they were not
  unsigned node_threads = 0;  // the node's I/O threads
};

Result<RespBenchReport> RunRespBench(const RespBenchOptions& options,
                                     const std::function<void(std::string_view)>& log);
std::string FormatRespBenchText(const RespBenchReport& report);

// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double Median(std::vector<double> values);

// The requests per second of test `name` ("SET") in redis-benchmark's --csv output; 0 when the
// output has no such line.
double RedisBenchmarkCsvRps(std::string_view csv, std::string_view name);

}  // namespace kvport::bench
