// SPDX-License-Identifier: Apache-2.0
#include "client/value_checksums.h"

#include <fmt/core.h>

#include <algorithm>
#include <utility>

#include "common/xxh3.h"
#include "kvport/log.h"

namespace kvport::client {

ValueChecksums::ValueChecksums(bool enabled, std::vector<std::string> unchecked_namespaces)
    : enabled_(enabled), unchecked_namespaces_(std::move(unchecked_namespaces)) {}

bool ValueChecksums::enabled_for(std::string_view ns) const {
  return enabled_ && std::find(unchecked_namespaces_.begin(), unchecked_namespaces_.end(), ns) ==
                         unchecked_namespaces_.end();
}

uint64_t ValueChecksums::Of(const void* data, size_t size) {
  return Xxh3(data, size);
}

Status ValueChecksums::Check(std::string_view ns, std::string_view key, std::string_view peer,
                             uint64_t expected, const void* data, size_t size) {
  if (expected == 0 || !enabled_for(ns)) return Status::Ok();
  return Compare(ns, key, peer, expected, Of(data, size), size);
}

Status ValueChecksums::Compare(std::string_view ns, std::string_view key, std::string_view peer,
                               uint64_t expected, uint64_t got, size_t size) {
  if (expected == 0 || !enabled_for(ns) || got == expected) return Status::Ok();
  mismatches_.fetch_add(1, std::memory_order_relaxed);
  const std::string what = fmt::format(
      "the value of key '{}' (namespace '{}', {} bytes) from node {} fails its "
      "checksum ({:016x}, put with {:016x}): a miss, never those bytes",
      key, ns, size, peer, got, expected);
  bool log = false;
  uint64_t held_back = 0;
  {
    MutexLock lock(mu_);
    if (logged_.size() < kLoggedKeys) {
      log = logged_.emplace(key).second;
    } else {
      log = overflow_log_.Allow(&held_back);
    }
  }
  if (log) {
    log::Warn("client: {}{}", what,
              held_back == 0 ? std::string()
                             : fmt::format(" ({} more mismatches not logged)", held_back));
  }
  return Status::Corruption(what);
}

}  // namespace kvport::client
