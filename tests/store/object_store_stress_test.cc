// SPDX-License-Identifier: Apache-2.0
// Many threads at once: random puts, overwrites, reads under pins, deletes, aborts, expiry, and
// any-namespace lookups, probes and deletes.
// Asserts what must hold whatever the interleaving: used bytes never exceed the capacity, a
// reader always sees one whole committed version (data and metadata agree), and when every
// handle is gone nothing leaks.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <random>
#include <thread>
#include <vector>

#include "store/object_store.h"
#include "store_test_util.h"

namespace kvport::store {
namespace {

using testing::kBlock;

// A value's bytes are a function of its version, and the version is also its metadata, so a
// reader can check that what it pinned is one complete, committed write.
uint8_t PatternByte(uint64_t version, uint64_t i) {
  return static_cast<uint8_t>((version * 0x9E3779B97F4A7C15ULL + i * 31) >> 56);
}

std::string VersionMeta(uint64_t version) {
  return std::string(reinterpret_cast<const char*>(&version), sizeof(version));
}

bool Intact(const ReadHandle& r) {
  if (r.meta().size() != sizeof(uint64_t)) return false;
  uint64_t version = 0;
  std::memcpy(&version, r.meta().data(), sizeof(version));
  for (uint64_t i = 0; i < r.size(); i += 97) {
    if (r.data()[i] != PatternByte(version, i)) return false;
  }
  return r.size() == 0 || r.data()[r.size() - 1] == PatternByte(version, r.size() - 1);
}

TEST(ObjectStoreStressTest, ConcurrentRandomWorkloadKeepsInvariants) {
  constexpr int kThreads = 6;
  constexpr int kOpsPerThread = 3000;
  constexpr int kKeys = 48;
  ManualTtlClock clock;
  auto store = testing::MakeStore(96, &clock);
  ASSERT_NE(store, nullptr);
  const uint64_t capacity = store->Stats().capacity_bytes;
  std::atomic<uint64_t> next_version{1};
  std::atomic<int> violations{0};
  std::atomic<int> torn_reads{0};
  std::atomic<uint64_t> no_space{0}, committed{0};

  auto worker = [&](int thread_index) {
    std::mt19937_64 rng(1234 + thread_index);
    std::deque<ReadHandle> held;  // pins kept across operations
    for (int op = 0; op < kOpsPerThread; ++op) {
      const std::string ns = (rng() % 2) ? "alpha" : "beta";
      const std::string key = "key" + std::to_string(rng() % kKeys);
      switch (rng() % 10) {
        case 0:
        case 1:
        case 2: {  // put (sometimes with a TTL, sometimes abandoned)
          const uint64_t len = rng() % (8 * kBlock);
          const uint64_t version = next_version.fetch_add(1);
          const uint32_t ttl = (rng() % 4 == 0) ? 1 + rng() % 3 : kNoExpiry;
          Result<WriteHandle> w = store->Reserve(ns, key, len, VersionMeta(version), ttl);
          if (!w.ok()) {
            if (w.status().code() != StatusCode::kNoSpace) violations.fetch_add(1);
            no_space.fetch_add(1);
            break;
          }
          for (uint64_t i = 0; i < len; ++i)
            w->data()[i] = PatternByte(version, i);
          if (rng() % 8 == 0) break;  // abandoned: the destructor aborts
          if (!store->Commit(std::move(*w)).ok()) violations.fetch_add(1);
          committed.fetch_add(1);
          break;
        }
        case 3:
        case 4:
        case 5: {  // read, sometimes keeping the pin for a while
          Result<ReadHandle> r =
              (rng() % 4 == 0) ? store->LookupInAnyNamespace(key) : store->Lookup(ns, key);
          if (!r.ok()) break;
          if (!Intact(*r)) torn_reads.fetch_add(1);
          if (rng() % 3 == 0) held.push_back(std::move(*r));
          break;
        }
        case 6:
          if (rng() % 4 == 0) {
            (void)store->DeleteInEveryNamespace(key);
          } else {
            (void)store->Delete(ns, key);
          }
          break;
        case 7:
          if (rng() % 4 == 0) {
            (void)store->ExistsInAnyNamespace(key);
          } else {
            (void)store->Exists(ns, key);
          }
          break;
        case 8:  // pinned versions must still be intact, whatever happened since
          for (const ReadHandle& h : held) {
            if (!Intact(h)) torn_reads.fetch_add(1);
          }
          while (held.size() > 4)
            held.pop_front();
          break;
        case 9:
          if (thread_index == 0) {
            clock.AdvanceSeconds(1);
            (void)store->Sweep();
          } else {
            (void)store->ListKeys(ns, "", 8);
          }
          break;
      }
      if (store->Stats().used_bytes > capacity) violations.fetch_add(1);
    }
    for (const ReadHandle& h : held) {
      if (!Intact(h)) torn_reads.fetch_add(1);
    }
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back(worker, t);
  for (auto& t : threads)
    t.join();

  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(torn_reads.load(), 0);
  EXPECT_GT(committed.load(), 0u);

  // Every handle is gone: used bytes are exactly the visible objects' blocks.
  StoreStats s = store->Stats();
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.retired_bytes, 0u);
  EXPECT_LE(s.used_bytes, s.capacity_bytes);
  // The per-shard namespace counters add up to exactly what is visible: the store's totals,
  // and each namespace's keys and value lengths as listed and probed one by one (after a sweep,
  // so that no expired object is still counted while no longer listed).
  (void)store->Sweep();
  s = store->Stats();
  uint64_t ns_objects = 0, ns_value_bytes = 0;
  for (const NamespaceUsage& u : store->NamespaceUsages()) {
    ns_objects += u.objects;
    ns_value_bytes += u.value_bytes;
    Result<KeyListing> listing = store->ListKeys(u.ns, "", 1000);
    ASSERT_TRUE(listing.ok());
    uint64_t listed_bytes = 0;
    for (const std::string& key : listing->keys) {
      uint64_t length = 0;
      ASSERT_TRUE(store->Exists(u.ns, key, &length).ok()) << key;
      listed_bytes += length;
    }
    EXPECT_EQ(listing->keys.size(), u.objects) << u.ns;
    EXPECT_EQ(listed_bytes, u.value_bytes) << u.ns;
    EXPECT_EQ(u.meta_bytes, u.objects * sizeof(uint64_t)) << u.ns;  // every meta is a version
  }
  EXPECT_EQ(ns_objects, s.objects);
  EXPECT_EQ(ns_value_bytes, s.value_bytes);

  // Deleting everything gives the whole arena back as one hole.
  for (const char* ns : {"alpha", "beta"}) {
    for (int k = 0; k < kKeys; ++k)
      (void)store->Delete(ns, "key" + std::to_string(k));
  }
  s = store->Stats();
  EXPECT_EQ(s.objects, 0u);
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(s.value_bytes, 0u);
  EXPECT_EQ(s.free_extents, 1u);
  EXPECT_TRUE(store->NamespaceUsages().empty());
}

// Many readers pin one key while a writer keeps replacing it: every reader sees a whole
// version, and every replaced version is freed once its readers are done.
TEST(ObjectStoreStressTest, ReadersAndAnOverwriterOfOneKey) {
  auto store = testing::MakeStore(64);
  ASSERT_NE(store, nullptr);
  constexpr int kReaders = 4;
  constexpr int kWrites = 400;
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&] {
      while (!done.load()) {
        Result<ReadHandle> r = store->Lookup("", "hot");
        if (r.ok() && !Intact(*r)) torn.fetch_add(1);
      }
    });
  }
  for (uint64_t v = 1; v <= kWrites; ++v) {
    const uint64_t len = (1 + v % 4) * kBlock - v % 100;
    Result<WriteHandle> w = store->Reserve("", "hot", len, VersionMeta(v), kNoExpiry);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (uint64_t i = 0; i < len; ++i)
      w->data()[i] = PatternByte(v, i);
    ASSERT_TRUE(store->Commit(std::move(*w)).ok());
  }
  done.store(true);
  for (auto& t : readers)
    t.join();
  EXPECT_EQ(torn.load(), 0);
  StoreStats s = store->Stats();
  EXPECT_EQ(s.objects, 1u);
  EXPECT_EQ(s.retired_bytes, 0u);
  EXPECT_EQ(s.used_bytes, kBlock);  // the last version, 400, is exactly one block
}

}  // namespace
}  // namespace kvport::store
