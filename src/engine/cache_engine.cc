// SPDX-License-Identifier: Apache-2.0
#include "kvport/cache_engine.h"

#include <fmt/core.h>

#include <atomic>

#include "connector/chunk_check.h"
#include "engine/local_cpu_tier.h"

namespace kvport {

struct CacheEngine::Counters {
  std::atomic<uint64_t> lookups{0};
  std::atomic<uint64_t> local_hit_chunks{0};
  std::atomic<uint64_t> remote_hit_chunks{0};
  std::atomic<uint64_t> stored_chunks{0};
  std::atomic<uint64_t> failed_chunks{0};
};

Result<std::unique_ptr<CacheEngine>> CacheEngine::Create(const CacheEngineOptions& options,
                                                         RemoteConnector* remote) {
  if (options.model_name.empty()) {
    return Status::InvalidArgument("cache engine: model_name is empty");
  }
  if (remote == nullptr && options.local_cpu_bytes == 0) {
    return Status::InvalidArgument(
        "cache engine: no tier to cache in (no remote connector and local_cpu_bytes is 0)");
  }
  KVPORT_ASSIGN_OR_RETURN(ChunkHasher hasher, ChunkHasher::Create(options.chunking));
  CacheKey probe;
  probe.model_name = options.model_name;
  probe.world_size = options.world_size;
  probe.worker_id = options.worker_id;
  KVPORT_RETURN_IF_ERROR(probe.Validate().WithContext("cache engine"));
  return std::unique_ptr<CacheEngine>(new CacheEngine(options, std::move(hasher), remote));
}

CacheEngine::CacheEngine(const CacheEngineOptions& options, ChunkHasher hasher,
                         RemoteConnector* remote)
    : options_(options),
      hasher_(std::move(hasher)),
      remote_(remote),
      local_(options.local_cpu_bytes > 0 ? std::make_unique<LocalCpuTier>(options.local_cpu_bytes)
                                         : nullptr),
      counters_(std::make_unique<Counters>()) {}

CacheEngine::~CacheEngine() = default;

std::vector<TokenChunk> CacheEngine::Chunks(std::span<const int32_t> tokens,
                                            std::span<const std::string> extra_keys) const {
  return hasher_.Chunks(tokens, extra_keys);
}

std::vector<CacheKey> CacheEngine::Keys(std::span<const TokenChunk> chunks) const {
  std::vector<CacheKey> keys(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    keys[i].model_name = options_.model_name;
    keys[i].world_size = options_.world_size;
    keys[i].worker_id = options_.worker_id;
    keys[i].chunk_hash = chunks[i].hash;
    keys[i].dtype = options_.dtype;
  }
  return keys;
}

Result<size_t> CacheEngine::Lookup(std::span<const int32_t> tokens,
                                   std::span<const std::string> extra_keys) {
  counters_->lookups.fetch_add(1, std::memory_order_relaxed);
  const std::vector<TokenChunk> chunks = Chunks(tokens, extra_keys);
  const std::vector<CacheKey> keys = Keys(chunks);
  size_t hits = 0;
  while (local_ && hits < keys.size() && local_->Contains(keys[hits].ToString()))
    ++hits;
  if (remote_ != nullptr && hits < keys.size()) {
    KVPORT_ASSIGN_OR_RETURN(size_t remote_hits,
                            remote_->BatchedContains(std::span(keys).subspan(hits)));
    hits += remote_hits;
  }
  return hits == 0 ? size_t{0} : chunks[hits - 1].end;
}

Result<std::vector<std::shared_ptr<const KvChunk>>> CacheEngine::Retrieve(
    std::span<const int32_t> tokens, std::span<const std::string> extra_keys) {
  const std::vector<TokenChunk> chunks = Chunks(tokens, extra_keys);
  const std::vector<CacheKey> keys = Keys(chunks);
  std::vector<std::shared_ptr<const KvChunk>> out;
  while (local_ && out.size() < keys.size()) {
    std::shared_ptr<const KvChunk> chunk = local_->Get(keys[out.size()].ToString());
    if (!chunk) break;
    out.push_back(std::move(chunk));
  }
  counters_->local_hit_chunks.fetch_add(out.size(), std::memory_order_relaxed);
  if (remote_ != nullptr && out.size() < keys.size()) {
    const size_t first_remote = out.size();
    KVPORT_ASSIGN_OR_RETURN(std::vector<KvChunk> fetched,
                            remote_->BatchedGetPrefix(std::span(keys).subspan(first_remote)));
    counters_->remote_hit_chunks.fetch_add(fetched.size(), std::memory_order_relaxed);
    for (size_t i = 0; i < fetched.size(); ++i) {
      auto chunk = std::make_shared<const KvChunk>(std::move(fetched[i]));
      if (local_) local_->Put(keys[first_remote + i].ToString(), chunk);
      out.push_back(std::move(chunk));
    }
  }
  return out;
}

Result<std::vector<Status>> CacheEngine::Store(std::span<const int32_t> tokens, size_t first_chunk,
                                               std::span<const KvChunkView> chunks,
                                               std::span<const std::string> extra_keys) {
  const std::vector<TokenChunk> all = Chunks(tokens, extra_keys);
  if (first_chunk > all.size() || chunks.size() > all.size() - first_chunk) {
    return Status::InvalidArgument(
        fmt::format("cache engine: {} chunks from chunk {} but the tokens make only {} chunks",
                    chunks.size(), first_chunk, all.size()));
  }
  const std::vector<CacheKey> keys = Keys(std::span(all).subspan(first_chunk, chunks.size()));
  std::vector<Status> out(chunks.size());
  if (remote_ != nullptr) {
    KVPORT_ASSIGN_OR_RETURN(out, remote_->BatchedPut(keys, chunks));
  } else {
    for (size_t i = 0; i < chunks.size(); ++i)
      out[i] = CheckChunkToStore(keys[i].ToString(), chunks[i]);
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (!out[i].ok() || !local_) continue;
    // Without a remote, the local tier is the store and its refusal is the chunk's outcome.
    auto copy = std::make_shared<const KvChunk>(
        KvChunk{*chunks[i].meta, {chunks[i].data.begin(), chunks[i].data.end()}});
    if (!local_->Put(keys[i].ToString(), std::move(copy)) && remote_ == nullptr) {
      out[i] = Status::TooLarge(fmt::format("chunk of {} bytes exceeds the local tier ({} bytes)",
                                            chunks[i].data.size(), local_->capacity_bytes()));
    }
  }
  for (const Status& st : out) {
    (st.ok() ? counters_->stored_chunks : counters_->failed_chunks)
        .fetch_add(1, std::memory_order_relaxed);
  }
  return out;
}

EngineStats CacheEngine::stats() const {
  EngineStats s;
  s.lookups = counters_->lookups.load(std::memory_order_relaxed);
  s.local_hit_chunks = counters_->local_hit_chunks.load(std::memory_order_relaxed);
  s.remote_hit_chunks = counters_->remote_hit_chunks.load(std::memory_order_relaxed);
  s.stored_chunks = counters_->stored_chunks.load(std::memory_order_relaxed);
  s.failed_chunks = counters_->failed_chunks.load(std::memory_order_relaxed);
  return s;
}

}  // namespace kvport
