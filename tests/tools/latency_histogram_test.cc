// SPDX-License-Identifier: Apache-2.0
#include "bench/latency_histogram.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace kvport::bench {
namespace {

TEST(LatencyHistogramTest, EmptyReportsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.Percentile(0.5), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.mean(), 0.0);
}

TEST(LatencyHistogramTest, SmallValuesAreExactNearestRank) {
  LatencyHistogram h;
  for (uint64_t v = 100; v >= 1; --v)
    h.Record(v);  // order does not matter
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.Percentile(0.0), 1u);
  EXPECT_EQ(h.Percentile(0.01), 1u);
  EXPECT_EQ(h.Percentile(0.5), 50u);
  EXPECT_EQ(h.Percentile(0.99), 99u);  // rank ceil(99.0) = 99, not 100
  EXPECT_EQ(h.Percentile(0.999), 100u);
  EXPECT_EQ(h.Percentile(1.0), 100u);
  EXPECT_EQ(h.Percentile(7.0), 100u);  // clamped
  EXPECT_DOUBLE_EQ(h.mean(), 50.5);
}

TEST(LatencyHistogramTest, LargeValuesWithinBucketPrecision) {
  LatencyHistogram h;
  // 1 ms .. 10 s in 1 ms steps: p50 ~ 5 s, p99 ~ 9.9 s, p999 ~ 9.99 s.
  for (uint64_t ms = 1; ms <= 10'000; ++ms)
    h.Record(ms * 1'000'000);
  const double tolerance = 1.0 / (1 << LatencyHistogram::kSubBucketBits);
  for (const auto& [p, want] : {std::pair{0.5, 5'000e6}, {0.99, 9'900e6}, {0.999, 9'990e6}}) {
    const double got = static_cast<double>(h.Percentile(p));
    EXPECT_GE(got, want) << "p=" << p;  // the bucket's upper edge is never below the value
    EXPECT_LE(got, want * (1 + tolerance)) << "p=" << p;
  }
  EXPECT_EQ(h.min(), 1'000'000u);
  EXPECT_EQ(h.max(), 10'000'000'000u);
  EXPECT_EQ(h.Percentile(1.0), h.max());
}

TEST(LatencyHistogramTest, PercentileIsClampedToRecordedRange) {
  LatencyHistogram h;
  h.Record(1'000'001);  // a bucket's upper edge lies above this value
  EXPECT_EQ(h.Percentile(0.5), 1'000'001u);
  EXPECT_EQ(h.Percentile(0.0), 1'000'001u);
}

TEST(LatencyHistogramTest, BucketsCoverEveryValueInOrder) {
  uint64_t previous_upper = 0;
  for (int b = 0; b < 2000; ++b) {
    const uint64_t upper = LatencyHistogram::BucketUpperBound(b);
    if (b > 0) {
      EXPECT_GT(upper, previous_upper) << b;
      // The first value after the previous bucket falls in this one.
      EXPECT_EQ(LatencyHistogram::BucketOf(previous_upper + 1), b);
    }
    EXPECT_EQ(LatencyHistogram::BucketOf(upper), b);
    previous_upper = upper;
  }
  // The largest value lands in a valid bucket whose upper bound is UINT64_MAX.
  const int last = LatencyHistogram::BucketOf(UINT64_MAX);
  EXPECT_EQ(LatencyHistogram::BucketUpperBound(last), UINT64_MAX);
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverything) {
  LatencyHistogram a, b, all;
  for (uint64_t v = 1; v <= 5000; ++v) {
    const uint64_t x = v * 7919 % 100'000 + 1;
    (v % 3 == 0 ? a : b).Record(x);
    all.Record(x);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  EXPECT_DOUBLE_EQ(a.mean(), all.mean());
  for (double p : {0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    EXPECT_EQ(a.Percentile(p), all.Percentile(p)) << p;
  }
}

TEST(LatencyHistogramTest, MergingAnEmptyHistogramChangesNothing) {
  LatencyHistogram a, empty;
  a.Record(42);
  a.Merge(empty);
  EXPECT_EQ(a.count(), 1u);
  EXPECT_EQ(a.min(), 42u);
  EXPECT_EQ(a.Percentile(0.5), 42u);
}

}  // namespace
}  // namespace kvport::bench
