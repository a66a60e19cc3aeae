// SPDX-License-Identifier: Apache-2.0
#include "bench/bench_data.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>

namespace kvport::bench {
namespace {
constexpr size_t kStampBytes = 16;
constexpr uint64_t kStampMagic = 0x6b76706f72746276ull;  // "kvportbv"
}  // namespace

BenchData::BenchData(const BenchOptions& options) {
  Reset(options);
}

void BenchData::Reset(const BenchOptions& options) {
  value_bytes_ = options.value_bytes;
  keys_per_thread_ = options.keys_per_thread();
  threads_active_ = options.worker_threads();
  sets_active_ = options.key_sets();
  if (threads_.size() < static_cast<size_t>(sets_active_)) threads_.resize(sets_active_);
  for (int t = 0; t < sets(); ++t) {
    PerThread& p = threads_[t];
    p.keys.clear();
    p.exist_keys.clear();
    for (size_t i = 0; i < keys_per_thread_; ++i)
      p.keys.push_back(KeyName(t, i));
    for (size_t i = 0; i < options.exists_batch; ++i)
      p.exist_keys.push_back(KeyName(t, i));
    // resize() keeps the capacity when shrinking; assign() writes every byte (warm or not).
    p.values.resize(keys_per_thread_ * value_bytes_);
    p.reads.assign(keys_per_thread_ * value_bytes_, 0);
    for (size_t i = 0; i < keys_per_thread_; ++i) {
      uint8_t* v = p.values.data() + i * value_bytes_;
      std::memset(v, static_cast<int>('a' + (t * 7 + i) % 26), value_bytes_);
      // Stamps at both ends; a value shorter than two stamps holds a prefix of one.
      uint8_t stamp[kStampBytes];
      Stamp(stamp, t, i);
      std::memcpy(v, stamp, std::min<uint64_t>(kStampBytes, value_bytes_));
      if (value_bytes_ >= 2 * kStampBytes) {
        std::memcpy(v + value_bytes_ - kStampBytes, stamp, kStampBytes);
      }
    }
  }
}

std::string BenchData::KeyName(int thread, size_t index) {
  return fmt::format("t{}-k{}", thread, index);
}

void BenchData::Stamp(uint8_t* out, int thread, size_t index) {
  const uint64_t who = (static_cast<uint64_t>(thread) << 40) ^ index;
  std::memcpy(out, &kStampMagic, 8);
  std::memcpy(out + 8, &who, 8);
}

std::span<const uint8_t> BenchData::value(int thread, size_t index) const {
  return {threads_[thread].values.data() + index * value_bytes_, value_bytes_};
}

std::span<uint8_t> BenchData::read_buffer(int thread, size_t index) {
  return {threads_[thread].reads.data() + index * value_bytes_, value_bytes_};
}

std::span<const uint8_t> BenchData::values_of(int thread) const {
  return {threads_[thread].values.data(), keys_per_thread_ * value_bytes_};
}

std::span<uint8_t> BenchData::reads_of(int thread) {
  return {threads_[thread].reads.data(), keys_per_thread_ * value_bytes_};
}

void BenchData::ClearReadStamps(int thread) {
  for (size_t i = 0; i < keys_per_thread_; ++i) {
    std::span<uint8_t> r = read_buffer(thread, i);
    std::memset(r.data(), 0, std::min<size_t>(kStampBytes, r.size()));
    if (r.size() >= 2 * kStampBytes) std::memset(r.data() + r.size() - kStampBytes, 0, kStampBytes);
    r[r.size() / 2] = static_cast<uint8_t>(~value(thread, i)[r.size() / 2]);
  }
}

bool BenchData::VerifyRead(int thread, size_t index, uint64_t length) const {
  if (length != value_bytes_) return false;
  const std::span<const uint8_t> want = value(thread, index);
  const uint8_t* got = threads_[thread].reads.data() + index * value_bytes_;
  const size_t head = std::min<size_t>(kStampBytes, value_bytes_);
  if (std::memcmp(got, want.data(), head) != 0) return false;
  if (value_bytes_ >= 2 * kStampBytes) {
    const size_t tail = value_bytes_ - kStampBytes;
    if (std::memcmp(got + tail, want.data() + tail, kStampBytes) != 0) return false;
  }
  // One byte from the middle too: catches a value whose ends arrived but whose body did not.
  return got[value_bytes_ / 2] == want[value_bytes_ / 2];
}

}  // namespace kvport::bench
