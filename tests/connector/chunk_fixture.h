// SPDX-License-Identifier: Apache-2.0
// Test chunks: metadata for a given shape and a payload whose bytes depend on a seed, so a test
// can tell every chunk's bytes apart and check them after a round trip.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvport/cache_key.h"
#include "kvport/connector.h"

namespace kvport::testing {

struct OwnedChunk {
  RemoteMetadata meta;
  std::vector<uint8_t> data;
  KvChunkView view() const { return KvChunkView{&meta, data}; }
};

inline std::vector<uint8_t> SeededBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<uint8_t>(x);
  }
  return out;
}

// A KV_2LTD chunk: [2, layers, tokens, hidden] in bf16 (one group).
inline OwnedChunk KvChunkOf(int layers, int tokens, int hidden, uint64_t seed) {
  auto meta = RemoteMetadata::ForGroups(
      MemoryFormat::kKv2LTD,
      {MetadataGroup{MetadataDtype::kBfloat16, {2, layers, tokens, hidden}}});
  EXPECT_TRUE(meta.ok()) << meta.status().ToString();
  OwnedChunk c{*meta, {}};
  c.data = SeededBytes(static_cast<size_t>(c.meta.length), seed);
  return c;
}

// An MLA-style chunk with three groups in different dtypes: bf16 latent KV, fp8 rope, fp32
// indexer.
inline OwnedChunk MlaChunkOf(int layers, int tokens, uint64_t seed) {
  auto meta = RemoteMetadata::ForGroups(
      MemoryFormat::kKvMlaFmt, {MetadataGroup{MetadataDtype::kBfloat16, {1, layers, tokens, 512}},
                                MetadataGroup{MetadataDtype::kFp8E4m3fn, {1, layers, tokens, 64}},
                                MetadataGroup{MetadataDtype::kFloat32, {1, 1, tokens, 128}}});
  EXPECT_TRUE(meta.ok()) << meta.status().ToString();
  OwnedChunk c{*meta, {}};
  c.data = SeededBytes(static_cast<size_t>(c.meta.length), seed);
  return c;
}

inline CacheKey KeyOf(uint64_t hash, const std::string& model = "test/model") {
  CacheKey k;
  k.model_name = model;
  k.world_size = 1;
  k.worker_id = 0;
  k.chunk_hash = hash;
  k.dtype = KeyDtype::kBfloat16;
  return k;
}

}  // namespace kvport::testing
