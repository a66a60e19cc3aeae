// SPDX-License-Identifier: Apache-2.0
#include "bench/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace kvport::bench {

int LatencyHistogram::BucketOf(uint64_t nanos) {
  if (nanos < kSubBuckets) return static_cast<int>(nanos);
  // nanos is in [2^e, 2^(e+1)) with e >= kSubBucketBits; that range has kSubBuckets buckets of
  // width 2^(e - kSubBucketBits).
  const int e = 63 - std::countl_zero(nanos);
  const int shift = e - kSubBucketBits;
  const int sub = static_cast<int>((nanos >> shift) - kSubBuckets);
  return kSubBuckets + (e - kSubBucketBits) * kSubBuckets + sub;
}

uint64_t LatencyHistogram::BucketUpperBound(int bucket) {
  if (bucket < kSubBuckets) return static_cast<uint64_t>(bucket);
  const int range = (bucket - kSubBuckets) / kSubBuckets;  // e - kSubBucketBits
  const uint64_t sub = static_cast<uint64_t>((bucket - kSubBuckets) % kSubBuckets);
  const uint64_t lower = (uint64_t{kSubBuckets} + sub) << range;
  const uint64_t width = uint64_t{1} << range;
  // The last bucket ends at 2^64 - 1; lower + width would overflow to 0 there.
  return lower + (width - 1);
}

void LatencyHistogram::Record(uint64_t nanos) {
  ++counts_[BucketOf(nanos)];
  ++count_;
  sum_ += nanos;
  min_ = std::min(min_, nanos);
  max_ = std::max(max_, nanos);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int i = 0; i < kBuckets; ++i)
    counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

uint64_t LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  p = std::clamp(p, 0.0, 1.0);
  // Nearest rank, at least 1 (p = 0 is the minimum).
  // (The small slack keeps 0.99 * 100, which is 99.000...01 in binary, at rank 99.)
  uint64_t rank = static_cast<uint64_t>(std::ceil(p * static_cast<double>(count_) - 1e-9));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::clamp(BucketUpperBound(i), min_, max_);
  }
  return max_;
}

}  // namespace kvport::bench
