// SPDX-License-Identifier: Apache-2.0
// BenchData: the keys and value buffers of a benchmark, in sets of one batch each, shared by
// every system measured (kvport and redis get the same keys and the same bytes). There is one
// set per call a thread keeps in flight (BenchOptions::key_sets): thread t of a run with
// `inflight` calls in flight uses sets t * inflight .. t * inflight + inflight - 1; with one
// call in flight, set t is thread t's.
//
// Set s writes keys KeyName(s, 0 .. keys_per_thread - 1). Each value starts with a 16-byte
// stamp naming its thread and key and ends with the same stamp, so a read can be checked
// cheaply (a wrong, shifted or truncated value fails) without comparing every byte. The exists
// phase asks for KeyName(t, 0 .. exists_batch - 1): the first keys_per_thread exist, the rest
// never do, so the expected answer of every key is known.
//
// Every buffer is written before it is used, so page faults are not part of any timing.
// Reset() reshapes the same object for another workload, reusing its memory where it is large
// enough (the matrix runs its largest shape first, so later shapes touch no fresh memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bench/bench_options.h"

namespace kvport::bench {

class BenchData {
 public:
  explicit BenchData(const BenchOptions& options);
  // Now holds the keys and values of `options` (its threads, value size, batch, exists batch).
  void Reset(const BenchOptions& options);

  static std::string KeyName(int thread, size_t index);

  int threads() const { return threads_active_; }
  int sets() const { return sets_active_; }
  uint64_t value_bytes() const { return value_bytes_; }
  size_t keys_per_thread() const { return keys_per_thread_; }

  const std::vector<std::string>& keys(int thread) const { return threads_[thread].keys; }
  std::span<const uint8_t> value(int thread, size_t index) const;
  std::span<uint8_t> read_buffer(int thread, size_t index);
  // A thread's values back to back, and its read buffers back to back (one batch each).
  std::span<const uint8_t> values_of(int thread) const;
  std::span<uint8_t> reads_of(int thread);
  // Zeroes the stamps of a thread's read buffers, so a get that writes nothing fails Verify.
  void ClearReadStamps(int thread);
  // True when read buffer `index` of `thread` holds exactly the value of that key.
  bool VerifyRead(int thread, size_t index, uint64_t length) const;

  const std::vector<std::string>& exist_keys(int thread) const {
    return threads_[thread].exist_keys;
  }
  // Whether exist_keys(thread)[index] was written.
  bool ShouldExist(size_t index) const { return index < keys_per_thread_; }

 private:
  struct PerThread {
    std::vector<std::string> keys;
    std::vector<std::string> exist_keys;
    std::vector<uint8_t> values;  // keys_per_thread values back to back
    std::vector<uint8_t> reads;   // as many read buffers
  };
  static void Stamp(uint8_t* out, int thread, size_t index);

  uint64_t value_bytes_ = 0;
  size_t keys_per_thread_ = 0;
  int threads_active_ = 0;
  int sets_active_ = 0;
  std::vector<PerThread> threads_;  // per set: at least sets_active_; never shrinks
};

}  // namespace kvport::bench
