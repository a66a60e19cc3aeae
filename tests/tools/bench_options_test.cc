// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <atomic>

#include "bench/bench_options.h"
#include "bench/model_shape.h"
#include "bench/phase_driver.h"

namespace kvport::bench {
namespace {

TEST(ModelShapeTest, Llama3_8BChunkOf256TokensIs32MiB) {
  ModelShape s;  // defaults: Llama-3-8B
  Result<uint64_t> bytes = ChunkBytes(s);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, uint64_t{32} << 20);
  s.layers = 4;
  s.dtype = "fp8";
  EXPECT_EQ(*ChunkBytes(s), uint64_t{2} << 20);
  s.dtype = "fp32";
  EXPECT_EQ(*ChunkBytes(s), uint64_t{8} << 20);
}

TEST(ModelShapeTest, RejectsBadShapes) {
  ModelShape s;
  s.head_dim = 0;
  Result<uint64_t> r = ChunkBytes(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("head dim"), std::string::npos);

  s = ModelShape{};
  s.dtype = "int4";
  r = ChunkBytes(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("int4"), std::string::npos);

  s = ModelShape{};
  s.tokens_per_chunk = 1 << 16;  // 8 GiB chunks: beyond LMCache metadata's int32 length
  r = ChunkBytes(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(BenchOptionsTest, ParsesOpLists) {
  Result<std::vector<Op>> ops = ParseOps("get,put");
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ(*ops, (std::vector<Op>{Op::kGet, Op::kPut}));
  EXPECT_FALSE(ParseOps("put,put").ok());
  EXPECT_FALSE(ParseOps("put,delete").ok());
  EXPECT_FALSE(ParseOps("").ok());
  EXPECT_FALSE(ParseOps("put,").ok());
}

TEST(BenchOptionsTest, RedisGetsItsBestPatternForTheValueSize) {
  BenchOptions o;
  o.batch = 16;
  o.value_bytes = 64 << 10;
  EXPECT_EQ(o.redis_depth(), 16u);  // small values: one pipeline of the whole batch
  o.value_bytes = kRedisNoPipelineBytes;
  EXPECT_EQ(o.redis_depth(), 1u);  // multi-MiB values: one command at a time
  o.redis_pipeline = 4;
  EXPECT_EQ(o.redis_depth(), 4u);  // asked for
  o.redis_pipeline = 64;
  EXPECT_EQ(o.redis_depth(), 16u);  // never deeper than the batch
}

TEST(BenchOptionsTest, ValidateNamesTheBadOption) {
  BenchOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.batch = 0;
  EXPECT_NE(o.Validate().message().find("--batch"), std::string::npos);
  o = BenchOptions{};
  o.connections = 0;
  EXPECT_NE(o.Validate().message().find("--connections"), std::string::npos);
}

TEST(BenchOptionsTest, NodesAreEmbeddedAndBounded) {
  BenchOptions o;
  o.nodes = 3;
  EXPECT_TRUE(o.Validate().ok());
  o.nodes = kMaxBenchNodes;
  EXPECT_TRUE(o.Validate().ok());
  for (int bad : {0, -1, kMaxBenchNodes + 1}) {
    o.nodes = bad;
    const Status s = o.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--nodes"), std::string::npos) << s.message();
  }
  // An existing endpoint is measured as it is: --nodes would start nodes it never uses.
  o.nodes = 2;
  o.url = "127.0.0.1:7481;127.0.0.1:7482";
  const Status s = o.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--url"), std::string::npos) << s.message();
  o.nodes = 1;
  EXPECT_TRUE(o.Validate().ok());  // a cluster URL alone is fine
}

// --disk DIR: what `kvport bench --disk` sets (1 MiB values, the defaults of the data set and
// memory) is valid; what cannot work is refused naming the option.
TEST(BenchOptionsTest, DiskOptionsAreCheckedAgainstEachOther) {
  BenchOptions o;
  o.disk_dir = "/var/tmp/bench";
  o.value_bytes = uint64_t{1} << 20;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate().ToString();
  EXPECT_EQ(o.disk_data_bytes, uint64_t{1} << 30);
  EXPECT_EQ(o.disk_memory_bytes, uint64_t{64} << 20);
  EXPECT_EQ(o.disk_keys(), 1024u);
  EXPECT_EQ(o.fio, "fio");
  // fio's queue: at least the keys in flight (2 threads x 16), at least 32; or as given.
  EXPECT_EQ(o.fio_depth(), 32);
  o.batch = 32;
  o.disk_memory_bytes = uint64_t{128} << 20;
  EXPECT_EQ(o.fio_depth(), 64);
  o.fio_iodepth = 8;
  EXPECT_EQ(o.fio_depth(), 8);

  auto refused = [](const BenchOptions& bad, std::string_view option) {
    const Status s = bad.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << option;
    EXPECT_NE(s.message().find(option), std::string::npos) << s.message();
  };
  BenchOptions bad = o;
  bad.url = "127.0.0.1:7481";
  refused(bad, "--url");
  bad = o;
  bad.nodes = 2;
  refused(bad, "--nodes");
  bad = o;
  bad.transport = TransportChoice::kShm;
  refused(bad, "--transport");
  bad = o;
  bad.inflight = 2;
  refused(bad, "--inflight");
  bad = o;
  bad.fio_iodepth = -1;
  refused(bad, "--fio-iodepth");
  bad = o;
  bad.disk_memory_bytes = uint64_t{64} << 20;  // 2 threads x 32 x 1 MiB in flight: 64 MiB
  refused(bad, "--disk-memory");
  bad = o;
  bad.disk_data_bytes = uint64_t{200} << 20;  // less than twice the memory: mostly not evicted
  refused(bad, "--disk-data");
  // Without --disk none of it is looked at.
  bad.disk_dir.clear();
  EXPECT_TRUE(bad.Validate().ok());
}

TEST(PhaseDriverTest, StopsAtTheCallCountAndSumsOutcomes) {
  PhaseResult result;
  PhaseLimits limits;
  limits.threads = 3;
  limits.calls = 50;
  limits.max_time = std::chrono::seconds(600);
  RunTimedPhase(
      limits,
      [](int, uint64_t) -> Result<CallOutcome> {
        return CallOutcome{.keys = 4, .bytes = 400, .failed_keys = 1};
      },
      &result);
  EXPECT_EQ(result.calls, 50u);
  EXPECT_EQ(result.keys, 200u);
  EXPECT_EQ(result.bytes, 20'000u);
  EXPECT_EQ(result.failed_keys, 50u);
  EXPECT_EQ(result.latency.count(), 50u);
  EXPECT_TRUE(result.error.empty());
}

TEST(PhaseDriverTest, AFailedCallStopsThePhaseAndIsReported) {
  PhaseResult result;
  PhaseLimits limits;
  limits.threads = 2;
  limits.calls = 1'000'000;
  limits.max_time = std::chrono::seconds(600);
  std::atomic<int> calls{0};
  RunTimedPhase(
      limits,
      [&](int, uint64_t) -> Result<CallOutcome> {
        if (++calls == 10) return Status::Unavailable("node went away");
        return CallOutcome{.keys = 1, .bytes = 1, .failed_keys = 0};
      },
      &result);
  EXPECT_NE(result.error.find("node went away"), std::string::npos);
  EXPECT_LT(result.calls, 1'000'000u);
}

}  // namespace
}  // namespace kvport::bench
