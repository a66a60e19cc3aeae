// SPDX-License-Identifier: Apache-2.0
#include "connector/mem_connector.h"

#include <fmt/core.h>

#include <atomic>
#include <map>
#include <mutex>

#include "connector/chunk_check.h"

namespace kvport {
namespace {

struct SharedMap {
  std::mutex mu;
  std::map<std::string, KvChunk> chunks;  // by CacheKey::ToString()
};

std::shared_ptr<SharedMap> MapNamed(const std::string& name) {
  static std::mutex registry_mu;
  static std::map<std::string, std::weak_ptr<SharedMap>> registry;
  std::lock_guard<std::mutex> lock(registry_mu);
  std::shared_ptr<SharedMap> map = registry[name].lock();
  if (!map) {
    map = std::make_shared<SharedMap>();
    registry[name] = map;
  }
  return map;
}

class MemConnector : public RemoteConnector {
 public:
  explicit MemConnector(std::shared_ptr<SharedMap> map) : map_(std::move(map)) {}

  Result<std::vector<Status>> BatchedPut(std::span<const CacheKey> keys,
                                         std::span<const KvChunkView> chunks) override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    if (keys.size() != chunks.size()) {
      return Status::InvalidArgument(
          fmt::format("{} keys but {} chunks", keys.size(), chunks.size()));
    }
    std::vector<Status> out;
    out.reserve(keys.size());
    std::lock_guard<std::mutex> lock(map_->mu);
    for (size_t i = 0; i < keys.size(); ++i) {
      std::string key = keys[i].ToString();
      Status st = CheckChunkToStore(key, chunks[i]);
      if (st.ok()) {
        map_->chunks[key] =
            KvChunk{*chunks[i].meta, {chunks[i].data.begin(), chunks[i].data.end()}};
      }
      out.push_back(std::move(st));
    }
    return out;
  }

  Result<std::vector<std::optional<KvChunk>>> BatchedGet(std::span<const CacheKey> keys) override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    std::vector<std::optional<KvChunk>> out;
    out.reserve(keys.size());
    std::lock_guard<std::mutex> lock(map_->mu);
    for (const CacheKey& key : keys) {
      auto it = map_->chunks.find(key.ToString());
      out.push_back(it == map_->chunks.end() ? std::nullopt : std::optional<KvChunk>(it->second));
    }
    return out;
  }

  Result<size_t> BatchedContains(std::span<const CacheKey> keys) override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    std::lock_guard<std::mutex> lock(map_->mu);
    size_t hits = 0;
    while (hits < keys.size() && map_->chunks.count(keys[hits].ToString()) != 0)
      ++hits;
    return hits;
  }

  Result<std::vector<KvChunk>> BatchedGetPrefix(std::span<const CacheKey> keys) override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    std::vector<KvChunk> out;
    std::lock_guard<std::mutex> lock(map_->mu);
    for (const CacheKey& key : keys) {
      auto it = map_->chunks.find(key.ToString());
      if (it == map_->chunks.end()) break;
      out.push_back(it->second);
    }
    return out;
  }

  Status Remove(const CacheKey& key) override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    std::lock_guard<std::mutex> lock(map_->mu);
    if (map_->chunks.erase(key.ToString()) == 0) {
      return Status::NotFound(fmt::format("no chunk '{}'", key.ToString()));
    }
    return Status::Ok();
  }

  Result<std::vector<std::string>> List() override {
    KVPORT_RETURN_IF_ERROR(CheckOpen());
    std::lock_guard<std::mutex> lock(map_->mu);
    std::vector<std::string> out;
    out.reserve(map_->chunks.size());
    for (const auto& [key, chunk] : map_->chunks)
      out.push_back(key);
    return out;
  }

  Status Ping() override { return CheckOpen(); }

  Status Close() override {
    closed_ = true;
    return Status::Ok();
  }

  std::string Transport() const override { return "in-process"; }
  std::string TransportReason() const override { return "mem://: a map in this process"; }

 private:
  Status CheckOpen() const {
    return closed_ ? Status::Aborted("mem:// connector is closed") : Status::Ok();
  }

  std::shared_ptr<SharedMap> map_;
  std::atomic<bool> closed_{false};
};

}  // namespace

std::unique_ptr<RemoteConnector> OpenMemConnector(const std::string& name) {
  return std::make_unique<MemConnector>(MapNamed(name));
}

}  // namespace kvport
