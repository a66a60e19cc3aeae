// SPDX-License-Identifier: Apache-2.0
// Micro-benchmarks of the store: the allocator alone, the put/lookup paths, and eviction under
// capacity pressure. Read them as ratios: BM_PutWithCopy vs BM_MemcpyBaseline is the store's
// overhead over the copy the server must do anyway.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kvport/log.h"
#include "store/extent_allocator.h"
#include "store/object_store.h"

namespace kvport::store {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

std::unique_ptr<ObjectStore> MakeBenchStore(uint64_t capacity) {
  log::SetLevel(log::Level::kWarn);
  StoreOptions options;
  options.capacity_bytes = capacity;
  auto store = ObjectStore::Create(options);
  return store.ok() ? std::move(store).value() : nullptr;
}

std::string KeyOf(uint64_t i) {
  return "chunk-" + std::to_string(i);
}

// Allocate + free of one KV-chunk-sized extent next to a fragmented population of live ones.
void BM_AllocateFree(benchmark::State& state) {
  const uint64_t bytes = static_cast<uint64_t>(state.range(0));
  auto allocator = std::move(ExtentAllocator::Create(4096 * kMiB, 4096)).value();
  std::vector<Extent> live;
  for (int i = 0; i < 2000; ++i) {
    if (auto e = allocator->Allocate((i % 7 + 1) * 256 * kKiB)) live.push_back(*e);
  }
  for (size_t i = 0; i < live.size(); i += 2)
    (void)allocator->Free(live[i]);
  for (auto _ : state) {
    auto e = allocator->Allocate(bytes);
    if (!e) {
      state.SkipWithError("allocation failed");
      break;
    }
    benchmark::DoNotOptimize(e->offset);
    (void)allocator->Free(*e);
  }
  state.counters["free_extents"] = static_cast<double>(allocator->Stats().free_extents);
}
BENCHMARK(BM_AllocateFree)->Arg(128 * kKiB)->Arg(2 * kMiB)->Arg(16 * kMiB);

// Reserve + Commit over 1024 keys that fit: the metadata cost of a put, no value copy.
void BM_ReserveCommit(benchmark::State& state) {
  const uint64_t bytes = static_cast<uint64_t>(state.range(0));
  auto store = MakeBenchStore(1024 * bytes + 64 * kMiB);
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < 1024; ++i)
    keys.push_back(KeyOf(i));
  uint64_t i = 0;
  for (auto _ : state) {
    auto w = store->Reserve("bench", keys[i++ % keys.size()], bytes, "meta", kNoExpiry);
    if (!w.ok() || !store->Commit(std::move(*w)).ok()) {
      state.SkipWithError("put failed");
      break;
    }
  }
}
BENCHMARK(BM_ReserveCommit)->Arg(256 * kKiB)->Arg(2 * kMiB);

// The copy the server must do anyway, for comparison with BM_PutWithCopy.
void BM_MemcpyBaseline(benchmark::State& state) {
  const uint64_t bytes = static_cast<uint64_t>(state.range(0));
  // Destinations rotate over 128 buffers, like the puts over 128 keys, so both copy into
  // memory that is not in cache.
  std::vector<uint8_t> src(bytes, 1);
  std::vector<std::vector<uint8_t>> dst(128, std::vector<uint8_t>(bytes, 0));
  uint64_t i = 0;
  for (auto _ : state) {
    std::memcpy(dst[i++ % dst.size()].data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_MemcpyBaseline)->Arg(1 * kMiB);

// Reserve, fill from a buffer, Commit: a put as the server does it (without the socket).
void BM_PutWithCopy(benchmark::State& state) {
  const uint64_t bytes = static_cast<uint64_t>(state.range(0));
  auto store = MakeBenchStore(160 * bytes);
  std::vector<uint8_t> src(bytes, 1);
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < 128; ++i)
    keys.push_back(KeyOf(i));
  // Warm-up: write every key twice so that every page a put can land on has been faulted in
  // (first-touch page faults are a one-time cost of the lazily committed arena, not a put's).
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::string& key : keys) {
      auto w = store->Reserve("bench", key, bytes, "meta", kNoExpiry);
      if (!w.ok()) break;
      std::memcpy(w->data(), src.data(), bytes);
      (void)store->Commit(std::move(*w));
    }
  }
  uint64_t i = 0;
  for (auto _ : state) {
    auto w = store->Reserve("bench", keys[i++ % keys.size()], bytes, "meta", kNoExpiry);
    if (!w.ok()) {
      state.SkipWithError("reserve failed");
      break;
    }
    std::memcpy(w->data(), src.data(), bytes);
    (void)store->Commit(std::move(*w));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_PutWithCopy)->Arg(1 * kMiB);

// Lookup hits (pin, touch LRU, unpin) from 1..N threads on a shared store.
void BM_LookupHit(benchmark::State& state) {
  static std::unique_ptr<ObjectStore> store;
  constexpr uint64_t kObjects = 4096;
  if (state.thread_index() == 0) {
    store = MakeBenchStore(kObjects * 64 * kKiB);
    for (uint64_t k = 0; k < kObjects; ++k) {
      auto w = store->Reserve("bench", KeyOf(k), 64 * kKiB, "meta", kNoExpiry);
      if (w.ok()) (void)store->Commit(std::move(*w));
    }
  }
  std::vector<std::string> keys;
  for (uint64_t k = 0; k < kObjects; ++k)
    keys.push_back(KeyOf(k));
  uint64_t i = static_cast<uint64_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    auto r = store->Lookup("bench", keys[i++ % kObjects]);
    benchmark::DoNotOptimize(r.ok() ? r->data() : nullptr);
  }
  if (state.thread_index() == 0) {
    state.counters["hits"] = static_cast<double>(store->Stats().hits);
  }
}
BENCHMARK(BM_LookupHit)->Threads(1)->Threads(2)->Threads(4)->Threads(8)->Threads(16)->UseRealTime();

// An any-namespace probe of 1024 keys, LMCache's batched contains: the first half stored (in
// namespace "lmcache", a quarter of them also in "other"), the rest misses (a new prompt's
// chunks), with `namespaces` namespaces holding objects on the node. A tenant that creates many
// namespaces must not slow it (issue 22): a miss used to probe every namespace.
void BM_ExistsInAnyNamespace(benchmark::State& state) {
  const auto namespaces = static_cast<uint64_t>(state.range(0));
  constexpr uint64_t kKeys = 1024;
  auto store = MakeBenchStore(64 * kMiB);
  for (uint64_t k = 0; k < kKeys / 2; ++k) {
    for (const char* ns : {"lmcache", "other"}) {
      if (ns[0] == 'o' && k % 2 == 1) continue;
      auto w = store->Reserve(ns, KeyOf(k), 16, "", kNoExpiry);
      if (w.ok()) (void)store->Commit(std::move(*w));
    }
  }
  for (uint64_t n = 2; n < namespaces; ++n) {
    auto w = store->Reserve("tenant-" + std::to_string(n), "x", 0, "", kNoExpiry);
    if (w.ok()) (void)store->Commit(std::move(*w));
  }
  std::vector<std::string> keys;
  for (uint64_t k = 0; k < kKeys; ++k)
    keys.push_back(KeyOf(k));
  for (auto _ : state) {
    uint64_t found = 0;
    for (const std::string& key : keys)
      found += store->ExistsInAnyNamespace(key).ok() ? 1 : 0;
    benchmark::DoNotOptimize(found);
  }
  state.counters["namespaces"] = static_cast<double>(store->NamespaceUsages().size());
  state.SetItemsProcessed(state.iterations() * kKeys);
}
BENCHMARK(BM_ExistsInAnyNamespace)->Arg(1)->Arg(10000);

// A store of `objects` 0-byte objects under 48-byte keys, and 256 Ki keys to probe it with (a
// quarter of them absent), drawn at random from the whole key space, so that at a million
// objects and more a probe's cache lines are rarely cached: what grows with the object count is
// what a probe pays in memory misses.
struct ProbedStore {
  std::unique_ptr<ObjectStore> store;
  std::vector<std::string> probes;
};
ProbedStore MakeProbedStore(uint64_t objects) {
  log::SetLevel(log::Level::kWarn);
  StoreOptions options;
  options.capacity_bytes = 64 * kMiB;
  options.max_index_bytes = objects * 1024 + 64 * kMiB;
  ProbedStore probed{std::move(ObjectStore::Create(options)).value(), {}};
  auto key_of = [](uint64_t i) {
    std::string key = "bench-key-" + std::to_string(i);
    key.resize(48, '.');
    return key;
  };
  for (uint64_t k = 0; k < objects; ++k) {
    auto w = probed.store->Reserve("bench", key_of(k), 0, "", kNoExpiry);
    if (w.ok()) (void)probed.store->Commit(std::move(*w));
  }
  uint64_t x = 88172645463325252ull;  // xorshift64: the same keys in every run
  for (uint64_t i = 0; i < 256 * 1024; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    probed.probes.push_back(key_of(x % (objects + objects / 3)));
  }
  return probed;
}

// MEXIST's work in the store, 1024 keys a call: one Exists per key, then one ExistsMany (what
// the node calls).
void BM_ExistsOneByOne(benchmark::State& state) {
  constexpr uint64_t kKeys = 1024;
  ProbedStore probed = MakeProbedStore(static_cast<uint64_t>(state.range(0)));
  uint64_t next = 0, found = 0;
  for (auto _ : state) {
    for (uint64_t i = 0; i < kKeys; ++i)
      found += probed.store->Exists("bench", probed.probes[(next + i) % probed.probes.size()]).ok();
    next += kKeys;
  }
  benchmark::DoNotOptimize(found);
  state.SetItemsProcessed(state.iterations() * kKeys);
}
BENCHMARK(BM_ExistsOneByOne)->Arg(10000)->Arg(1000000)->Arg(4000000)->Unit(benchmark::kMicrosecond);

void BM_ExistsMany(benchmark::State& state) {
  constexpr uint64_t kKeys = 1024;
  ProbedStore probed = MakeProbedStore(static_cast<uint64_t>(state.range(0)));
  std::vector<std::string_view> batch(kKeys);
  std::vector<StatusCode> codes(kKeys);
  std::vector<uint64_t> lengths(kKeys);
  uint64_t next = 0, found = 0;
  for (auto _ : state) {
    for (uint64_t i = 0; i < kKeys; ++i)
      batch[i] = probed.probes[(next + i) % probed.probes.size()];
    probed.store->ExistsMany("bench", batch, codes, lengths);
    for (StatusCode c : codes)
      found += c == StatusCode::kOk ? 1 : 0;
    next += kKeys;
  }
  benchmark::DoNotOptimize(found);
  state.SetItemsProcessed(state.iterations() * kKeys);
}
BENCHMARK(BM_ExistsMany)->Arg(10000)->Arg(1000000)->Arg(4000000)->Unit(benchmark::kMicrosecond);

// The server's once-a-second TTL sweep over a store of `objects` objects (a tenth with a TTL
// that has not passed): the cost of finding nothing to expire, which once was a walk of the
// whole index under each shard's lock.
void BM_SweepNothingExpired(benchmark::State& state) {
  const auto objects = static_cast<uint64_t>(state.range(0));
  auto store = MakeBenchStore(256 * kMiB);
  for (uint64_t k = 0; k < objects; ++k) {
    auto w = store->Reserve("bench", KeyOf(k), 0, "", k % 10 == 0 ? 3600 : kNoExpiry);
    if (w.ok()) (void)store->Commit(std::move(*w));
  }
  for (auto _ : state)
    benchmark::DoNotOptimize(store->Sweep());
  state.counters["objects"] = static_cast<double>(store->Stats().objects);
}
BENCHMARK(BM_SweepNothingExpired)->Arg(1000)->Arg(1000000);

// One LIST page (100 keys) of a namespace of 1,000 objects in a store that holds `objects` more
// in another namespace: what an operator's or a connector's listing costs beside a full cache.
// Until issue 23 each page was a pass over the whole index.
void BM_ListPage(benchmark::State& state) {
  const auto objects = static_cast<uint64_t>(state.range(0));
  auto store = MakeBenchStore(256 * kMiB);
  for (uint64_t k = 0; k < objects; ++k) {
    auto w = store->Reserve("cache", KeyOf(k), 0, "", kNoExpiry);
    if (w.ok()) (void)store->Commit(std::move(*w));
  }
  for (uint64_t k = 0; k < 1000; ++k) {
    auto w = store->Reserve("listed", KeyOf(k), 0, "", kNoExpiry);
    if (w.ok()) (void)store->Commit(std::move(*w));
  }
  const std::string cursor = KeyOf(500);
  for (auto _ : state) {
    Result<KeyListing> page = store->ListKeys("listed", cursor, 100);
    benchmark::DoNotOptimize(page);
  }
  state.counters["objects"] = static_cast<double>(store->Stats().objects);
}
BENCHMARK(BM_ListPage)->Arg(1000)->Arg(1000000);

// Lookup hits of distinct keys, and for each hit an overwrite (Reserve + Commit, no copy) every
// 8th time, from 1..N threads on a shared store: each thread has its own keys, so with per-shard
// LRU and namespace counters the threads share no lock except the allocator's (which only the
// overwrites take). Items/s is the aggregate rate.
void BM_HitsAndCommits(benchmark::State& state) {
  static std::unique_ptr<ObjectStore> store;
  constexpr uint64_t kKeysPerThread = 512;
  constexpr uint64_t kValue = 16 * kKiB;
  const uint64_t threads = static_cast<uint64_t>(state.threads());
  if (state.thread_index() == 0) {
    store = MakeBenchStore((threads + 1) * kKeysPerThread * kValue + 64 * kMiB);
    for (uint64_t t = 0; t < threads; ++t) {
      for (uint64_t k = 0; k < kKeysPerThread; ++k) {
        auto w = store->Reserve("bench", KeyOf(t * kKeysPerThread + k), kValue, "m", kNoExpiry);
        if (w.ok()) (void)store->Commit(std::move(*w));
      }
    }
  }
  std::vector<std::string> keys;
  const uint64_t first = static_cast<uint64_t>(state.thread_index()) * kKeysPerThread;
  for (uint64_t k = 0; k < kKeysPerThread; ++k)
    keys.push_back(KeyOf(first + k));
  uint64_t i = 0;
  for (auto _ : state) {
    const std::string& key = keys[i++ % kKeysPerThread];
    if (i % 8 == 0) {
      auto w = store->Reserve("bench", key, kValue, "m", kNoExpiry);
      if (!w.ok() || !store->Commit(std::move(*w)).ok()) {
        state.SkipWithError("put failed");
        break;
      }
    } else {
      auto r = store->Lookup("bench", key);
      benchmark::DoNotOptimize(r.ok() ? r->data() : nullptr);
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_HitsAndCommits)
    ->Threads(1)
    ->Threads(2)
    ->Threads(4)
    ->Threads(8)
    ->Threads(16)
    ->UseRealTime();

// Every put needs an eviction: the working set is 4x the capacity, values of mixed sizes.
void BM_EvictionUnderPressure(benchmark::State& state) {
  auto store = MakeBenchStore(64 * kMiB);
  const uint64_t sizes[] = {256 * kKiB, 1 * kMiB, 2 * kMiB, 512 * kKiB};
  uint64_t i = 0;
  uint64_t no_space = 0;
  for (auto _ : state) {
    auto w = store->Reserve("bench", KeyOf(i % 512), sizes[i % 4], "meta", kNoExpiry);
    ++i;
    if (!w.ok()) {
      ++no_space;
      continue;
    }
    (void)store->Commit(std::move(*w));
  }
  StoreStats s = store->Stats();
  state.counters["evictions_per_put"] =
      static_cast<double>(s.evictions) / static_cast<double>(state.iterations());
  state.counters["no_space"] = static_cast<double>(no_space);
  state.counters["free_extents"] = static_cast<double>(s.free_extents);
}
BENCHMARK(BM_EvictionUnderPressure);

}  // namespace
}  // namespace kvport::store
