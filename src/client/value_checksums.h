// SPDX-License-Identifier: Apache-2.0
// ValueChecksums: a client's end-to-end checksums of values (docs/client.md, "Checksums").
//
// A value's checksum (xxh3-64 of its bytes) is computed where the bytes are produced, at the
// put, travels with the value (protocol version 10), is kept by the node beside it in memory and
// in its disk record, and comes back with every get, where it is checked before the caller sees
// the bytes. A value that fails is a miss for its key, counted here and logged once per key: the
// caller never receives bytes that do not match what was put. 0 means "none" (a value written by
// a client without checksums; a node older than version 10). Values written over the Redis
// protocol carry the checksum the node computed as their bytes arrived.
//
// One per client, shared by every node of a cluster. Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/log_limiter.h"
#include "common/thread_annotations.h"
#include "kvport/status.h"

namespace kvport::client {

class ValueChecksums {
 public:
  // `enabled`: InitOptions::checksums; values of `unchecked_namespaces` are neither checksummed
  // nor checked.
  ValueChecksums(bool enabled, std::vector<std::string> unchecked_namespaces);

  // Whether values of namespace `ns` carry checksums (computed at put, checked at get).
  bool enabled_for(std::string_view ns) const;

  // The checksum of `size` bytes at `data`: xxh3-64 (XXH3_64bits, as the node's disk records;
  // a value whose hash happens to be 0 travels unchecked).
  static uint64_t Of(const void* data, size_t size);

  // Checks `size` received bytes at `data` of `key` against `expected` (0: nothing to check).
  // OK when they match; otherwise the mismatch is counted, logged (once per key) and the answer
  // is Corruption naming the key and `peer`.
  Status Check(std::string_view ns, std::string_view key, std::string_view peer, uint64_t expected,
               const void* data, size_t size);
  // Check of a value of `size` bytes whose checksum as received, `got`, is known already (hashed
  // as its bytes arrived).
  Status Compare(std::string_view ns, std::string_view key, std::string_view peer,
                 uint64_t expected, uint64_t got, size_t size);

  // Values that failed their check so far.
  uint64_t mismatches() const { return mismatches_.load(std::memory_order_relaxed); }

 private:
  const bool enabled_;
  const std::vector<std::string> unchecked_namespaces_;
  std::atomic<uint64_t> mismatches_{0};
  // Keys whose mismatch was logged (bounded: past kLoggedKeys, lines are rate-limited instead).
  static constexpr size_t kLoggedKeys = 4096;
  Mutex mu_;
  std::unordered_set<std::string> logged_ GUARDED_BY(mu_);
  LogLimiter overflow_log_{std::chrono::seconds(10)};
};

}  // namespace kvport::client
