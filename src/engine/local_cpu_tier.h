// SPDX-License-Identifier: Apache-2.0
// LocalCpuTier: the CacheEngine's in-process chunk cache (LMCache's local_cpu backend).
//
// An LRU map from key string to chunk, bounded by payload bytes. Chunks are shared (shared_ptr)
// so a reader keeps its chunk alive even when it is evicted meanwhile.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kvport/connector.h"

namespace kvport {

class LocalCpuTier {
 public:
  explicit LocalCpuTier(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // Inserts or replaces; evicts least recently used chunks to make room. A chunk larger than the
  // whole capacity is not kept (returns false).
  bool Put(const std::string& key, std::shared_ptr<const KvChunk> chunk);
  // The chunk, marked as most recently used; null on a miss.
  std::shared_ptr<const KvChunk> Get(const std::string& key);
  bool Contains(const std::string& key);

  uint64_t used_bytes() const;
  uint64_t capacity_bytes() const { return capacity_bytes_; }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const KvChunk> chunk;
  };
  using Lru = std::list<Entry>;  // front = most recently used

  const uint64_t capacity_bytes_;
  mutable std::mutex mu_;
  Lru lru_;
  std::unordered_map<std::string, Lru::iterator> index_;
  uint64_t used_bytes_ = 0;
};

}  // namespace kvport
