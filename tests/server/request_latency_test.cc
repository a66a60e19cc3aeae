// SPDX-License-Identifier: Apache-2.0
// The latency histograms (server/request_latency.h), their quantiles, the per-op STATS counters
// they feed, and the rate-limited client-error log (server/client_error_log.h).
#include "server/request_latency.h"

#include <gtest/gtest.h>

#include <limits>

#include "kvport/server.h"
#include "server/client_error_log.h"
#include "server/server_stats.h"

namespace kvport::server {
namespace {

TEST(RequestLatencies, BucketsTileTheRangeAndPowersOfTwoAreBounds) {
  EXPECT_EQ(RequestLatencies::BucketOf(0), 0u);
  EXPECT_EQ(RequestLatencies::BucketOf(1023), 0u);
  EXPECT_EQ(RequestLatencies::BucketOf(1024), 1u);
  for (size_t i = 0; i + 1 < RequestLatencies::kBuckets; ++i) {
    const uint64_t upper = RequestLatencies::UpperBoundNs(i);
    EXPECT_EQ(RequestLatencies::BucketOf(upper - 1), i) << i;
    EXPECT_EQ(RequestLatencies::BucketOf(upper), i + 1) << i;
    if (i > 0) {
      EXPECT_GT(upper, RequestLatencies::UpperBoundNs(i - 1));
    }
  }
  for (unsigned e = RequestLatencies::kFirstExponent; e <= RequestLatencies::kLastExponent + 1;
       ++e) {
    bool found = false;
    for (size_t i = 0; i < RequestLatencies::kBuckets; ++i)
      found = found || RequestLatencies::UpperBoundNs(i) == (uint64_t{1} << e);
    EXPECT_TRUE(found) << "2^" << e << " ns is a bucket bound";
  }
  EXPECT_EQ(RequestLatencies::BucketOf(std::numeric_limits<uint64_t>::max()),
            RequestLatencies::kBuckets - 1);
  EXPECT_EQ(RequestLatencies::UpperBoundNs(RequestLatencies::kBuckets - 1),
            std::numeric_limits<uint64_t>::max());
}

TEST(RequestLatencies, QuantilesComeFromTheBucketsWithinTheirWidth) {
  ServerCounters counters;
  // 90 MGETs of 20 us and 10 of 5 ms.
  for (int i = 0; i < 90; ++i)
    counters.RecordLatency(protocol::Opcode::kMget, 20'000);
  for (int i = 0; i < 10; ++i)
    counters.RecordLatency(protocol::Opcode::kMget, 5'000'000);
  std::vector<ServerStats::Latency> latencies;
  counters.AppendLatencies(&latencies);
  const ServerStats::Latency* mget = nullptr;
  for (const auto& l : latencies) {
    if (l.op == "mget") mget = &l;
  }
  ASSERT_NE(mget, nullptr);
  EXPECT_EQ(mget->count, 100u);
  EXPECT_EQ(mget->sum_ns, 90u * 20'000 + 10u * 5'000'000);
  const double p50 = mget->QuantileNs(0.5), p99 = mget->QuantileNs(0.99);
  EXPECT_GE(p50, 20'000 * 0.75);
  EXPECT_LE(p50, 20'000 * 1.25);
  EXPECT_GE(p99, 5'000'000 * 0.75);
  EXPECT_LE(p99, 5'000'000 * 1.25);

  std::vector<std::pair<std::string, uint64_t>> stats;
  counters.CountRequest(protocol::Opcode::kMget);
  counters.CountRequestError(protocol::Opcode::kMget);
  counters.AppendTo(&stats);
  auto get = [&stats](const std::string& name) -> int64_t {
    for (const auto& [n, v] : stats) {
      if (n == name) return static_cast<int64_t>(v);
    }
    return -1;
  };
  EXPECT_EQ(get("errors_mget"), 1);
  EXPECT_EQ(get("errors_mset"), 0);
  EXPECT_NEAR(get("latency_mget_p50_us"), 20, 5);
  EXPECT_NEAR(get("latency_mget_p99_us"), 5000, 1250);
  EXPECT_EQ(get("latency_mset_p99_us"), 0);  // no MSET yet
}

TEST(RequestLatencies, AnEmptyHistogramHasNoQuantile) {
  ServerStats::Latency empty;
  EXPECT_EQ(empty.QuantileNs(0.5), 0);
}

TEST(ClientErrorLog, OneLinePerPeerHostAndKindPerIntervalWithTheSuppressedCount) {
  ClientErrorLog log(std::chrono::seconds(10));
  const auto t0 = MonotonicClock::time_point{} + std::chrono::hours(1);
  auto first = log.Admit("10.0.0.5:40000", "closed InvalidArgument", "bad frame", t0);
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, "client 10.0.0.5:40000: bad frame");
  // The same host from another port (it reconnected), within the interval: held back.
  EXPECT_FALSE(log.Admit("10.0.0.5:40001", "closed InvalidArgument", "bad frame",
                         t0 + std::chrono::seconds(1)));
  EXPECT_FALSE(log.Admit("10.0.0.5:40002", "closed InvalidArgument", "bad frame",
                         t0 + std::chrono::seconds(9)));
  // Another kind, or another host, is its own line.
  EXPECT_TRUE(
      log.Admit("10.0.0.5:40003", "refused LIST NotFound", "cursor", t0 + std::chrono::seconds(2)));
  EXPECT_TRUE(log.Admit("10.0.0.6:40000", "closed InvalidArgument", "bad frame",
                        t0 + std::chrono::seconds(2)));
  EXPECT_EQ(log.suppressed(), 2u);
  // After the interval: logged again, saying how many were not.
  auto later = log.Admit("10.0.0.5:40009", "closed InvalidArgument", "bad frame",
                         t0 + std::chrono::seconds(10));
  ASSERT_TRUE(later);
  EXPECT_NE(later->find("(2 more like it from 10.0.0.5 in the last 10 s not logged)"),
            std::string::npos)
      << *later;
  EXPECT_EQ(PeerHost("[::1]:7470"), "::1");
  EXPECT_EQ(PeerHost("unix"), "unix");
}

TEST(ClientErrorLog, TheTableIsBounded) {
  ClientErrorLog log(std::chrono::seconds(10), /*max_tracked=*/4);
  const auto t0 = MonotonicClock::time_point{} + std::chrono::hours(1);
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(log.Admit("10.0.0." + std::to_string(i) + ":1", "k", "m", t0)) << i;
  }
}

}  // namespace
}  // namespace kvport::server
