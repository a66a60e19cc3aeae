// SPDX-License-Identifier: Apache-2.0
#include "kvport/chunk_hasher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace kvport {
namespace {

ChunkHasher MakeHasher(uint32_t chunk_size, bool save_unfull_chunk = false) {
  Result<ChunkHasher> h = ChunkHasher::Create({chunk_size, save_unfull_chunk});
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return std::move(h).value();
}

// Deterministic pseudo-random token ids (a 32-bit LCG), so tests need no fixtures.
std::vector<int32_t> Tokens(size_t n, uint32_t seed) {
  std::vector<int32_t> out(n);
  uint32_t x = seed;
  for (auto& t : out) {
    x = x * 1664525u + 1013904223u;
    t = static_cast<int32_t>(x >> 15);  // 0 .. 131071, like a real vocabulary
  }
  return out;
}

void AppendU64LE(std::vector<uint8_t>& buf, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    buf.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

TEST(ChunkHasherTest, ByteLayoutMatchesTheDocumentedDefinition) {
  // Written out by hand from the definition in chunk_hasher.h, not from the implementation.
  const std::vector<int32_t> tokens = {1, 2, 3, -1, 0x01020304};
  const std::vector<std::string> extra = {"lora:a", ""};
  std::vector<uint8_t> buf = {
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // h_{-1} = 0
      0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 5 tokens
      0x01, 0x00, 0x00, 0x00,                          // 1
      0x02, 0x00, 0x00, 0x00,                          // 2
      0x03, 0x00, 0x00, 0x00,                          // 3
      0xff, 0xff, 0xff, 0xff,                          // -1
      0x04, 0x03, 0x02, 0x01,                          // 0x01020304
      0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 2 extra keys
      0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // len("lora:a")
      'l',  'o',  'r',  'a',  ':',  'a',               //
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // len("")
  };
  const uint64_t h0 = XXH3_64bits(buf.data(), buf.size());
  EXPECT_EQ(ChunkHasher::HashChunk(0, tokens, extra), h0);

  // The next link starts with h0 as 8 little-endian bytes.
  const std::vector<int32_t> tokens2 = {7};
  std::vector<uint8_t> buf2;
  AppendU64LE(buf2, h0);
  buf2.insert(buf2.end(), {0x01, 0, 0, 0, 0, 0, 0, 0, 0x07, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(ChunkHasher::HashChunk(h0, tokens2), XXH3_64bits(buf2.data(), buf2.size()));

  // The hasher chains these links.
  ChunkHasher hasher = MakeHasher(5, /*save_unfull_chunk=*/true);
  std::vector<int32_t> all = tokens;
  all.push_back(7);
  std::vector<TokenChunk> chunks = hasher.Chunks(all, extra);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0], (TokenChunk{0, 5, h0}));
  EXPECT_EQ(chunks[1].hash, ChunkHasher::HashChunk(h0, tokens2, extra));
}

TEST(ChunkHasherTest, FixedValuesAreStableAcrossRunsAndMachines) {
  // Computed once on x86-64 by a separate C program that built each byte string by hand and
  // called XXH3_64bits on it, then pinned: any change to the algorithm, the byte order or
  // xxHash's output breaks this test on every architecture it runs on (aarch64 included).
  // docs/formats.md shows the first example.
  ChunkHasher small = MakeHasher(4, /*save_unfull_chunk=*/true);
  const std::vector<int32_t> ten = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_THAT(
      small.Hashes(ten),
      ::testing::ElementsAre(0xa3f5e3a34b01943bULL, 0xe5ff5fc079e00632ULL, 0xffcab2ecba7b6b8cULL));

  ChunkHasher standard = MakeHasher(256);
  std::vector<int32_t> ramp(1024);
  std::iota(ramp.begin(), ramp.end(), 0);
  EXPECT_THAT(standard.Hashes(ramp),
              ::testing::ElementsAre(0x1f61f9f76bec3d26ULL, 0x21a82e6885f2afc5ULL,
                                     0x82680c746c2a1406ULL, 0xa12c26a3f38daf6dULL));

  const std::vector<std::string> extra = {"lora:adapter-7"};
  EXPECT_THAT(standard.Hashes(ramp, extra),
              ::testing::ElementsAre(0x57f7fdfde763e4c0ULL, 0xc19f6b3a899b2033ULL,
                                     0xab42aa91a76809d4ULL, 0x95e8d9648ec2f20cULL));
}

TEST(ChunkHasherTest, ChunkBoundaries) {
  ChunkHasher hasher = MakeHasher(256);
  std::vector<TokenChunk> chunks = hasher.Chunks(Tokens(1000, 1));
  ASSERT_EQ(chunks.size(), 3u);  // 1000 = 3 * 256 + 232: the partial chunk is dropped
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].begin, 256 * i);
    EXPECT_EQ(chunks[i].end, 256 * (i + 1));
  }
  EXPECT_EQ(hasher.Hashes(Tokens(1000, 1)).size(), 3u);
  EXPECT_EQ(hasher.options().chunk_size, 256u);
  EXPECT_FALSE(hasher.options().save_unfull_chunk);
}

TEST(ChunkHasherTest, DefaultsAreLMCaches) {
  ChunkHasherOptions options;
  EXPECT_EQ(options.chunk_size, 256u);
  EXPECT_FALSE(options.save_unfull_chunk);
}

TEST(ChunkHasherTest, SharedPrefixSharesExactlyTheCompleteChunksInIt) {
  ChunkHasher hasher = MakeHasher(256);
  const std::vector<int32_t> a = Tokens(1280, 7);  // 5 chunks
  for (size_t diverge_at :
       {size_t{0}, size_t{1}, size_t{255}, size_t{256}, size_t{600}, size_t{768}, size_t{1279}}) {
    std::vector<int32_t> b = a;
    b[diverge_at] += 1;
    std::vector<uint64_t> ha = hasher.Hashes(a);
    std::vector<uint64_t> hb = hasher.Hashes(b);
    ASSERT_EQ(ha.size(), 5u);
    ASSERT_EQ(hb.size(), 5u);
    const size_t shared = diverge_at / 256;  // complete chunks before the first difference
    for (size_t i = 0; i < ha.size(); ++i) {
      if (i < shared) {
        EXPECT_EQ(ha[i], hb[i]) << "chunk " << i << ", diverging at " << diverge_at;
      } else {
        EXPECT_NE(ha[i], hb[i]) << "chunk " << i << ", diverging at " << diverge_at;
      }
    }
  }
}

TEST(ChunkHasherTest, ExtendingASequenceKeepsItsHashes) {
  ChunkHasher hasher = MakeHasher(256);
  const std::vector<int32_t> long_seq = Tokens(2000, 3);
  const std::vector<int32_t> short_seq(long_seq.begin(), long_seq.begin() + 700);
  std::vector<uint64_t> hl = hasher.Hashes(long_seq);
  std::vector<uint64_t> hs = hasher.Hashes(short_seq);
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[0], hl[0]);
  EXPECT_EQ(hs[1], hl[1]);
}

TEST(ChunkHasherTest, IncrementalChainEqualsWholeSequence) {
  ChunkHasher hasher = MakeHasher(64);
  const std::vector<int32_t> tokens = Tokens(64 * 5, 11);
  const std::vector<std::string> extra = {"salt"};
  std::vector<uint64_t> whole = hasher.Hashes(tokens, extra);
  uint64_t h = ChunkHasher::kInitialHash;
  for (size_t i = 0; i < 5; ++i) {
    h = ChunkHasher::HashChunk(h, std::span(tokens).subspan(64 * i, 64), extra);
    EXPECT_EQ(h, whole[i]);
  }
}

TEST(ChunkHasherTest, PartialChunkHandling) {
  const std::vector<int32_t> tokens = Tokens(600, 5);  // 2 complete chunks + 88 tokens
  ChunkHasher drop = MakeHasher(256, false);
  ChunkHasher keep = MakeHasher(256, true);
  std::vector<TokenChunk> dropped = drop.Chunks(tokens);
  std::vector<TokenChunk> kept = keep.Chunks(tokens);
  ASSERT_EQ(dropped.size(), 2u);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0], dropped[0]);
  EXPECT_EQ(kept[1], dropped[1]);
  EXPECT_EQ(kept[2].begin, 512u);
  EXPECT_EQ(kept[2].end, 600u);
  EXPECT_EQ(kept[2].hash, ChunkHasher::HashChunk(kept[1].hash, std::span(tokens).subspan(512, 88)));

  // The partial chunk's hash is not the hash of the complete chunk it grows into.
  std::vector<int32_t> longer = tokens;
  longer.resize(768, 42);
  std::vector<TokenChunk> full = keep.Chunks(longer);
  ASSERT_EQ(full.size(), 3u);
  EXPECT_EQ(full[1].hash, kept[1].hash);
  EXPECT_NE(full[2].hash, kept[2].hash);

  // Fewer tokens than one chunk; and no tokens at all.
  EXPECT_TRUE(drop.Chunks(Tokens(255, 1)).empty());
  ASSERT_EQ(keep.Chunks(Tokens(255, 1)).size(), 1u);
  EXPECT_EQ(keep.Chunks(Tokens(255, 1))[0].end, 255u);
  EXPECT_TRUE(drop.Chunks({}).empty());
  EXPECT_TRUE(keep.Chunks({}).empty());
  // A multiple of chunk_size has no partial chunk either way.
  EXPECT_EQ(keep.Chunks(Tokens(512, 1)), drop.Chunks(Tokens(512, 1)));
}

TEST(ChunkHasherTest, ExtraKeysChangeEveryHash) {
  ChunkHasher hasher = MakeHasher(128);
  const std::vector<int32_t> tokens = Tokens(128 * 4, 9);
  const std::vector<uint64_t> none = hasher.Hashes(tokens);
  const std::vector<std::vector<std::string>> variants = {
      {"lora-a"}, {"lora-b"}, {""}, {"ab", "c"}, {"a", "bc"}, {"abc"}, {"lora-a", "salt"}};
  std::vector<std::vector<uint64_t>> results = {none};
  for (const auto& extra : variants)
    results.push_back(hasher.Hashes(tokens, extra));
  // Every pair of distinct extra-key lists differs at every chunk position.
  for (size_t x = 0; x < results.size(); ++x) {
    for (size_t y = x + 1; y < results.size(); ++y) {
      for (size_t i = 0; i < 4; ++i) {
        EXPECT_NE(results[x][i], results[y][i]) << "variants " << x << " and " << y;
      }
    }
  }
  // And the same extra keys give the same hashes.
  EXPECT_EQ(hasher.Hashes(tokens, variants[0]), results[1]);
}

TEST(ChunkHasherTest, TokenValuesAreNotConfusedWithExtraKeyBytes) {
  // {5} + extra "" vs {5, 0} + no extras: without length prefixes these could collide.
  const std::vector<int32_t> one = {5};
  const std::vector<int32_t> two = {5, 0};
  const std::vector<std::string> empty_key = {""};
  EXPECT_NE(ChunkHasher::HashChunk(0, one, empty_key), ChunkHasher::HashChunk(0, two));
  EXPECT_NE(ChunkHasher::HashChunk(0, one), ChunkHasher::HashChunk(1, one));
}

TEST(ChunkHasherTest, ZeroChunkSizeIsAnError) {
  Result<ChunkHasher> h = ChunkHasher::Create({0, false});
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(h.status().message(), ::testing::HasSubstr("chunk_size is 0"));
}

TEST(ChunkHasherTest, ChunkSizeOneAndHuge) {
  ChunkHasher one = MakeHasher(1);
  EXPECT_EQ(one.Chunks(Tokens(10, 2)).size(), 10u);
  ChunkHasher huge = MakeHasher(UINT32_MAX, true);
  std::vector<TokenChunk> c = huge.Chunks(Tokens(10, 2));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].end, 10u);
}

}  // namespace
}  // namespace kvport
