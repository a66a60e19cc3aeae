// SPDX-License-Identifier: Apache-2.0
#include "engine/local_cpu_tier.h"

namespace kvport {

bool LocalCpuTier::Put(const std::string& key, std::shared_ptr<const KvChunk> chunk) {
  const uint64_t size = chunk->data.size();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    used_bytes_ -= it->second->chunk->data.size();
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (size > capacity_bytes_) return false;
  while (used_bytes_ + size > capacity_bytes_) {
    const Entry& victim = lru_.back();
    used_bytes_ -= victim.chunk->data.size();
    index_.erase(victim.key);
    lru_.pop_back();
  }
  lru_.push_front(Entry{key, std::move(chunk)});
  index_[key] = lru_.begin();
  used_bytes_ += size;
  return true;
}

std::shared_ptr<const KvChunk> LocalCpuTier::Get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->chunk;
}

bool LocalCpuTier::Contains(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.count(key) != 0;
}

uint64_t LocalCpuTier::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_bytes_;
}

}  // namespace kvport
