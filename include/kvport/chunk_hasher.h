// SPDX-License-Identifier: Apache-2.0
// ChunkHasher: token ids -> a chain of chunk hashes, the identity of each chunk of KV cache.
//
// Tokens are cut into chunks of chunk_size; chunk i's hash covers the previous chunk's hash, so
// it names the whole prefix tokens[0, (i+1) * chunk_size). Two sequences that share a prefix
// therefore share exactly the hashes of the complete chunks inside that prefix, and nothing
// after the first chunk where they differ.
//
// The hash is defined byte for byte and is the same in every process, run and machine (no seed,
// no pointer or host byte order involved). For chunk i with tokens t_0 .. t_{n-1} and the
// request's extra keys k_0 .. k_{m-1}:
//
//   h_i = XXH3_64bits(                            (xxHash >= 0.8.0, seed 0)
//           u64le(h_{i-1})                        h_{-1} = kInitialHash = 0
//           u64le(n)  i32le(t_0) ... i32le(t_{n-1})
//           u64le(m)  for each k_j: u64le(len(k_j)) bytes(k_j))
//
// where u64le / i32le are 8 / 4 bytes little-endian (two's complement for i32). Every variable
// part is length-prefixed, so distinct inputs never produce the same byte string. docs/formats.md
// has a worked example that tests/engine/chunk_hasher_test.cc checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kvport/export.h"
#include "kvport/status.h"

namespace kvport {

struct KVPORT_API ChunkHasherOptions {
  // Tokens per chunk (LMCache's chunk_size). Must be >= 1.
  uint32_t chunk_size = 256;
  // Also hash a trailing chunk with fewer than chunk_size tokens (LMCache's save_unfull_chunk).
  // Its hash differs from the hash of any complete chunk (the token count is hashed).
  bool save_unfull_chunk = false;
};

// One chunk: tokens [begin, end) of the sequence, and the chain hash that ends with them.
struct KVPORT_API TokenChunk {
  size_t begin = 0;
  size_t end = 0;
  uint64_t hash = 0;
  bool operator==(const TokenChunk&) const = default;
};

class KVPORT_API ChunkHasher {
 public:
  // The h_{-1} that the first chunk chains from.
  static constexpr uint64_t kInitialHash = 0;

  // InvalidArgument when chunk_size is 0.
  static Result<ChunkHasher> Create(const ChunkHasherOptions& options);

  const ChunkHasherOptions& options() const { return options_; }

  // The chunks of `tokens`, in order. `extra_keys` (e.g. a LoRA name, a cache salt, multimodal
  // input hashes) enter every chunk's hash, so any change to them changes every hash. Token ids
  // are int32 as most engines keep them; a negative id is hashed like any other value.
  std::vector<TokenChunk> Chunks(std::span<const int32_t> tokens,
                                 std::span<const std::string> extra_keys = {}) const;
  // Only the hashes of Chunks().
  std::vector<uint64_t> Hashes(std::span<const int32_t> tokens,
                               std::span<const std::string> extra_keys = {}) const;

  // One link of the chain: the hash of `chunk` after `prev_hash` (the definition above). Lets a
  // caller extend a chain as tokens arrive without rehashing the prefix.
  static uint64_t HashChunk(uint64_t prev_hash, std::span<const int32_t> chunk,
                            std::span<const std::string> extra_keys = {});

 private:
  explicit ChunkHasher(const ChunkHasherOptions& options) : options_(options) {}

  ChunkHasherOptions options_;
};

}  // namespace kvport
