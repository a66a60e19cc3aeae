// SPDX-License-Identifier: Apache-2.0
// Codec cost per batch: encode and decode of MSET requests and MGET responses, against a memcpy
// of the same descriptor bytes as the in-run baseline (report the ratio, not the absolute).
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "protocol/frame.h"
#include "protocol/messages.h"

namespace kvport::protocol {
namespace {

// LMCache-like keys (model@world@worker@hash@dtype) and a 28-byte RemoteMetadata-sized meta.
struct Batch {
  std::vector<std::string> keys;
  std::string meta = std::string(28, 'm');
  std::string value = std::string(64, 'v');  // payload bytes are never touched by the codec
  MsetRequest mset;
  MgetResponse mget;
};

Batch MakeBatch(int n) {
  Batch b;
  for (int i = 0; i < n; ++i)
    b.keys.push_back("llama-3-8b@1@0@" + std::to_string(0x9e3779b97f4a7c15ull * (i + 1)) +
                     "@bfloat16");
  b.mset.ns = "default";
  b.mget.results.reserve(n);
  for (const std::string& k : b.keys) {
    b.mset.items.push_back({k, b.meta, b.value.size(), b.value.data()});
    b.mget.results.push_back({StatusCode::kOk, b.meta, b.value.size(), b.value.data()});
  }
  return b;
}

void BM_EncodeMsetRequest(benchmark::State& state) {
  const Batch b = MakeBatch(static_cast<int>(state.range(0)));
  EncodedFrame f;
  for (auto _ : state) {
    Status s = EncodeRequest(1, b.mset, Limits{}, &f);
    benchmark::DoNotOptimize(s.ok());
    benchmark::DoNotOptimize(f.head.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(f.head.size()));
}

void BM_DecodeMsetRequest(benchmark::State& state) {
  const Batch b = MakeBatch(static_cast<int>(state.range(0)));
  EncodedFrame f;
  if (!EncodeRequest(1, b.mset, Limits{}, &f).ok()) state.SkipWithError("encode failed");
  FrameHeader h;
  if (!DecodeFrameHeader(f.head, Limits{}, &h).ok()) state.SkipWithError("header failed");
  const std::string_view descriptor = std::string_view(f.head).substr(kFrameHeaderSize);
  MsetRequest out;
  for (auto _ : state) {
    Status s = DecodeFrameHeader(f.head, Limits{}, &h);
    Status d = DecodeRequest(h, descriptor, Limits{}, &out);
    benchmark::DoNotOptimize(s.ok() && d.ok());
    benchmark::DoNotOptimize(out.items.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(f.head.size()));
}

void BM_DecodeMgetResponse(benchmark::State& state) {
  const Batch b = MakeBatch(static_cast<int>(state.range(0)));
  EncodedFrame f;
  if (!EncodeResponse(1, b.mget, Limits{}, &f).ok()) state.SkipWithError("encode failed");
  FrameHeader h;
  if (!DecodeFrameHeader(f.head, Limits{}, &h).ok()) state.SkipWithError("header failed");
  const std::string_view descriptor = std::string_view(f.head).substr(kFrameHeaderSize);
  MgetResponse out;
  for (auto _ : state) {
    Status d = DecodeResponse(h, descriptor, Limits{}, &out);
    benchmark::DoNotOptimize(d.ok());
    benchmark::DoNotOptimize(out.results.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(f.head.size()));
}

// Baseline: copying the same header+descriptor bytes once.
void BM_MemcpyMsetHead(benchmark::State& state) {
  const Batch b = MakeBatch(static_cast<int>(state.range(0)));
  EncodedFrame f;
  if (!EncodeRequest(1, b.mset, Limits{}, &f).ok()) state.SkipWithError("encode failed");
  std::string copy(f.head.size(), '\0');
  for (auto _ : state) {
    std::memcpy(copy.data(), f.head.data(), f.head.size());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(f.head.size()));
}

BENCHMARK(BM_EncodeMsetRequest)->Arg(1)->Arg(64)->Arg(4096);
BENCHMARK(BM_DecodeMsetRequest)->Arg(1)->Arg(64)->Arg(4096);
BENCHMARK(BM_DecodeMgetResponse)->Arg(64)->Arg(4096);
BENCHMARK(BM_MemcpyMsetHead)->Arg(64)->Arg(4096);

}  // namespace
}  // namespace kvport::protocol
