// SPDX-License-Identifier: Apache-2.0
// Micro-benchmarks of the engine's naming path: chunk hashing and CacheKey text.
//
// Reported per call; BM_ChunkHasher also as bytes/s of token data (4 bytes per token), to set
// against memcpy on the same machine (BM_MemcpyTokens): hashing should not be the bottleneck of
// a request whose KV cache is many thousands of times larger than its token ids.

#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "kvport/cache_key.h"
#include "kvport/chunk_hasher.h"

namespace kvport {
namespace {

std::vector<int32_t> Tokens(size_t n) {
  std::vector<int32_t> out(n);
  uint32_t x = 12345;
  for (auto& t : out) {
    x = x * 1664525u + 1013904223u;
    t = static_cast<int32_t>(x >> 15);
  }
  return out;
}

void BM_ChunkHasher(benchmark::State& state) {
  const std::vector<int32_t> tokens = Tokens(static_cast<size_t>(state.range(0)));
  Result<ChunkHasher> hasher = ChunkHasher::Create({256, false});
  if (!hasher.ok()) {
    state.SkipWithError(hasher.status().ToString().c_str());
    return;
  }
  for (auto _ : state)
    benchmark::DoNotOptimize(hasher->Chunks(tokens));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(tokens.size() * 4));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(tokens.size() / 256));
}
BENCHMARK(BM_ChunkHasher)->Arg(4096)->Arg(32768)->Arg(131072);

void BM_ChunkHasherWithExtraKeys(benchmark::State& state) {
  const std::vector<int32_t> tokens = Tokens(32768);
  const std::vector<std::string> extra = {"lora:adapter-7", "salt:0123456789abcdef"};
  Result<ChunkHasher> hasher = ChunkHasher::Create({256, false});
  if (!hasher.ok()) {
    state.SkipWithError(hasher.status().ToString().c_str());
    return;
  }
  for (auto _ : state)
    benchmark::DoNotOptimize(hasher->Chunks(tokens, extra));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(tokens.size() * 4));
}
BENCHMARK(BM_ChunkHasherWithExtraKeys);

void BM_MemcpyTokens(benchmark::State& state) {
  const std::vector<int32_t> tokens = Tokens(static_cast<size_t>(state.range(0)));
  std::vector<int32_t> copy(tokens.size());
  for (auto _ : state) {
    std::memcpy(copy.data(), tokens.data(), tokens.size() * 4);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(tokens.size() * 4));
}
BENCHMARK(BM_MemcpyTokens)->Arg(32768);

void BM_HashOneChunk(benchmark::State& state) {
  const std::vector<int32_t> tokens = Tokens(256);
  uint64_t h = 0;
  for (auto _ : state) {
    h = ChunkHasher::HashChunk(h, tokens);
    benchmark::DoNotOptimize(h);
  }
}
BENCHMARK(BM_HashOneChunk);

CacheKey SampleKey() {
  CacheKey key;
  key.model_name = "meta-llama/Llama-3.1-8B-Instruct";
  key.world_size = 8;
  key.worker_id = 3;
  key.chunk_hash = 0x9e3779b97f4a7c15;
  key.dtype = KeyDtype::kBfloat16;
  return key;
}

void BM_CacheKeyToString(benchmark::State& state) {
  CacheKey key = SampleKey();
  if (state.range(0) != 0) {
    key.layer_id = 31;
    key.tags = {{"lora", "adapter-7"}};
  }
  for (auto _ : state)
    benchmark::DoNotOptimize(key.ToString());
}
BENCHMARK(BM_CacheKeyToString)->Arg(0)->Arg(1);

void BM_CacheKeyParse(benchmark::State& state) {
  CacheKey key = SampleKey();
  if (state.range(0) != 0) {
    key.layer_id = 31;
    key.tags = {{"lora", "adapter-7"}};
  }
  const std::string text = key.ToString();
  for (auto _ : state) {
    Result<CacheKey> parsed = CacheKey::Parse(text);
    if (!parsed.ok()) {
      state.SkipWithError(parsed.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(parsed);
  }
}
BENCHMARK(BM_CacheKeyParse)->Arg(0)->Arg(1);

}  // namespace
}  // namespace kvport
