// SPDX-License-Identifier: Apache-2.0
// CacheEngine: token ids in, cached KV chunks out — the part of LMCache an inference engine
// calls, in C++.
//
// The engine cuts a request's tokens into chunks (ChunkHasher), names each chunk with a CacheKey
// (model, world size, worker, chunk hash, dtype), and keeps chunks in up to two tiers: an
// optional local CPU tier (LRU, max_local_cpu_size bytes) in front of a remote connector
// (e.g. eic://). Because each chunk hash covers the whole prefix before it, the cached part of a
// request is always a prefix: Lookup counts the leading chunks found, Retrieve returns them.
//
// Threading: every method may be called from many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvport/cache_key.h"
#include "kvport/chunk_hasher.h"
#include "kvport/connector.h"
#include "kvport/export.h"
#include "kvport/status.h"

namespace kvport {

class LocalCpuTier;

struct KVPORT_API CacheEngineOptions {
  std::string model_name;  // the first field of every key
  int32_t world_size = 1;
  int32_t worker_id = 0;
  KeyDtype dtype = KeyDtype::kBfloat16;
  ChunkHasherOptions chunking;   // chunk_size, save_unfull_chunk
  uint64_t local_cpu_bytes = 0;  // capacity of the local CPU tier; 0 = no local tier
};

struct KVPORT_API EngineStats {
  uint64_t lookups = 0;
  uint64_t local_hit_chunks = 0;   // chunks served by the local tier
  uint64_t remote_hit_chunks = 0;  // chunks served by the remote tier
  uint64_t stored_chunks = 0;      // chunks accepted by the remote (or local when no remote)
  uint64_t failed_chunks = 0;      // chunks a tier refused (no space, errors)
};

class KVPORT_API CacheEngine {
 public:
  // `remote` may be null (local tier only) and must outlive the engine. InvalidArgument for an
  // empty model name, bad chunking options, or neither tier configured.
  static Result<std::unique_ptr<CacheEngine>> Create(const CacheEngineOptions& options,
                                                     RemoteConnector* remote);
  ~CacheEngine();

  // The chunks of `tokens` and their keys (one key per chunk, in order).
  std::vector<TokenChunk> Chunks(std::span<const int32_t> tokens,
                                 std::span<const std::string> extra_keys = {}) const;
  std::vector<CacheKey> Keys(std::span<const TokenChunk> chunks) const;

  // How many leading tokens of `tokens` are cached (a multiple of chunk_size, or all tokens
  // when save_unfull_chunk covered the tail). Local tier first, then the remote for the rest.
  Result<size_t> Lookup(std::span<const int32_t> tokens,
                        std::span<const std::string> extra_keys = {});

  // The cached leading chunks of `tokens`, in order (what Lookup counted, unless it changed
  // meanwhile). Chunks read from the remote are also kept in the local tier. Chunks are shared
  // with the local tier, never copied out of it.
  Result<std::vector<std::shared_ptr<const KvChunk>>> Retrieve(
      std::span<const int32_t> tokens, std::span<const std::string> extra_keys = {});

  // Stores chunks for the chunks of `tokens` starting at chunk index `first_chunk` (chunks
  // before it are already cached): chunks[i] belongs to chunk first_chunk + i. Writes the local
  // tier and the remote (one batched put). Returns one Status per given chunk: a chunk the
  // remote refused is reported, never as success.
  Result<std::vector<Status>> Store(std::span<const int32_t> tokens, size_t first_chunk,
                                    std::span<const KvChunkView> chunks,
                                    std::span<const std::string> extra_keys = {});

  EngineStats stats() const;
  const CacheEngineOptions& options() const { return options_; }

 private:
  CacheEngine(const CacheEngineOptions& options, ChunkHasher hasher, RemoteConnector* remote);

  struct Counters;
  CacheEngineOptions options_;
  ChunkHasher hasher_;
  RemoteConnector* remote_;
  std::unique_ptr<LocalCpuTier> local_;  // null when local_cpu_bytes == 0
  std::unique_ptr<Counters> counters_;
};

}  // namespace kvport
