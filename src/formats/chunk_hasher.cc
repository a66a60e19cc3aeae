// SPDX-License-Identifier: Apache-2.0
#include "kvport/chunk_hasher.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t as a complete type: the state lives on the stack
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <bit>
#include <string>

#include "formats/little_endian.h"

namespace kvport {
namespace {

using formats_internal::PutI32LE;
using formats_internal::PutU64LE;

void UpdateU64(XXH3_state_t* state, uint64_t v) {
  uint8_t bytes[8];
  PutU64LE(bytes, v);
  XXH3_64bits_update(state, bytes, sizeof(bytes));
}

void UpdateTokens(XXH3_state_t* state, std::span<const int32_t> tokens) {
  if constexpr (std::endian::native == std::endian::little) {
    // The in-memory representation already is i32le: hash it in place.
    XXH3_64bits_update(state, tokens.data(), tokens.size_bytes());
  } else {
    std::array<uint8_t, 4096> buffer;
    constexpr size_t kPerBlock = buffer.size() / 4;
    for (size_t done = 0; done < tokens.size(); done += kPerBlock) {
      size_t n = std::min(kPerBlock, tokens.size() - done);
      for (size_t i = 0; i < n; ++i)
        PutI32LE(&buffer[4 * i], tokens[done + i]);
      XXH3_64bits_update(state, buffer.data(), 4 * n);
    }
  }
}

}  // namespace

Result<ChunkHasher> ChunkHasher::Create(const ChunkHasherOptions& options) {
  if (options.chunk_size == 0) {
    return Status::InvalidArgument("chunk_size is 0: a chunk must hold at least 1 token");
  }
  return ChunkHasher(options);
}

uint64_t ChunkHasher::HashChunk(uint64_t prev_hash, std::span<const int32_t> chunk,
                                std::span<const std::string> extra_keys) {
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset(&state);
  UpdateU64(&state, prev_hash);
  UpdateU64(&state, chunk.size());
  UpdateTokens(&state, chunk);
  UpdateU64(&state, extra_keys.size());
  for (const std::string& key : extra_keys) {
    UpdateU64(&state, key.size());
    XXH3_64bits_update(&state, key.data(), key.size());
  }
  return XXH3_64bits_digest(&state);
}

std::vector<TokenChunk> ChunkHasher::Chunks(std::span<const int32_t> tokens,
                                            std::span<const std::string> extra_keys) const {
  const size_t chunk_size = options_.chunk_size;
  const size_t end =
      options_.save_unfull_chunk ? tokens.size() : tokens.size() - tokens.size() % chunk_size;
  std::vector<TokenChunk> chunks;
  chunks.reserve((end + chunk_size - 1) / chunk_size);
  uint64_t hash = kInitialHash;
  for (size_t begin = 0; begin < end; begin += chunk_size) {
    size_t chunk_end = std::min(begin + chunk_size, end);
    hash = HashChunk(hash, tokens.subspan(begin, chunk_end - begin), extra_keys);
    chunks.push_back(TokenChunk{begin, chunk_end, hash});
  }
  return chunks;
}

std::vector<uint64_t> ChunkHasher::Hashes(std::span<const int32_t> tokens,
                                          std::span<const std::string> extra_keys) const {
  std::vector<TokenChunk> chunks = Chunks(tokens, extra_keys);
  std::vector<uint64_t> hashes;
  hashes.reserve(chunks.size());
  for (const TokenChunk& c : chunks)
    hashes.push_back(c.hash);
  return hashes;
}

}  // namespace kvport
