// SPDX-License-Identifier: Apache-2.0
#include "server/request_latency.h"

#include <bit>
#include <limits>

namespace kvport::server {

size_t RequestLatencies::BucketOf(uint64_t ns) {
  if (ns < (uint64_t{1} << kFirstExponent)) return 0;
  const unsigned e = static_cast<unsigned>(std::bit_width(ns)) - 1;  // 2^e <= ns < 2^(e+1)
  if (e > kLastExponent) return kBuckets - 1;
  const size_t sub = static_cast<size_t>((ns >> (e - 2)) & (kSubBuckets - 1));
  return 1 + (e - kFirstExponent) * kSubBuckets + sub;
}

uint64_t RequestLatencies::UpperBoundNs(size_t i) {
  if (i == 0) return uint64_t{1} << kFirstExponent;
  if (i >= kBuckets - 1) return std::numeric_limits<uint64_t>::max();
  const unsigned e = kFirstExponent + static_cast<unsigned>((i - 1) / kSubBuckets);
  const uint64_t sub = (i - 1) % kSubBuckets;
  return (kSubBuckets + sub + 1) << (e - 2);
}

RequestLatencies::Snapshot RequestLatencies::Read(size_t op_slot) const {
  Snapshot s;
  s.counts.assign(kBuckets, 0);
  if (op_slot >= slots_) return s;
  const Op& op = ops_[op_slot];
  for (size_t i = 0; i < kBuckets; ++i) {
    s.counts[i] = op.buckets[i].load(std::memory_order_relaxed);
    s.count += s.counts[i];
  }
  s.sum_ns = op.sum_ns.load(std::memory_order_relaxed);
  return s;
}

}  // namespace kvport::server
