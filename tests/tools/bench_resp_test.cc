// SPDX-License-Identifier: Apache-2.0
// `kvport bench --resp` (bench/resp_bench.h): reading redis-benchmark's CSV, and a small run
// against an embedded node and redis-server (skipped without redis-benchmark).
#include <gtest/gtest.h>

#include <string>

#include "bench/redis_server.h"
#include "bench/resp_bench.h"

namespace kvport::bench {
namespace {

TEST(RespBenchTest, ReadsRedisBenchmarkCsv) {
  const std::string csv =
      "\"test\",\"rps\",\"avg_latency_ms\"\n"
      "\"SET\",\"200000.00\",\"0.067\"\n"
      "\"GET\",\"317460.31\",\"0.056\"\n"
      "\"MSET (10 keys)\",\"30581.04\",\"0.532\"\n";
  EXPECT_DOUBLE_EQ(RedisBenchmarkCsvRps(csv, "SET"), 200000.0);
  EXPECT_DOUBLE_EQ(RedisBenchmarkCsvRps(csv, "GET"), 317460.31);
  EXPECT_DOUBLE_EQ(RedisBenchmarkCsvRps(csv, "MSET (10 keys)"), 30581.04);
  EXPECT_EQ(RedisBenchmarkCsvRps(csv, "LPUSH"), 0);
  EXPECT_EQ(RedisBenchmarkCsvRps("", "SET"), 0);
}

TEST(RespBenchTest, SmallRunMeasuresTheNodeAndTheBaseline) {
  if (!RedisServer::FindExecutable("redis-benchmark").ok()) {
    GTEST_SKIP() << "redis-benchmark is not installed (Debian redis-tools)";
  }
  RespBenchOptions o;
  o.value_sizes = {4096};
  o.pipelines = {16};
  o.clients = 2;
  o.small_requests = 2000;
  o.rounds = 2;
  o.node_capacity = 64 << 20;
  Result<RespBenchReport> report = RunRespBench(o, [](std::string_view) {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->rows.size(), 2u);
  for (const RespBenchRow& row : report->rows) {
    ASSERT_EQ(row.kvport_runs.size(), 2u) << row.op;
    ASSERT_EQ(row.binary_rounds.size(), 2u) << row.op;  // the binary protocol beside it
    EXPECT_GT(row.kvport_rps(), 0) << row.op;
    // redis-benchmark used CPU: its children's rusage was read around it.
    EXPECT_GT(row.kvport_load_busy(), 0) << row.op;
    EXPECT_GT(row.binary_rps(), 0) << row.op;
    if (report->baseline_note.empty()) {
      ASSERT_EQ(row.redis_runs.size(), 2u) << row.op;
      EXPECT_GT(row.redis_load_busy(), 0) << row.op;
      EXPECT_GT(row.ratio(), 0) << row.op;
      EXPECT_LE(row.lowest_round_ratio(), row.highest_round_ratio()) << row.op;
    }
  }
  Result<std::vector<int>> allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok());
  EXPECT_EQ(report->cpus.split, allowed->size() >= 2);
  EXPECT_EQ(report->node_threads, report->cpus.servers.size());  // one per server CPU
  const std::string text = FormatRespBenchText(*report);
  EXPECT_NE(text.find("kvport req/s"), std::string::npos) << text;
  EXPECT_NE(text.find("binary keys/s"), std::string::npos) << text;
  EXPECT_NE(text.find("median of 2 rounds"), std::string::npos) << text;
  EXPECT_NE(text.find("load busy"), std::string::npos) << text;
}

TEST(RespBenchTest, MedianOfRounds) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3}), 3);
  EXPECT_EQ(Median({5, 1, 3}), 3);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  RespBenchRow row{"GET", 4096, 16, {{100, 1}, {300, 1}, {200, 1}}, {{200, 1}, {100, 1}, {250, 1}},
                   {}};
  EXPECT_EQ(row.kvport_rps(), 200);
  EXPECT_EQ(row.redis_rps(), 200);
  EXPECT_EQ(row.ratio(), 1.0);
  EXPECT_EQ(row.lowest_round_ratio(), 0.5);   // round 1: 100 / 200
  EXPECT_EQ(row.highest_round_ratio(), 3.0);  // round 2: 300 / 100
}

}  // namespace
}  // namespace kvport::bench
