// SPDX-License-Identifier: Apache-2.0
// The single-key forms of RemoteConnector and the priority-ordered AsyncConnector.
#include <fmt/core.h>

#include "connector/priority_executor.h"
#include "kvport/connector.h"

namespace kvport {

Result<bool> RemoteConnector::Exists(const CacheKey& key) {
  KVPORT_ASSIGN_OR_RETURN(size_t hits, BatchedContains(std::span<const CacheKey>(&key, 1)));
  return hits == 1;
}

Result<std::optional<KvChunk>> RemoteConnector::Get(const CacheKey& key) {
  KVPORT_ASSIGN_OR_RETURN(auto slots, BatchedGet(std::span<const CacheKey>(&key, 1)));
  if (slots.size() != 1) {
    return Status::Internal(fmt::format("BatchedGet returned {} slots for 1 key", slots.size()));
  }
  return std::move(slots[0]);
}

Status RemoteConnector::Put(const CacheKey& key, const KvChunkView& chunk) {
  KVPORT_ASSIGN_OR_RETURN(auto statuses, BatchedPut(std::span<const CacheKey>(&key, 1),
                                                    std::span<const KvChunkView>(&chunk, 1)));
  if (statuses.size() != 1) {
    return Status::Internal(
        fmt::format("BatchedPut returned {} statuses for 1 key", statuses.size()));
  }
  return statuses[0];
}

AsyncConnector::AsyncConnector(RemoteConnector& connector, size_t threads)
    : connector_(connector), executor_(std::make_unique<PriorityExecutor>(threads)) {}

AsyncConnector::~AsyncConnector() = default;

std::future<Result<size_t>> AsyncConnector::Contains(std::vector<CacheKey> keys) {
  return executor_->Submit(TaskPriority::kPeek, [this, keys = std::move(keys)] {
    return connector_.BatchedContains(keys);
  });
}

std::future<Result<std::vector<KvChunk>>> AsyncConnector::GetPrefix(std::vector<CacheKey> keys) {
  return executor_->Submit(TaskPriority::kPrefetch, [this, keys = std::move(keys)] {
    return connector_.BatchedGetPrefix(keys);
  });
}

std::future<Result<std::vector<std::optional<KvChunk>>>> AsyncConnector::Get(
    std::vector<CacheKey> keys) {
  return executor_->Submit(TaskPriority::kGet,
                           [this, keys = std::move(keys)] { return connector_.BatchedGet(keys); });
}

std::future<Result<std::vector<Status>>> AsyncConnector::Put(std::vector<CacheKey> keys,
                                                             std::vector<KvChunkView> chunks) {
  return executor_->Submit(TaskPriority::kPut,
                           [this, keys = std::move(keys), chunks = std::move(chunks)] {
                             return connector_.BatchedPut(keys, chunks);
                           });
}

}  // namespace kvport
