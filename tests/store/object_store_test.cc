// SPDX-License-Identifier: Apache-2.0
#include "store/object_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "store_test_util.h"

namespace kvport::store {
namespace {

using testing::Blocks;
using testing::Get;
using testing::kBlock;
using testing::MakeStore;
using testing::Put;

std::string_view AsView(const ReadHandle& r) {
  return {reinterpret_cast<const char*>(r.data()), r.size()};
}

// What a promotion from the disk tier commits with: never over a version that is visible.
TEST(ObjectStoreTest, CommitIfAbsentLeavesAVisibleVersionAndTakesAnAbsentOrExpiredKey) {
  auto store = MakeStore(8);
  Result<WriteHandle> older = store->Reserve("ns", "k", 3, "", kNoExpiry);
  ASSERT_TRUE(older.ok());
  std::memcpy(older->data(), "old", 3);
  ASSERT_TRUE(Put(*store, "ns", "k", "new").ok());
  EXPECT_EQ(store->CommitIfAbsent(std::move(*older)).code(), StatusCode::kAborted);
  EXPECT_EQ(Get(*store, "ns", "k"), "new");
  EXPECT_EQ(store->Stats().reserved_bytes, 0u);  // the refused reservation was freed
  ASSERT_TRUE(store->Delete("ns", "k").ok());
  Result<WriteHandle> again = store->Reserve("ns", "k", 3, "", kNoExpiry);
  ASSERT_TRUE(again.ok());
  std::memcpy(again->data(), "old", 3);
  EXPECT_TRUE(store->CommitIfAbsent(std::move(*again)).ok());
  EXPECT_EQ(Get(*store, "ns", "k"), "old");
}

// Sequence numbers say which version an object is: every commit of a key and every change in
// place gives a higher one than the key had; a promotion keeps the one it is given; the first
// one is the options'.
TEST(ObjectStoreTest, SequencesRiseWithEveryCommitAndChangeAndAPresetOneIsKept) {
  StoreOptions options;
  options.capacity_bytes = 64 * kBlock;
  options.first_sequence = 1000;
  auto store = ObjectStore::Create(options).value();
  uint64_t first = 0, second = 0, changed = 0, other = 0;
  auto put = [&](std::string_view key, uint64_t* sequence) {
    Result<WriteHandle> w = store->Reserve("ns", key, 10, "", kNoExpiry);
    ASSERT_TRUE(w.ok());
    std::memset(w->data(), 'x', 10);
    ASSERT_TRUE(store->Commit(std::move(*w), sequence).ok());
  };
  put("k", &first);
  EXPECT_GE(first, 1000u);
  EXPECT_EQ(store->Lookup("ns", "k")->sequence(), first);
  put("k", &second);
  EXPECT_GT(second, first);
  ASSERT_TRUE(store->SetExpiry("ns", "k", 60000, &changed).ok());
  EXPECT_GT(changed, second);
  EXPECT_EQ(store->Lookup("ns", "k")->sequence(), changed);
  uint64_t attached = 0;
  ASSERT_TRUE(store->AttachMeta("ns", "k", "m", &attached).ok());
  EXPECT_GT(attached, changed);
  EXPECT_GT(store->NewSequence(), attached);
  // A version brought back from elsewhere keeps its number.
  Result<WriteHandle> w = store->Reserve("ns", "promoted", 10, "", kNoExpiry);
  ASSERT_TRUE(w.ok());
  std::memset(w->data(), 'p', 10);
  w->SetSequence(7);
  ASSERT_TRUE(store->CommitIfAbsent(std::move(*w)).ok());
  EXPECT_EQ(store->Lookup("ns", "promoted")->sequence(), 7u);
  put("other", &other);
  EXPECT_GT(other, attached);
}

// The sink is asked before the object leaves memory and handed its bytes only when it wants
// them, with the version's sequence number.
TEST(ObjectStoreTest, TheEvictionSinkIsAskedFirstAndGetsTheBytesOnlyWhenItWantsThem) {
  class Sink final : public EvictionSink {
   public:
    bool Leaving(const EvictedObject& o) override {
      asked.emplace_back(o.key);
      return o.key != "unwanted";
    }
    void Evicted(const EvictedObject& o) override {
      handed.emplace_back(o.key);
      sequences.push_back(o.sequence);
      values.emplace_back(reinterpret_cast<const char*>(o.value.data()), o.value.size());
    }
    std::vector<std::string> asked, handed, values;
    std::vector<uint64_t> sequences;
  } sink;
  StoreOptions options;
  options.capacity_bytes = 2 * kBlock;
  options.eviction_sink = &sink;
  auto store = ObjectStore::Create(options).value();
  ASSERT_TRUE(Put(*store, "ns", "unwanted", Blocks(1, 'u')).ok());
  ASSERT_TRUE(Put(*store, "ns", "wanted", Blocks(1, 'w')).ok());
  const uint64_t wanted_sequence = store->Lookup("ns", "wanted")->sequence();
  ASSERT_TRUE(Put(*store, "ns", "a", Blocks(1, 'a')).ok());
  ASSERT_TRUE(Put(*store, "ns", "b", Blocks(1, 'b')).ok());
  EXPECT_EQ(sink.asked, (std::vector<std::string>{"unwanted", "wanted"}));
  EXPECT_EQ(sink.handed, (std::vector<std::string>{"wanted"}));
  EXPECT_EQ(sink.sequences, (std::vector<uint64_t>{wanted_sequence}));
  EXPECT_EQ(sink.values, (std::vector<std::string>{Blocks(1, 'w')}));
}

TEST(ObjectStoreTest, CreateRejectsTinyCapacity) {
  StoreOptions options;
  options.capacity_bytes = 0;
  EXPECT_EQ(ObjectStore::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.capacity_bytes = 4095;
  EXPECT_EQ(ObjectStore::Create(options).status().code(), StatusCode::kInvalidArgument);
}

TEST(ObjectStoreTest, CapacityIsRoundedDownToBlocks) {
  StoreOptions options;
  options.capacity_bytes = 10 * kBlock + 1;
  auto store = ObjectStore::Create(options);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->Stats().capacity_bytes, 10 * kBlock);
  EXPECT_EQ((*store)->arena().size(), 10 * kBlock);
}

TEST(ObjectStoreTest, PutThenLookupReturnsBytesAndMeta) {
  auto store = MakeStore(8);
  ASSERT_TRUE(Put(*store, "ns", "k", "hello", "meta!").ok());
  Result<ReadHandle> r = store->Lookup("ns", "k");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(AsView(*r), "hello");
  EXPECT_EQ(r->meta(), "meta!");
  EXPECT_EQ(r->ns(), "ns");
  EXPECT_EQ(r->key(), "k");
  EXPECT_EQ(r->data(), store->arena().base() + r->arena_offset());
  uint64_t length = 0;
  EXPECT_TRUE(store->Exists("ns", "k", &length).ok());
  EXPECT_EQ(length, 5u);
  length = 77;
  EXPECT_EQ(store->Exists("other", "k", &length).code(), StatusCode::kNotFound);
  EXPECT_EQ(length, 77u);  // untouched on NotFound
  EXPECT_EQ(store->Lookup("ns", "absent").status().code(), StatusCode::kNotFound);
  StoreStats s = store->Stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.objects, 1u);
  EXPECT_EQ(s.value_bytes, 5u);
  EXPECT_EQ(s.used_bytes, kBlock);
}

TEST(ObjectStoreTest, NamespacesSeparateEqualKeys) {
  auto store = MakeStore(8);
  ASSERT_TRUE(Put(*store, "a", "k", "in a").ok());
  ASSERT_TRUE(Put(*store, "b", "k", "in b").ok());
  ASSERT_TRUE(Put(*store, "", "k", "default").ok());
  // The length prefix keeps ("a", "bk") apart from ("ab", "k").
  ASSERT_TRUE(Put(*store, "ab", "k", "in ab").ok());
  ASSERT_TRUE(Put(*store, "a", "bk", "in a, bk").ok());
  EXPECT_EQ(Get(*store, "a", "k"), "in a");
  EXPECT_EQ(Get(*store, "b", "k"), "in b");
  EXPECT_EQ(Get(*store, "", "k"), "default");
  EXPECT_EQ(Get(*store, "ab", "k"), "in ab");
  EXPECT_EQ(Get(*store, "a", "bk"), "in a, bk");
}

TEST(ObjectStoreTest, ZeroLengthValuesAreObjects) {
  auto store = MakeStore(1);
  ASSERT_TRUE(Put(*store, "", "empty", "", "only meta").ok());
  Result<ReadHandle> r = store->Lookup("", "empty");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 0u);
  EXPECT_NE(r->data(), nullptr);
  EXPECT_EQ(r->meta(), "only meta");
  EXPECT_EQ(store->Stats().used_bytes, 0u);
}

TEST(ObjectStoreTest, ReservationIsInvisibleUntilCommit) {
  auto store = MakeStore(8);
  Result<WriteHandle> w = store->Reserve("ns", "k", 3 * kBlock, "m", kNoExpiry);
  ASSERT_TRUE(w.ok());
  std::memset(w->data(), 'x', w->size());
  EXPECT_EQ(store->Lookup("ns", "k").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Exists("ns", "k").code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->ListKeys("ns", "", 10)->keys.empty());
  EXPECT_EQ(store->UsageOf("ns").objects, 0u);
  StoreStats before = store->Stats();
  EXPECT_EQ(before.objects, 0u);
  EXPECT_EQ(before.reserved_bytes, 3 * kBlock);
  EXPECT_EQ(before.used_bytes, 3 * kBlock);

  ASSERT_TRUE(store->Commit(std::move(*w)).ok());
  EXPECT_FALSE(w->valid());
  EXPECT_EQ(Get(*store, "ns", "k"), Blocks(3, 'x'));
  StoreStats after = store->Stats();
  EXPECT_EQ(after.objects, 1u);
  EXPECT_EQ(after.reserved_bytes, 0u);
  EXPECT_EQ(after.used_bytes, 3 * kBlock);
  EXPECT_EQ(store->Commit(std::move(*w)).code(), StatusCode::kInvalidArgument);
}

TEST(ObjectStoreTest, AbortedAndAbandonedReservationsLeaveNothing) {
  auto store = MakeStore(8);
  ASSERT_TRUE(Put(*store, "ns", "k", "old").ok());
  const uint64_t used_with_old = store->Stats().used_bytes;
  {
    Result<WriteHandle> w = store->Reserve("ns", "k", 2 * kBlock, "", kNoExpiry);
    ASSERT_TRUE(w.ok());
    std::memset(w->data(), 'n', w->size());
    store->Abort(std::move(*w));
    EXPECT_FALSE(w->valid());
  }
  {
    // A writer that disappears mid-write (the server's connection dropped): the destructor aborts.
    Result<WriteHandle> w = store->Reserve("ns", "k", 2 * kBlock, "", kNoExpiry);
    ASSERT_TRUE(w.ok());
    std::memset(w->data(), 'n', kBlock);
  }
  {
    // Move-assigning over a live reservation aborts the one it held.
    Result<WriteHandle> w1 = store->Reserve("ns", "a", kBlock, "", kNoExpiry);
    Result<WriteHandle> w2 = store->Reserve("ns", "b", kBlock, "", kNoExpiry);
    ASSERT_TRUE(w1.ok() && w2.ok());
    *w1 = std::move(*w2);
    EXPECT_EQ(store->Stats().reserved_bytes, kBlock);
    EXPECT_EQ(w1->key(), "b");
  }
  EXPECT_EQ(Get(*store, "ns", "k"), "old");
  EXPECT_EQ(store->Exists("ns", "a").code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Exists("ns", "b").code(), StatusCode::kNotFound);
  StoreStats s = store->Stats();
  EXPECT_EQ(s.used_bytes, used_with_old);
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.objects, 1u);
  EXPECT_EQ(s.free_extents, 1u);  // no hole left behind
}

TEST(ObjectStoreTest, OverwriteWhileAReaderHoldsTheOldVersion) {
  auto store = MakeStore(8);
  ASSERT_TRUE(Put(*store, "ns", "k", Blocks(2, 'A'), "old meta").ok());
  Result<ReadHandle> old_reader = store->Lookup("ns", "k");
  ASSERT_TRUE(old_reader.ok());
  ReadHandle copy = *old_reader;  // a second pin on the same version

  Result<WriteHandle> w = store->Reserve("ns", "k", 2 * kBlock, "new meta", kNoExpiry);
  ASSERT_TRUE(w.ok());
  EXPECT_NE(w->arena_offset(), old_reader->arena_offset());
  std::memset(w->data(), 'B', w->size());
  EXPECT_EQ(Get(*store, "ns", "k"), Blocks(2, 'A'));  // not yet replaced
  ASSERT_TRUE(store->Commit(std::move(*w)).ok());

  EXPECT_EQ(Get(*store, "ns", "k"), Blocks(2, 'B'));
  EXPECT_EQ(AsView(*old_reader), Blocks(2, 'A'));  // still intact
  EXPECT_EQ(old_reader->meta(), "old meta");
  StoreStats s = store->Stats();
  EXPECT_EQ(s.objects, 1u);
  EXPECT_EQ(s.retired_bytes, 2 * kBlock);
  EXPECT_EQ(s.used_bytes, 4 * kBlock);
  EXPECT_EQ(store->UsageOf("ns").objects, 1u);

  old_reader->Reset();
  EXPECT_EQ(store->Stats().used_bytes, 4 * kBlock);  // `copy` still pins it
  EXPECT_EQ(AsView(copy), Blocks(2, 'A'));
  copy.Reset();
  s = store->Stats();
  EXPECT_EQ(s.used_bytes, 2 * kBlock);
  EXPECT_EQ(s.retired_bytes, 0u);
}

TEST(ObjectStoreTest, DeleteWhilePinnedKeepsBytesForTheReader) {
  auto store = MakeStore(4);
  ASSERT_TRUE(Put(*store, "ns", "k", Blocks(1, 'D')).ok());
  Result<ReadHandle> r = store->Lookup("ns", "k");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(store->Delete("ns", "k").ok());
  EXPECT_EQ(store->Delete("ns", "k").code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Lookup("ns", "k").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Stats().objects, 0u);
  EXPECT_EQ(store->UsageOf("ns").objects, 0u);
  EXPECT_EQ(AsView(*r), Blocks(1, 'D'));
  EXPECT_EQ(store->Stats().used_bytes, kBlock);
  r->Reset();
  EXPECT_EQ(store->Stats().used_bytes, 0u);
}

TEST(ObjectStoreTest, EvictsLeastRecentlyUsedFirst) {
  auto store = MakeStore(4);
  for (const char* k : {"a", "b", "c", "d"})
    ASSERT_TRUE(Put(*store, "", k, Blocks(1, *k)).ok());
  // Recency now (most to least): d c b a. A lookup is a use, Exists is not.
  ASSERT_TRUE(Get(*store, "", "a"));
  ASSERT_TRUE(store->Exists("", "b").ok());
  // Order: a d c b. Two new objects evict b, then c.
  ASSERT_TRUE(Put(*store, "", "e", Blocks(1, 'e')).ok());
  EXPECT_EQ(store->Exists("", "b").code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->Exists("", "c").ok());
  ASSERT_TRUE(Put(*store, "", "f", Blocks(1, 'f')).ok());
  EXPECT_EQ(store->Exists("", "c").code(), StatusCode::kNotFound);
  for (const char* k : {"a", "d", "e", "f"})
    EXPECT_EQ(Get(*store, "", k), Blocks(1, *k)) << k;
  StoreStats s = store->Stats();
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.objects, 4u);
  EXPECT_EQ(s.used_bytes, s.capacity_bytes);
}

TEST(ObjectStoreTest, EvictsAsManyAsNeededForABigValue) {
  auto store = MakeStore(4);
  for (const char* k : {"a", "b", "c", "d"})
    ASSERT_TRUE(Put(*store, "", k, Blocks(1, *k)).ok());
  ASSERT_TRUE(Put(*store, "", "big", Blocks(3, 'B')).ok());
  EXPECT_EQ(store->Stats().evictions, 3u);
  EXPECT_TRUE(store->Exists("", "d").ok());  // the most recent survives
  EXPECT_EQ(Get(*store, "", "big"), Blocks(3, 'B'));
}

TEST(ObjectStoreTest, PinsPreventEvictionAndReuse) {
  auto store = MakeStore(3);
  for (const char* k : {"a", "b", "c"})
    ASSERT_TRUE(Put(*store, "", k, Blocks(1, *k)).ok());
  Result<ReadHandle> pinned = store->Lookup("", "a");
  ASSERT_TRUE(pinned.ok());
  const uint64_t pinned_offset = pinned->arena_offset();
  // Make `a` the least recently used again: b and c are used after it.
  ASSERT_TRUE(Get(*store, "", "b"));
  ASSERT_TRUE(Get(*store, "", "c"));
  // Each new value needs one eviction; `a` is the LRU victim but pinned, so b then c go.
  for (const char* k : {"x", "y"}) {
    Result<WriteHandle> w = store->Reserve("", k, kBlock, "", kNoExpiry);
    ASSERT_TRUE(w.ok()) << k;
    EXPECT_NE(w->arena_offset(), pinned_offset);
    std::memset(w->data(), *k, kBlock);
    ASSERT_TRUE(store->Commit(std::move(*w)).ok());
  }
  EXPECT_TRUE(store->Exists("", "a").ok());
  EXPECT_EQ(store->Exists("", "b").code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Exists("", "c").code(), StatusCode::kNotFound);

  // Even deleted, a pinned object's bytes are not reused.
  ASSERT_TRUE(store->Delete("", "a").ok());
  Result<WriteHandle> w = store->Reserve("", "z", kBlock, "", kNoExpiry);
  ASSERT_TRUE(w.ok());
  EXPECT_NE(w->arena_offset(), pinned_offset);
  std::memset(w->data(), 'z', kBlock);
  ASSERT_TRUE(store->Commit(std::move(*w)).ok());
  EXPECT_EQ(AsView(*pinned), Blocks(1, 'a'));
  pinned->Reset();
  // Now its block is free and is the only free one.
  Result<WriteHandle> reuse = store->Reserve("", "r", kBlock, "", kNoExpiry);
  ASSERT_TRUE(reuse.ok());
  EXPECT_EQ(reuse->arena_offset(), pinned_offset);
  EXPECT_EQ(store->Stats().evictions, 3u);  // b, c, x
}

TEST(ObjectStoreTest, NoSpaceWhenOnlyPinnedObjectsAndReservationsRemain) {
  auto store = MakeStore(3);
  Result<WriteHandle> in_flight = store->Reserve("", "w", kBlock, "", kNoExpiry);
  ASSERT_TRUE(in_flight.ok());
  ASSERT_TRUE(Put(*store, "", "p", Blocks(2, 'p')).ok());
  Result<ReadHandle> pin = store->Lookup("", "p");
  ASSERT_TRUE(pin.ok());

  Result<WriteHandle> refused = store->Reserve("", "n", kBlock, "", kNoExpiry);
  EXPECT_EQ(refused.status().code(), StatusCode::kNoSpace) << refused.status().ToString();
  EXPECT_EQ(AsView(*pin), Blocks(2, 'p'));
  EXPECT_TRUE(store->Exists("", "p").ok());  // the pinned object was not removed
  EXPECT_EQ(store->Stats().evictions, 0u);
  EXPECT_LE(store->Stats().used_bytes, store->Stats().capacity_bytes);

  store->Abort(std::move(*in_flight));
  EXPECT_TRUE(store->Reserve("", "n", kBlock, "", kNoExpiry).ok());
  pin->Reset();
  EXPECT_TRUE(store->Reserve("", "n", 3 * kBlock, "", kNoExpiry).ok());  // evicts p
}

TEST(ObjectStoreTest, TooLargeAndInvalidArguments) {
  StoreOptions options;
  options.capacity_bytes = 8 * kBlock;
  options.max_value_bytes = 4 * kBlock;
  options.max_key_bytes = 8;
  options.max_namespace_bytes = 4;
  options.max_meta_bytes = 16;
  auto created = ObjectStore::Create(options);
  ASSERT_TRUE(created.ok());
  ObjectStore& store = **created;
  auto code = [&](std::string_view ns, std::string_view key, uint64_t len, std::string_view meta) {
    return store.Reserve(ns, key, len, meta, kNoExpiry).status().code();
  };
  EXPECT_EQ(code("", "k", 4 * kBlock + 1, ""), StatusCode::kTooLarge);
  EXPECT_EQ(code("", "k", UINT64_MAX, ""), StatusCode::kTooLarge);
  EXPECT_EQ(code("", "k", 1, std::string(17, 'm')), StatusCode::kTooLarge);
  EXPECT_EQ(code("", "", 1, ""), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("", "123456789", 1, ""), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("12345", "k", 1, ""), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("1234", "12345678", 4 * kBlock, std::string(16, 'm')), StatusCode::kOk);
  EXPECT_EQ(store.Lookup("", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Exists("12345", "k").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Delete("", std::string(9, 'k')).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Stats().used_bytes, 0u);  // refused requests took nothing

  // Without max_value_bytes the capacity is the limit.
  auto unlimited = MakeStore(2);
  EXPECT_EQ(unlimited->Reserve("", "k", 2 * kBlock + 1, "", kNoExpiry).status().code(),
            StatusCode::kTooLarge);
  EXPECT_TRUE(unlimited->Reserve("", "k", 2 * kBlock, "", kNoExpiry).ok());
}

TEST(ObjectStoreTest, TtlExpiresOnTheInjectedClock) {
  ManualTtlClock clock(1'000'000);
  auto store = MakeStore(8, &clock);
  ASSERT_TRUE(Put(*store, "", "short", "s", "", 10).ok());
  ASSERT_TRUE(Put(*store, "", "forever", "f", "", kNoExpiry).ok());
  clock.AdvanceMillis(9'999);
  EXPECT_EQ(Get(*store, "", "short"), "s");
  clock.AdvanceMillis(1);
  EXPECT_EQ(store->Exists("", "short").code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Lookup("", "short").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Delete("", "short").code(), StatusCode::kNotFound);
  clock.AdvanceSeconds(1'000'000);
  EXPECT_EQ(Get(*store, "", "forever"), "f");
  StoreStats s = store->Stats();
  EXPECT_EQ(s.expirations, 1u);  // reclaimed once, by the first call that met it
  EXPECT_EQ(s.objects, 1u);
  EXPECT_EQ(s.used_bytes, kBlock);
}

// MEXIST's probe: one call answers, key by key, what Exists answers, across every shard and
// more keys than one window, with expired, replaced, dropped and invalid keys among them.
TEST(ObjectStoreTest, ExistsManyAnswersEachKeyAsExistsDoes) {
  ManualTtlClock clock(1'000'000);
  StoreOptions options;
  options.capacity_bytes = 2048 * kBlock;  // no eviction
  options.max_key_bytes = 64;
  options.ttl_clock = &clock;
  auto store = std::move(ObjectStore::Create(options)).value();
  std::vector<std::string> names;
  for (int i = 0; i < 2600; ++i)
    names.push_back("key-" + std::to_string(i));
  for (int i = 0; i < 2600; i += 2) {  // the even keys, each value as long as its number
    ASSERT_TRUE(Put(*store, "ns", names[i], std::string(size_t(i % 7), 'v'), "",
                    i % 10 == 0 ? 5 : kNoExpiry)
                    .ok());
  }
  ASSERT_TRUE(Put(*store, "other", names[1], "in another namespace").ok());
  ASSERT_TRUE(Put(*store, "ns", names[4], "replaced").ok());
  names.push_back(std::string(65, 'x'));  // too long: InvalidArgument
  names.push_back("");                    // empty: InvalidArgument
  names.push_back(names[8]);              // a key asked twice
  clock.AdvanceSeconds(5);                // every tenth key (with a TTL) has expired

  std::vector<std::string_view> keys(names.begin(), names.end());
  std::vector<StatusCode> codes(keys.size(), StatusCode::kInternal);
  std::vector<uint64_t> lengths(keys.size(), 99);
  const uint64_t expired_before = store->Stats().expirations;
  store->ExistsMany("ns", keys, codes, lengths);
  // The expired keys it met were reclaimed and counted, as a probe does.
  EXPECT_EQ(store->Stats().expirations - expired_before, 260u);
  size_t ok = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    uint64_t length = 0;
    Status one = store->Exists("ns", keys[i], &length);
    EXPECT_EQ(codes[i], one.code()) << "key " << i << " '" << keys[i] << "'";
    EXPECT_EQ(lengths[i], one.ok() ? length : 0) << "key " << i;
    ok += codes[i] == StatusCode::kOk ? 1 : 0;
  }
  // 1,300 even keys less the 260 expired, key 8 asked twice; the two bad keys refused as
  // Exists refuses them.
  EXPECT_EQ(ok, 1300u - 260u + 1u);
  EXPECT_EQ(codes[2600], StatusCode::kInvalidArgument);
  EXPECT_EQ(codes[2601], StatusCode::kInvalidArgument);
  EXPECT_EQ(lengths[4], std::string("replaced").size());
  EXPECT_EQ(codes[1], StatusCode::kNotFound);  // only in another namespace

  // After DropAll nothing is there, though the drop's pass may not have reached a shard.
  store->DropAll();
  store->ExistsMany("ns", keys, codes, lengths);
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_NE(codes[i], StatusCode::kOk) << "key " << i;
}

TEST(ObjectStoreTest, TtlCountsFromCommit) {
  ManualTtlClock clock;
  auto store = MakeStore(8, &clock);
  Result<WriteHandle> w = store->Reserve("", "k", 1, "", 5);
  ASSERT_TRUE(w.ok());
  w->data()[0] = 'v';
  clock.AdvanceSeconds(100);  // a slow upload
  ASSERT_TRUE(store->Commit(std::move(*w)).ok());
  clock.AdvanceSeconds(4);
  EXPECT_EQ(Get(*store, "", "k"), "v");
  clock.AdvanceSeconds(1);
  EXPECT_FALSE(Get(*store, "", "k"));
}

TEST(ObjectStoreTest, SweepReclaimsExpiredObjectsEvenWhenPinned) {
  ManualTtlClock clock;
  auto store = MakeStore(16, &clock);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Put(*store, "t", "ttl" + std::to_string(i), Blocks(1, 't'), "", 5).ok());
  }
  ASSERT_TRUE(Put(*store, "t", "keep", Blocks(1, 'k')).ok());
  Result<ReadHandle> reader = store->Lookup("t", "ttl0");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(store->Sweep(), 0u);
  clock.AdvanceSeconds(5);
  EXPECT_EQ(store->Sweep(), 5u);
  EXPECT_EQ(store->Sweep(), 0u);
  StoreStats s = store->Stats();
  EXPECT_EQ(s.expirations, 5u);
  EXPECT_EQ(s.objects, 1u);
  EXPECT_EQ(s.used_bytes, 2 * kBlock);  // keep + the pinned ttl0
  EXPECT_EQ(store->UsageOf("t").objects, 1u);
  EXPECT_EQ(AsView(*reader), Blocks(1, 't'));
  reader->Reset();
  EXPECT_EQ(store->Stats().used_bytes, kBlock);
}

TEST(ObjectStoreTest, EvictionCountsExpiredVictimsAsExpirations) {
  ManualTtlClock clock;
  auto store = MakeStore(2, &clock);
  ASSERT_TRUE(Put(*store, "", "old", Blocks(1, 'o'), "", 1).ok());
  ASSERT_TRUE(Put(*store, "", "live", Blocks(1, 'l')).ok());
  clock.AdvanceSeconds(2);
  ASSERT_TRUE(Put(*store, "", "new", Blocks(1, 'n')).ok());
  StoreStats s = store->Stats();
  EXPECT_EQ(s.expirations, 1u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_TRUE(store->Exists("", "live").ok());
}

TEST(ObjectStoreTest, NamespaceUsageFollowsEveryChange) {
  auto store = MakeStore(16);
  ASSERT_TRUE(Put(*store, "a", "1", "xx", "m").ok());
  ASSERT_TRUE(Put(*store, "a", "2", "yyy").ok());
  ASSERT_TRUE(Put(*store, "b", "1", "z", "meta").ok());
  std::vector<NamespaceUsage> all = store->NamespaceUsages();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].ns, "a");
  EXPECT_EQ(all[0].objects, 2u);
  EXPECT_EQ(all[0].value_bytes, 5u);
  EXPECT_EQ(all[0].meta_bytes, 1u);
  EXPECT_EQ(all[1].ns, "b");
  EXPECT_EQ(all[1].objects, 1u);
  EXPECT_EQ(all[1].meta_bytes, 4u);

  ASSERT_TRUE(Put(*store, "a", "1", "longer value", "").ok());  // overwrite
  NamespaceUsage a = store->UsageOf("a");
  EXPECT_EQ(a.objects, 2u);
  EXPECT_EQ(a.value_bytes, 12u + 3u);
  EXPECT_EQ(a.meta_bytes, 0u);

  ASSERT_TRUE(store->Delete("b", "1").ok());
  all = store->NamespaceUsages();
  ASSERT_EQ(all.size(), 1u);  // b is gone
  EXPECT_EQ(all[0].ns, "a");
  EXPECT_EQ(store->UsageOf("b").objects, 0u);
  EXPECT_EQ(store->UsageOf("nope").value_bytes, 0u);
  EXPECT_EQ(store->Stats().value_bytes, 15u);
}

TEST(ObjectStoreTest, ListKeysPagesInOrder) {
  ManualTtlClock clock;
  auto store = MakeStore(64, &clock);
  std::set<std::string> expected;
  for (int i = 0; i < 25; ++i) {
    std::string key = "key" + std::to_string(100 + i);
    ASSERT_TRUE(Put(*store, "list", key, "v").ok());
    expected.insert(key);
  }
  ASSERT_TRUE(Put(*store, "other", "key999", "v").ok());
  ASSERT_TRUE(Put(*store, "list", "expiring", "v", "", 1).ok());
  Result<WriteHandle> uncommitted = store->Reserve("list", "reserved", 1, "", kNoExpiry);
  ASSERT_TRUE(uncommitted.ok());
  clock.AdvanceSeconds(1);

  std::vector<std::string> seen;
  std::string cursor;
  int pages = 0;
  do {
    Result<KeyListing> page = store->ListKeys("list", cursor, 10);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_LE(page->keys.size(), 10u);
    seen.insert(seen.end(), page->keys.begin(), page->keys.end());
    cursor = page->next_cursor;
    ++pages;
  } while (!cursor.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, std::vector<std::string>(expected.begin(), expected.end()));

  Result<KeyListing> exact = store->ListKeys("list", "", 25);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->keys.size(), 25u);
  EXPECT_TRUE(exact->next_cursor.empty());
  EXPECT_TRUE(store->ListKeys("empty-ns", "", 5)->keys.empty());
  EXPECT_EQ(store->ListKeys("list", "", 0).status().code(), StatusCode::kInvalidArgument);
}

TEST(ObjectStoreTest, ListKeysResumesAfterTheCursorDespiteChanges) {
  auto store = MakeStore(16);
  for (const char* k : {"a", "b", "c", "d", "e"})
    ASSERT_TRUE(Put(*store, "", k, "v").ok());
  Result<KeyListing> first = store->ListKeys("", "", 2);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->keys, (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(store->Delete("", "b").ok());  // the cursor key itself disappears
  ASSERT_TRUE(Put(*store, "", "bb", "v").ok());
  Result<KeyListing> second = store->ListKeys("", first->next_cursor, 10);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->keys, (std::vector<std::string>{"bb", "c", "d", "e"}));
  EXPECT_TRUE(second->next_cursor.empty());
}

// LIST reads each shard's objects of the namespace in key order. Random puts (many replacing a
// key's value), deletes, expiries and evictions in three namespaces, with 0-byte values (no
// arena block, so nothing is evicted unless asked): after each round, paging with random page
// sizes yields exactly the model's keys, in order, each once.
TEST(ObjectStoreTest, ListKeysFollowsReplacementsDeletesAndExpiries) {
  ManualTtlClock clock;
  auto store = MakeStore(64, &clock);
  const std::vector<std::string> namespaces = {"list", "list-other", ""};
  std::map<std::string, std::map<std::string, uint64_t>> model;  // ns -> key -> expiry (s)
  uint64_t now_s = 0;
  std::mt19937 rng(23);
  for (int round = 0; round < 40; ++round) {
    for (int op = 0; op < 100; ++op) {
      const std::string& ns = namespaces[rng() % namespaces.size()];
      const std::string key = "k" + std::to_string(rng() % 150);
      const int what = static_cast<int>(rng() % 10);
      if (what < 6) {  // put or replace; a fifth of them with a TTL of 1-3 s
        const uint32_t ttl = rng() % 5 == 0 ? 1 + rng() % 3 : kNoExpiry;
        ASSERT_TRUE(Put(*store, ns, key, "", "m", ttl).ok());
        model[ns][key] = ttl == kNoExpiry ? UINT64_MAX : now_s + ttl;
      } else if (what < 9) {
        (void)store->Delete(ns, key);
        model[ns].erase(key);
      } else {
        clock.AdvanceSeconds(1);
        ++now_s;
      }
    }
    for (const std::string& ns : namespaces) {
      std::vector<std::string> expected;
      for (const auto& [key, expiry] : model[ns])
        if (expiry > now_s) expected.push_back(key);
      std::vector<std::string> seen;
      std::string cursor;
      for (int pages = 0; pages < 200; ++pages) {
        Result<KeyListing> page = store->ListKeys(ns, cursor, 1 + rng() % 17);
        ASSERT_TRUE(page.ok()) << page.status().ToString();
        seen.insert(seen.end(), page->keys.begin(), page->keys.end());
        cursor = page->next_cursor;
        if (cursor.empty()) break;
      }
      EXPECT_EQ(seen, expected) << "round " << round << ", namespace '" << ns << "'";
    }
  }
}

// ---- Eviction across shards ----------------------------------------------------------------

// Each shard keeps its own LRU list; the evictor takes the oldest tail of all of them. With
// many keys (spread over every shard) and uses in a random order, evictions still follow the
// exact global order of last use.
TEST(ObjectStoreTest, EvictionFollowsTheGlobalOrderOfUseAcrossShards) {
  constexpr int kObjects = 300;
  auto store = MakeStore(kObjects + 1);  // one spare block: an overwrite needs one meanwhile
  std::vector<std::string> order;        // least recently used first
  for (int i = 0; i < kObjects; ++i) {
    const std::string key = "key" + std::to_string(i);
    ASSERT_TRUE(Put(*store, "ns", key, Blocks(1, 'v')).ok());
    order.push_back(key);
  }
  std::mt19937 rng(7);
  for (int use = 0; use < 2000; ++use) {
    const size_t i = rng() % order.size();
    const std::string key = order[i];
    if (use % 3 == 0) {
      ASSERT_TRUE(Put(*store, "ns", key, Blocks(1, 'w')).ok());  // a commit is a use
    } else if (use % 3 == 1) {
      ASSERT_TRUE(Get(*store, "ns", key));  // a hit is a use
    } else {
      ASSERT_TRUE(store->Exists("ns", key).ok());  // a probe is not
      continue;
    }
    order.erase(order.begin() + static_cast<std::ptrdiff_t>(i));
    order.push_back(key);
  }
  EXPECT_EQ(store->Stats().evictions, 0u);
  ASSERT_TRUE(Put(*store, "new", "spare", Blocks(1, 's')).ok());  // takes the spare block
  // Each new one-block value evicts exactly the least recently used object.
  for (int n = 0; n < kObjects / 2; ++n) {
    ASSERT_TRUE(Put(*store, "new", "n" + std::to_string(n), Blocks(1, 'n')).ok());
    EXPECT_EQ(store->Exists("ns", order[n]).code(), StatusCode::kNotFound) << n << " " << order[n];
    EXPECT_TRUE(store->Exists("ns", order[n + 1]).ok()) << n;
  }
  EXPECT_EQ(store->Stats().evictions, static_cast<uint64_t>(kObjects / 2));
  EXPECT_EQ(store->UsageOf("ns").objects, static_cast<uint64_t>(kObjects - kObjects / 2));
}

// The one unpinned object is found and evicted wherever it lives, however many pinned objects
// in other shards are older; with it gone, the next put gets NoSpace and evicts nothing.
TEST(ObjectStoreTest, EvictionFindsTheOnlyUnpinnedObjectInAnyShard) {
  constexpr int kObjects = 128;
  auto store = MakeStore(kObjects);
  std::vector<ReadHandle> pins;
  for (int i = 0; i < kObjects; ++i) {
    const std::string key = "key" + std::to_string(i);
    ASSERT_TRUE(Put(*store, "", key, Blocks(1, 'p')).ok());
  }
  // Pin all but the most recently written one, in reverse order (so the pins make the first
  // written the most recent again: the free one ends up in the middle of the order).
  for (int i = kObjects - 2; i >= 0; --i) {
    Result<ReadHandle> r = store->Lookup("", "key" + std::to_string(i));
    ASSERT_TRUE(r.ok());
    pins.push_back(std::move(*r));
  }
  const std::string free_key = "key" + std::to_string(kObjects - 1);
  ASSERT_TRUE(Put(*store, "", "new", Blocks(1, 'n')).ok());
  EXPECT_EQ(store->Exists("", free_key).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Stats().evictions, 1u);
  // Now "new" is the only unpinned object.
  ASSERT_TRUE(Put(*store, "", "newer", Blocks(1, 'n')).ok());
  EXPECT_EQ(store->Exists("", "new").code(), StatusCode::kNotFound);
  Result<ReadHandle> pin_newer = store->Lookup("", "newer");
  ASSERT_TRUE(pin_newer.ok());
  EXPECT_EQ(store->Reserve("", "refused", kBlock, "", kNoExpiry).status().code(),
            StatusCode::kNoSpace);
  EXPECT_EQ(store->Stats().evictions, 2u);
  for (const ReadHandle& pin : pins)
    EXPECT_EQ(AsView(pin), Blocks(1, 'p'));
  EXPECT_EQ(store->Stats().objects, static_cast<uint64_t>(kObjects));
}

// ---- Locks: uses of different keys do not wait for each other -------------------------------

// One use (a Lookup hit) is stalled inside its critical section, holding every lock a use
// holds. Meanwhile hits, commits and probes of other keys and Stats() proceed: they share no
// lock with it, except for keys that happen to hash to the same shard (64 shards: at most a few
// of the 32 keys below). The stalled use's own key waits. The arena holds every overwrite's new
// version beside its old one, so no overwrite in flight evicts another thread's key before that
// thread looks it up.
TEST(ObjectStoreTest, AStalledUseBlocksOnlyItsOwnShard) {
  constexpr int kOthers = 32;
  auto store = MakeStore(2 * kOthers + 8);
  ASSERT_TRUE(Put(*store, "ns", "stalled", "s").ok());
  for (int i = 0; i < kOthers; ++i)
    ASSERT_TRUE(Put(*store, "ns", "other" + std::to_string(i), "o").ok());

  std::mutex mu;
  std::condition_variable cv;
  bool stalled = false;
  bool release = false;
  store->SetUseHookForTesting([&](std::string_view ns, std::string_view key) {
    if (ns != "ns" || key != "stalled") return;
    std::unique_lock<std::mutex> lock(mu);
    stalled = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  std::thread staller([&] { EXPECT_TRUE(store->Lookup("ns", "stalled").ok()); });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return stalled; }));
  }

  // One thread per other key: hit, then overwrite (a commit), then probe. Count who finishes.
  std::atomic<int> finished{0};
  std::vector<std::thread> others;
  for (int i = 0; i < kOthers; ++i) {
    others.emplace_back([&, i] {
      const std::string key = "other" + std::to_string(i);
      EXPECT_TRUE(store->Lookup("ns", key).ok());
      EXPECT_TRUE(Put(*store, "ns", key, "p").ok());
      EXPECT_TRUE(store->Exists("ns", key).ok());
      finished.fetch_add(1);
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (finished.load() < kOthers - 4 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GE(finished.load(), kOthers - 4) << "uses of other keys waited for the stalled one";
  // Stats() takes no shard lock: it returns while the stalled use holds one. Overwrites still
  // in flight may each count their new object before the old one leaves.
  const uint64_t objects_meanwhile = store->Stats().objects;
  EXPECT_GE(objects_meanwhile, static_cast<uint64_t>(kOthers + 1));
  EXPECT_LE(objects_meanwhile, static_cast<uint64_t>(2 * kOthers + 1));

  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  staller.join();
  for (std::thread& t : others)
    t.join();
  store->SetUseHookForTesting(nullptr);
  EXPECT_EQ(finished.load(), kOthers);
  EXPECT_EQ(Get(*store, "ns", "stalled"), "s");
  EXPECT_EQ(store->UsageOf("ns").objects, static_cast<uint64_t>(kOthers + 1));
}

// ---- Any namespace -----------------------------------------------------------------------

TEST(ObjectStoreTest, AnyNamespaceSearchesTheDefaultFirstThenByName) {
  auto store = MakeStore(16);
  ASSERT_TRUE(Put(*store, "b", "k", "in b", "mb").ok());
  ASSERT_TRUE(Put(*store, "a", "k", "in a!", "ma").ok());
  ASSERT_TRUE(Put(*store, "", "k", "default", "m").ok());
  const StoreStats before = store->Stats();

  Result<ReadHandle> r = store->LookupInAnyNamespace("k");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ns(), "");
  EXPECT_EQ(AsView(*r), "default");
  EXPECT_EQ(r->meta(), "m");
  uint64_t length = 0;
  ASSERT_TRUE(store->ExistsInAnyNamespace("k", &length).ok());
  EXPECT_EQ(length, 7u);

  // Without the default namespace's copy, "a" comes before "b".
  ASSERT_TRUE(store->Delete("", "k").ok());
  r = store->LookupInAnyNamespace("k");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ns(), "a");
  EXPECT_EQ(AsView(*r), "in a!");
  ASSERT_TRUE(store->ExistsInAnyNamespace("k", &length).ok());
  EXPECT_EQ(length, 5u);
  ASSERT_TRUE(store->Delete("a", "k").ok());
  r = store->LookupInAnyNamespace("k");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ns(), "b");
  EXPECT_EQ(r->meta(), "mb");

  // One hit or one miss per search, however many namespaces it probed.
  length = 99;
  EXPECT_EQ(store->LookupInAnyNamespace("absent").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->ExistsInAnyNamespace("absent", &length).code(), StatusCode::kNotFound);
  EXPECT_EQ(length, 99u);  // untouched on NotFound
  const StoreStats after = store->Stats();
  EXPECT_EQ(after.hits - before.hits, 3u);
  EXPECT_EQ(after.misses - before.misses, 1u);

  EXPECT_EQ(store->LookupInAnyNamespace("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->ExistsInAnyNamespace("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->DeleteInEveryNamespace("").code(), StatusCode::kInvalidArgument);
}

// A key's namespaces are one chain in its shard, whose map entry views a chained object's key:
// replacing and removing the object it views (its first member) must leave the chain whole
// (ASan would report a view of a freed key).
TEST(ObjectStoreTest, AnyNamespaceFollowsReplacementsAndRemovalsOfEveryCopy) {
  auto store = MakeStore(64);
  for (const char* ns : {"b", "a", ""})
    ASSERT_TRUE(Put(*store, ns, "k", std::string("v-") + ns).ok());
  auto first_ns = [&] {
    Result<ReadHandle> r = store->LookupInAnyNamespace("k");
    return r.ok() ? std::string(r->ns()) + "=" + std::string(AsView(*r)) : std::string("miss");
  };
  EXPECT_EQ(first_ns(), "=v-");
  ASSERT_TRUE(store->Delete("b", "k").ok());  // the copy the entry viewed first
  EXPECT_EQ(first_ns(), "=v-");
  ASSERT_TRUE(Put(*store, "", "k", "new default").ok());  // replaced in place in the chain
  EXPECT_EQ(first_ns(), "=new default");
  ASSERT_TRUE(store->Delete("", "k").ok());
  EXPECT_EQ(first_ns(), "a=v-a");
  ASSERT_TRUE(Put(*store, "a", "k", "new a").ok());
  ASSERT_TRUE(Put(*store, "c", "k", "c").ok());
  EXPECT_EQ(first_ns(), "a=new a");
  uint64_t deleted = 0;
  ASSERT_TRUE(store->DeleteInEveryNamespace("k", &deleted).ok());
  EXPECT_EQ(deleted, 2u);
  EXPECT_EQ(first_ns(), "miss");
  ASSERT_TRUE(Put(*store, "z", "k", "back").ok());
  EXPECT_EQ(first_ns(), "z=back");
  EXPECT_EQ(store->DropAll(), 1u);
  EXPECT_EQ(first_ns(), "miss");
}

TEST(ObjectStoreTest, AnyNamespaceOrdersNamesBytewiseUnsigned) {
  auto store = MakeStore(8);
  ASSERT_TRUE(Put(*store, "\x80", "k", "high").ok());
  ASSERT_TRUE(Put(*store, "z", "k", "low").ok());
  ASSERT_TRUE(Put(*store, "za", "k", "longer").ok());
  Result<ReadHandle> r = store->LookupInAnyNamespace("k");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ns(), "z");  // 0x7A < 0x80, and a prefix sorts before its extensions
  ASSERT_TRUE(store->Delete("z", "k").ok());
  r = store->LookupInAnyNamespace("k");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ns(), "za");
}

TEST(ObjectStoreTest, DeleteInEveryNamespaceRemovesEachCopyAndEmptiedNamespacesDisappear) {
  auto store = MakeStore(16);
  ASSERT_TRUE(Put(*store, "", "k", "d").ok());
  ASSERT_TRUE(Put(*store, "a", "k", "aa").ok());
  ASSERT_TRUE(Put(*store, "b", "k", "bbb").ok());
  ASSERT_TRUE(Put(*store, "a", "other", "o").ok());
  Result<ReadHandle> pinned = store->LookupInAnyNamespace("k");
  ASSERT_TRUE(pinned.ok());

  uint64_t deleted = 0;
  ASSERT_TRUE(store->DeleteInEveryNamespace("k", &deleted).ok());
  EXPECT_EQ(deleted, 3u);
  for (const char* ns : {"", "a", "b"})
    EXPECT_EQ(store->Exists(ns, "k").code(), StatusCode::kNotFound) << ns;
  EXPECT_EQ(store->ExistsInAnyNamespace("k").code(), StatusCode::kNotFound);
  EXPECT_EQ(Get(*store, "a", "other"), "o");
  EXPECT_EQ(AsView(*pinned), "d");  // a reader keeps what it pinned

  std::vector<NamespaceUsage> all = store->NamespaceUsages();
  ASSERT_EQ(all.size(), 1u);  // "" and "b" are gone
  EXPECT_EQ(all[0].ns, "a");
  EXPECT_EQ(all[0].objects, 1u);
  EXPECT_EQ(store->Stats().objects, 1u);

  deleted = 7;
  EXPECT_EQ(store->DeleteInEveryNamespace("k", &deleted).code(), StatusCode::kNotFound);
  EXPECT_EQ(deleted, 0u);
  pinned->Reset();
  EXPECT_EQ(store->Stats().retired_bytes, 0u);
}

// Sweep removes exactly what expired, in any order of TTLs, and follows overwrites: a key
// rewritten without a TTL, or with a longer one, is not removed by its old expiry (Sweep walks
// each shard's expiry heap, not its index).
TEST(ObjectStoreTest, SweepRemovesWhatExpiredAndFollowsOverwrites) {
  ManualTtlClock clock;
  auto store = MakeStore(1024, &clock);
  for (int i = 0; i < 100; ++i) {
    const int ttl = 1 + (i * 37) % 100;  // 1..100 s, shuffled
    ASSERT_TRUE(Put(*store, "t", "k" + std::to_string(i), "v", "", ttl).ok());
    ASSERT_TRUE(Put(*store, "t", "forever" + std::to_string(i), "v").ok());
  }
  // k0 (ttl 1) rewritten without a TTL; k1 (ttl 38) rewritten with 1000 s.
  ASSERT_TRUE(Put(*store, "t", "k0", "kept").ok());
  ASSERT_TRUE(Put(*store, "t", "k1", "later", "", 1000).ok());
  clock.AdvanceSeconds(50);
  uint64_t expected = 0;
  for (int i = 2; i < 100; ++i)
    expected += 1 + (i * 37) % 100 <= 50 ? 1 : 0;
  EXPECT_EQ(store->Sweep(), expected);
  EXPECT_EQ(store->Sweep(), 0u);
  for (int i = 2; i < 100; ++i) {
    const bool live = 1 + (i * 37) % 100 > 50;
    EXPECT_EQ(store->Exists("t", "k" + std::to_string(i)).ok(), live) << i;
  }
  EXPECT_EQ(Get(*store, "t", "k0"), "kept");
  EXPECT_EQ(Get(*store, "t", "k1"), "later");
  clock.AdvanceSeconds(100);
  EXPECT_EQ(store->Sweep(), 100 - 2 - expected);
  EXPECT_EQ(store->Stats().objects, 100u + 2);  // the 100 without TTL, k0 and k1
  EXPECT_EQ(store->Stats().expirations, 98u);
}

TEST(ObjectStoreTest, AnyNamespaceSkipsExpiredCopies) {
  ManualTtlClock clock;
  auto store = MakeStore(8, &clock);
  ASSERT_TRUE(Put(*store, "", "t", "gone soon", "", 1).ok());
  ASSERT_TRUE(Put(*store, "x", "t", "stays", "", kNoExpiry).ok());
  ASSERT_TRUE(Put(*store, "y", "t", "also soon", "", 1).ok());
  clock.AdvanceSeconds(2);
  uint64_t length = 0;
  ASSERT_TRUE(store->ExistsInAnyNamespace("t", &length).ok());
  EXPECT_EQ(length, 5u);
  Result<ReadHandle> r = store->LookupInAnyNamespace("t");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ns(), "x");
  r->Reset();
  uint64_t deleted = 0;
  ASSERT_TRUE(store->DeleteInEveryNamespace("t", &deleted).ok());
  EXPECT_EQ(deleted, 1u);  // the expired copies were not live, so not deleted
  EXPECT_EQ(store->Stats().expirations, 2u);
  EXPECT_TRUE(store->NamespaceUsages().empty());
}

}  // namespace
}  // namespace kvport::store
