// SPDX-License-Identifier: Apache-2.0
#include "kvport/cache_engine.h"

#include <gtest/gtest.h>

#include <numeric>

#include "../connector/chunk_fixture.h"
#include "kvport/connector.h"

namespace kvport {
namespace {

using testing::KvChunkOf;
using testing::OwnedChunk;

std::vector<int32_t> Tokens(size_t n, int32_t first = 0) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

CacheEngineOptions Options(uint64_t local_bytes) {
  CacheEngineOptions o;
  o.model_name = "test/engine";
  o.chunking.chunk_size = 4;
  o.local_cpu_bytes = local_bytes;
  return o;
}

// Stores one chunk per complete chunk of `tokens`, starting at chunk `first`.
std::vector<OwnedChunk> StoreAll(CacheEngine& engine, std::span<const int32_t> tokens,
                                 size_t first) {
  const size_t n = engine.Chunks(tokens).size();
  std::vector<OwnedChunk> chunks;
  std::vector<KvChunkView> views;
  for (size_t i = first; i < n; ++i)
    chunks.push_back(KvChunkOf(1, 4, 8, i + 1));
  for (const auto& c : chunks)
    views.push_back(c.view());
  auto statuses = engine.Store(tokens, first, views);
  EXPECT_TRUE(statuses.ok()) << statuses.status().ToString();
  if (statuses.ok()) {
    for (const Status& st : *statuses)
      EXPECT_TRUE(st.ok()) << st.ToString();
  }
  return chunks;
}

TEST(CacheEngineTest, RejectsMissingTiersAndBadOptions) {
  EXPECT_EQ(CacheEngine::Create(Options(0), nullptr).status().code(), StatusCode::kInvalidArgument);
  CacheEngineOptions no_model = Options(1 << 20);
  no_model.model_name.clear();
  EXPECT_FALSE(CacheEngine::Create(no_model, nullptr).ok());
  CacheEngineOptions zero_chunk = Options(1 << 20);
  zero_chunk.chunking.chunk_size = 0;
  EXPECT_FALSE(CacheEngine::Create(zero_chunk, nullptr).ok());
}

TEST(CacheEngineTest, SharedPrefixIsFoundThroughTheRemote) {
  auto remote = CreateConnector("mem://engine-prefix", {});
  ASSERT_TRUE(remote.ok());
  auto engine = CacheEngine::Create(Options(0), remote->get());
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();

  std::vector<int32_t> first = Tokens(10);  // chunks [0,4) [4,8); 2 tail tokens dropped
  EXPECT_EQ(*(*engine)->Lookup(first), 0u);
  auto stored = StoreAll(**engine, first, 0);
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_EQ(*(*engine)->Lookup(first), 8u);

  // A second request shares the first 6 tokens: only the first chunk matches.
  std::vector<int32_t> second = Tokens(12);
  second[6] = 999;
  EXPECT_EQ(*(*engine)->Lookup(second), 4u);
  auto got = (*engine)->Retrieve(second);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0]->data, stored[0].data);
  // Different extra keys (e.g. another LoRA) share nothing.
  std::vector<std::string> lora{"lora-a"};
  EXPECT_EQ(*(*engine)->Lookup(first, lora), 0u);
}

TEST(CacheEngineTest, LocalTierServesRepeatsAndPromotesRemoteHits) {
  auto remote = CreateConnector("mem://engine-local", {});
  ASSERT_TRUE(remote.ok());
  auto engine = CacheEngine::Create(Options(1 << 20), remote->get());
  ASSERT_TRUE(engine.ok());
  std::vector<int32_t> tokens = Tokens(16);
  auto stored = StoreAll(**engine, tokens, 0);
  auto got = (*engine)->Retrieve(tokens);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 4u);
  EXPECT_EQ((*engine)->stats().local_hit_chunks, 4u);
  EXPECT_EQ((*engine)->stats().remote_hit_chunks, 0u);

  // A second engine with an empty local tier reads from the remote, then locally.
  auto other = CacheEngine::Create(Options(1 << 20), remote->get());
  ASSERT_TRUE(other.ok());
  ASSERT_EQ((*other)->Retrieve(tokens)->size(), 4u);
  EXPECT_EQ((*other)->stats().remote_hit_chunks, 4u);
  ASSERT_EQ((*other)->Retrieve(tokens)->size(), 4u);
  EXPECT_EQ((*other)->stats().local_hit_chunks, 4u);
  EXPECT_EQ((*(*other)->Retrieve(tokens))[3]->data, stored[3].data);
}

TEST(CacheEngineTest, LocalOnlyEvictsLeastRecentlyUsed) {
  // Room for two 128-byte chunks.
  auto engine = CacheEngine::Create(Options(256), nullptr);
  ASSERT_TRUE(engine.ok());
  std::vector<int32_t> tokens = Tokens(12);  // three chunks
  StoreAll(**engine, tokens, 0);
  // The third chunk evicted the first, which breaks the prefix.
  EXPECT_EQ(*(*engine)->Lookup(tokens), 0u);
}

TEST(CacheEngineTest, StoreChecksChunkIndexes) {
  auto engine = CacheEngine::Create(Options(1 << 20), nullptr);
  ASSERT_TRUE(engine.ok());
  std::vector<int32_t> tokens = Tokens(8);
  OwnedChunk c = KvChunkOf(1, 4, 8, 1);
  std::vector<KvChunkView> views{c.view(), c.view()};
  EXPECT_EQ((*engine)->Store(tokens, 1, views).status().code(), StatusCode::kInvalidArgument);
  auto partial = (*engine)->Store(tokens, 1, std::span(views).first(1));
  ASSERT_TRUE(partial.ok());
  EXPECT_TRUE((*partial)[0].ok());
  EXPECT_EQ(*(*engine)->Lookup(tokens), 0u);  // chunk 0 is still missing
}

}  // namespace
}  // namespace kvport
