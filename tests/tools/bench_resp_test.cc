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
  o.node_capacity = 64 << 20;
  Result<RespBenchReport> report = RunRespBench(o, [](std::string_view) {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->rows.size(), 2u);
  for (const RespBenchRow& row : report->rows) {
    EXPECT_GT(row.kvport_rps, 0) << row.op;
    EXPECT_GT(row.binary_rps, 0) << row.op;  // the binary protocol beside it
    if (report->baseline_note.empty()) {
      EXPECT_GT(row.redis_rps, 0) << row.op;
    }
  }
  const std::string text = FormatRespBenchText(*report);
  EXPECT_NE(text.find("kvport req/s"), std::string::npos) << text;
  EXPECT_NE(text.find("binary keys/s"), std::string::npos) << text;
}

}  // namespace
}  // namespace kvport::bench
