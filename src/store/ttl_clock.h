// SPDX-License-Identifier: Apache-2.0
// TtlClock: the store's source of time for TTLs, injectable so that tests control expiry
// without sleeping.
#pragma once

#include <atomic>
#include <cstdint>

namespace kvport::store {

// A monotonic clock in milliseconds. Only differences matter: the epoch is arbitrary, and the
// value never goes backwards. Implementations are thread-safe.
class TtlClock {
 public:
  virtual ~TtlClock() = default;
  virtual uint64_t NowMillis() const = 0;
};

// The real clock: the kernel's coarse monotonic clock (CLOCK_MONOTONIC_COARSE), whose resolution
// is one timer tick (1-10 ms; 4 ms on most kernels). A process-wide instance: Get() never returns
// null.
class SteadyTtlClock final : public TtlClock {
 public:
  static SteadyTtlClock* Get();
  uint64_t NowMillis() const override;
};

// A clock that moves only when told to. For tests (of the store and of layers above it).
class ManualTtlClock final : public TtlClock {
 public:
  explicit ManualTtlClock(uint64_t start_millis = 0) : now_(start_millis) {}
  uint64_t NowMillis() const override { return now_.load(std::memory_order_acquire); }
  void AdvanceMillis(uint64_t millis) { now_.fetch_add(millis, std::memory_order_acq_rel); }
  void AdvanceSeconds(uint64_t seconds) { AdvanceMillis(seconds * 1000); }

 private:
  std::atomic<uint64_t> now_;
};

}  // namespace kvport::store
