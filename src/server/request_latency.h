// SPDX-License-Identifier: Apache-2.0
// RequestLatencies: per-opcode latency histograms of the requests a node answers, recorded by
// the sessions (from the arrival of a request's header to its response being queued) and read
// by STATS (p50/p99 counters) and the HTTP /metrics page (the buckets).
//
// Lock-free: one relaxed atomic add to a bucket, one to the sum. Buckets are log-linear over
// nanoseconds: [0, 1024 ns), then four equal sub-buckets per power of two up to 2^37 ns (about
// 137 s), then one overflow bucket. So every power of two from 2^10 ns on is a bucket edge
// (what /metrics exposes), and a quantile read from the buckets is within 25 % of the truth.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace kvport::server {

class RequestLatencies {
 public:
  static constexpr size_t kOpSlots = 16;          // opcodes are below 16 (protocol/frame.h)
  static constexpr unsigned kFirstExponent = 10;  // bucket 0 is [0, 2^10 ns)
  static constexpr unsigned kLastExponent = 36;   // the last sub-buckets end at 2^37 ns
  static constexpr unsigned kSubBuckets = 4;
  static constexpr size_t kBuckets = 1 + (kLastExponent - kFirstExponent + 1) * kSubBuckets + 1;

  // The bucket of a latency of `ns` nanoseconds.
  static size_t BucketOf(uint64_t ns);
  // The exclusive upper bound of bucket `i` in nanoseconds; UINT64_MAX for the overflow bucket.
  static uint64_t UpperBoundNs(size_t i);

  // Histograms for slots [0, slots): kOpSlots for the binary protocol's opcodes.
  explicit RequestLatencies(size_t slots = kOpSlots)
      : slots_(slots), ops_(std::make_unique<Op[]>(slots)) {}

  void Record(size_t op_slot, uint64_t ns) {
    if (op_slot >= slots_) return;
    Op& op = ops_[op_slot];
    op.buckets[BucketOf(ns)].fetch_add(1, std::memory_order_relaxed);
    op.sum_ns.fetch_add(ns, std::memory_order_relaxed);
  }

  struct Snapshot {
    std::vector<uint64_t> counts;  // kBuckets entries, not cumulative
    uint64_t count = 0;
    uint64_t sum_ns = 0;
  };
  Snapshot Read(size_t op_slot) const;

 private:
  struct Op {
    std::array<std::atomic<uint64_t>, kBuckets> buckets{};
    std::atomic<uint64_t> sum_ns{0};
  };
  const size_t slots_;
  std::unique_ptr<Op[]> ops_;
};

}  // namespace kvport::server
