// SPDX-License-Identifier: Apache-2.0
// LatencyHistogram: latencies in nanoseconds, summarised as percentiles.
//
// A log-linear histogram (the HdrHistogram idea): values below 2^kSubBucketBits are counted
// exactly; above, each power-of-two range is split into 2^kSubBucketBits equal buckets, so a
// reported percentile is within 1/2^kSubBucketBits (under 0.8%) of a value that was recorded.
// Memory is fixed (a few thousand counters) whatever the number of samples, so a benchmark can
// record every operation of a long run. Count, sum, min and max are exact.
//
// Percentile(p) uses the nearest-rank definition: the smallest recorded value v such that at
// least ceil(p * count) samples are <= v (p = 0 gives the minimum, p = 1 the maximum), reported
// as the upper edge of v's bucket clamped to [min, max].
//
// Not thread-safe: give each thread its own histogram and Merge() them afterwards.
#pragma once

#include <array>
#include <cstdint>

namespace kvport::bench {

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 7;

  void Record(uint64_t nanos);
  // Adds every sample of `other`.
  void Merge(const LatencyHistogram& other);

  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ == 0 ? 0 : min_; }
  uint64_t max() const { return max_; }
  double mean() const { return count_ == 0 ? 0.0 : static_cast<double>(sum_) / count_; }
  // See the file comment; 0 when empty. `p` is clamped to [0, 1].
  uint64_t Percentile(double p) const;

  // The bucket a value falls in and the largest value of that bucket (exposed for tests).
  static int BucketOf(uint64_t nanos);
  static uint64_t BucketUpperBound(int bucket);

 private:
  static constexpr int kSubBuckets = 1 << kSubBucketBits;
  // Exact buckets for [0, kSubBuckets), then kSubBuckets per power of two up to 2^64.
  static constexpr int kBuckets = kSubBuckets + (64 - kSubBucketBits) * kSubBuckets;

  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

}  // namespace kvport::bench
