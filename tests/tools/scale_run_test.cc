// SPDX-License-Identifier: Apache-2.0
// `kvport scale` in its short form: a `kvport serve` child process (and redis-server, when
// installed) filled, probed and connected to. Asserts the run happened and every answer was
// right, never a timing. Execs child processes, so labelled needs-exec.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "bench/redis_server.h"
#include "bench/scale_run.h"

namespace kvport::bench {
namespace {

ScaleOptions Short() {
  ScaleOptions o;
  o.kvport_executable = KVPORT_BINARY;
  o.object_counts = {3000, 6000};
  o.value_bytes = 1024;
  o.calls = 5;
  o.exist_keys = 64;
  o.get_keys = 8;
  o.list_keys = 100;
  o.connections = 40;
  o.node_threads = 1;
  o.redis = RedisServer::FindExecutable("redis-server").ok();
  return o;
}

void ExpectMeasured(const SystemScale& s, const ScaleOptions& o) {
  SCOPED_TRACE(s.system);
  ASSERT_TRUE(s.skipped.empty()) << s.skipped;
  ASSERT_EQ(s.objects.size(), o.object_counts.size());
  for (size_t i = 0; i < s.objects.size(); ++i) {
    const ObjectsRow& row = s.objects[i];
    EXPECT_EQ(row.objects, o.object_counts[i]);
    ASSERT_TRUE(row.skipped.empty()) << row.skipped;
    EXPECT_EQ(row.wrong_answers, 0u);
    // The values themselves are resident in the server once stored.
    EXPECT_GE(row.resident_bytes, row.objects * o.value_bytes);
    EXPECT_GT(row.exist.p50_ns, 0u);
    EXPECT_GT(row.get.p50_ns, 0u);
    EXPECT_GT(row.list.p50_ns, 0u);
    // As many objects again into a store sized for the first: most of those make room.
    EXPECT_GE(row.evictions, row.objects / 4);
  }
  EXPECT_TRUE(s.connections.skipped.empty()) << s.connections.skipped;
  EXPECT_EQ(s.connections.connections, o.connections);
  EXPECT_EQ(s.connections.wrong_answers, 0u);
}

TEST(ScaleRunTest, FillsProbesAndConnectsToANodeAndRedis) {
  const ScaleOptions o = Short();
  Result<ScaleReport> report = RunScale(o, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ExpectMeasured(report->kvport, o);
  // Each 1 KiB value takes one 4 KiB block of the arena: what the rounding column reports.
  for (const ObjectsRow& row : report->kvport.objects) {
    EXPECT_EQ(row.value_store_bytes, row.objects * 4096);
    EXPECT_DOUBLE_EQ(row.RoundingBytesPerObject(o), 4096.0 - 1024.0);
  }
  if (o.redis) {
    ExpectMeasured(report->redis, o);
  } else {
    std::printf("redis-server not installed: measured kvport only\n");
  }
  EXPECT_TRUE(report->AllCorrect());
  const std::string text = FormatScaleText(*report);
  EXPECT_NE(text.find("kvport"), std::string::npos);
  EXPECT_NE(text.find("idle B/conn"), std::string::npos);
}

TEST(ScaleRunTest, ADiskTierRestartsWithEveryObjectItWasGiven) {
  ScaleOptions o = Short();
  o.object_counts = {};
  o.connections = 0;
  o.redis = false;
  o.disk_dir = ::testing::TempDir() + "kvport_scale_test_" + std::to_string(::getpid());
  o.disk_objects = 3000;  // within the memory tier: the clean stop writes them all
  Result<ScaleReport> report = RunScale(o, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const RestartRow& r = report->restart;
  ASSERT_TRUE(r.skipped.empty()) << r.skipped;
  EXPECT_EQ(r.objects, 3000u);
  EXPECT_EQ(r.dropped, 0u);
  EXPECT_GT(r.disk_index_bytes, 0u);
  EXPECT_EQ(r.restored, 3000u);
  EXPECT_EQ(r.read_misses, 0u);
  EXPECT_EQ(r.wrong_answers, 0u);
  EXPECT_GT(r.first_read_ns, 0u);
  EXPECT_NE(FormatScaleText(*report).find("restored"), std::string::npos);
  std::filesystem::remove_all(o.disk_dir);
}

TEST(ScaleRunTest, ACountTheHostCannotHoldIsSkippedSayingWhy) {
  ScaleOptions o = Short();
  o.object_counts = {1ull << 40};  // 2^40 objects of 1 KiB: more than any host has
  o.connections = 0;
  o.redis = false;
  Result<ScaleReport> report = RunScale(o, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->kvport.objects.size(), 1u);
  EXPECT_NE(report->kvport.objects[0].skipped.find("available"), std::string::npos)
      << report->kvport.objects[0].skipped;
}

TEST(ScaleRunTest, OptionsOutOfRangeAreRefused) {
  ScaleOptions o = Short();
  o.key_bytes = 8;
  EXPECT_EQ(RunScale(o, {}).status().code(), StatusCode::kInvalidArgument);
  o = Short();
  o.object_counts = {0};
  EXPECT_EQ(RunScale(o, {}).status().code(), StatusCode::kInvalidArgument);
  o = Short();
  o.kvport_executable.clear();
  EXPECT_EQ(RunScale(o, {}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvport::bench
