// SPDX-License-Identifier: Apache-2.0
// The store's node-wide bounds beside the arena: what objects cost on the heap (max_index_bytes,
// which eviction sees), reservations (max_reserved_bytes) and pinned values (max_pinned_bytes).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "store_test_util.h"

namespace kvport::store::testing {
namespace {

std::unique_ptr<ObjectStore> MakeCappedStore(uint64_t blocks, uint64_t max_index,
                                             uint64_t max_reserved, uint64_t max_pinned) {
  StoreOptions options;
  options.capacity_bytes = blocks * kBlock;
  options.max_index_bytes = max_index;
  options.max_reserved_bytes = max_reserved;
  options.max_pinned_bytes = max_pinned;
  auto store = ObjectStore::Create(options);
  return store.ok() ? std::move(store).value() : nullptr;
}

// 0-byte values take no arena space: before the index budget, 100k of them with 4 KiB of
// metadata each grew the heap by 400 MiB and never evicted anything. Now each is charged its
// key, metadata and entry, and eviction keeps the total under the budget.
TEST(StoreCapsTest, ZeroByteValuesWithLargeMetadataAreBoundedAndEvicted) {
  constexpr uint64_t kBudget = 256 * 1024;
  auto store = MakeCappedStore(16, kBudget, 0, 0);
  ASSERT_NE(store, nullptr);
  const std::string meta(4000, 'm');
  const uint64_t charge = ObjectStore::ChargeOf("ns", "key-00000", meta);
  ASSERT_GT(charge, meta.size());
  constexpr int kPuts = 2000;  // 8 MB of metadata against a 256 KiB budget
  for (int i = 0; i < kPuts; ++i) {
    char key[16];
    std::snprintf(key, sizeof(key), "key-%05d", i);
    ASSERT_TRUE(Put(*store, "ns", key, "", meta).ok()) << i;
    ASSERT_LE(store->Stats().index_bytes, kBudget) << i;
  }
  StoreStats s = store->Stats();
  EXPECT_EQ(s.objects, kBudget / charge);
  EXPECT_EQ(s.index_bytes, s.objects * charge);
  EXPECT_EQ(s.evictions, kPuts - s.objects);
  EXPECT_EQ(s.used_bytes, 0u);  // no arena space: the budget alone bounded them
  // LRU order: the newest survive.
  EXPECT_TRUE(Get(*store, "ns", "key-01999").has_value());
  EXPECT_FALSE(Get(*store, "ns", "key-00000").has_value());
  EXPECT_EQ(store->Stats().max_index_bytes, kBudget);
}

// The disk tier's index counts against the same budget (StoreOptions::index_bytes_elsewhere):
// the store keeps what is left of it, and never less than half.
TEST(StoreCapsTest, IndexBytesElsewhereShrinkTheStoresShareDownToHalf) {
  constexpr uint64_t kBudget = 64 * 1024;
  const std::string meta(1000, 'm');
  const uint64_t charge = ObjectStore::ChargeOf("ns", "key-00000", meta);
  std::atomic<uint64_t> elsewhere{0};
  StoreOptions options;
  options.capacity_bytes = 16 * kBlock;
  options.max_index_bytes = kBudget;
  options.index_bytes_elsewhere = &elsewhere;
  auto store = ObjectStore::Create(options);
  ASSERT_TRUE(store.ok());
  auto fill = [&] {
    for (int i = 0; i < 200; ++i) {
      char key[16];
      std::snprintf(key, sizeof(key), "key-%05d", i);
      ASSERT_TRUE(Put(**store, "ns", key, "", meta).ok()) << i;
    }
  };
  fill();
  EXPECT_EQ((*store)->Stats().objects, kBudget / charge);
  elsewhere = kBudget / 4;
  fill();
  EXPECT_EQ((*store)->Stats().objects, (kBudget - kBudget / 4) / charge);
  elsewhere = kBudget;  // more than half: the store keeps half
  fill();
  EXPECT_EQ((*store)->Stats().objects, (kBudget / 2) / charge);
}

TEST(StoreCapsTest, IndexBudgetCountsReservationsAndIsReturnedWhenObjectsGo) {
  const std::string meta(1000, 'x');
  const uint64_t charge = ObjectStore::ChargeOf("", "k", meta);
  auto store = MakeCappedStore(16, 2 * charge, 0, 0);
  ASSERT_NE(store, nullptr);
  Result<WriteHandle> a = store->Reserve("", "k", 0, meta, kNoExpiry);
  Result<WriteHandle> b = store->Reserve("", "j", 0, meta, kNoExpiry);
  ASSERT_TRUE(a.ok() && b.ok());
  // Reservations cannot be evicted: a third object has no room.
  Result<WriteHandle> c = store->Reserve("", "i", 0, meta, kNoExpiry);
  EXPECT_EQ(c.status().code(), StatusCode::kNoSpace);
  EXPECT_NE(c.status().message().find("max_index_bytes"), std::string::npos);
  store->Abort(std::move(*a));
  ASSERT_TRUE(store->Commit(std::move(*b)).ok());
  EXPECT_EQ(store->Stats().index_bytes, charge);
  ASSERT_TRUE(store->Delete("", "j").ok());
  EXPECT_EQ(store->Stats().index_bytes, 0u);
}

// A writer that never fills its reservation must not let reservations take the arena: beyond
// max_reserved_bytes, Reserve is NoSpace at once and evicts nothing.
TEST(StoreCapsTest, ReservedBytesCapRefusesWithoutEvicting) {
  auto store = MakeCappedStore(16, 0, 4 * kBlock, 0);
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE(Put(*store, "", "old" + std::to_string(i), Blocks(1, 'o')).ok());
  Result<WriteHandle> big = store->Reserve("", "big", 3 * kBlock, "", kNoExpiry);
  ASSERT_TRUE(big.ok());
  Result<WriteHandle> more = store->Reserve("", "more", 2 * kBlock, "", kNoExpiry);
  EXPECT_EQ(more.status().code(), StatusCode::kNoSpace);
  EXPECT_NE(more.status().message().find("max_reserved_bytes"), std::string::npos);
  StoreStats s = store->Stats();
  EXPECT_EQ(s.reserved_bytes, 3 * kBlock);
  EXPECT_EQ(s.reserve_cap_refusals, 1u);
  EXPECT_EQ(s.objects, 8u);  // nothing was evicted for the refused reservation
  // What fits under the cap is still admitted, and committing gives the room back.
  Result<WriteHandle> small = store->Reserve("", "small", kBlock, "", kNoExpiry);
  ASSERT_TRUE(small.ok());
  ASSERT_TRUE(store->Commit(std::move(*small)).ok());
  store->Abort(std::move(*big));
  EXPECT_EQ(store->Stats().reserved_bytes, 0u);
  // One value larger than the cap is admitted when nothing else is reserved.
  Result<WriteHandle> alone = store->Reserve("", "alone", 6 * kBlock, "", kNoExpiry);
  EXPECT_TRUE(alone.ok()) << alone.status().ToString();
}

// Readers may pin at most max_pinned_bytes of distinct values: an object pinned many times
// counts once, copies of a pin are always allowed, and a new pin beyond the cap is NoSpace.
TEST(StoreCapsTest, PinnedBytesCapCountsObjectsOnceAndRefusesNewPinsBeyondIt) {
  auto store = MakeCappedStore(16, 0, 0, 2 * kBlock);
  ASSERT_NE(store, nullptr);
  for (const char* k : {"a", "b", "c"})
    ASSERT_TRUE(Put(*store, "", k, Blocks(1, *k)).ok());
  std::vector<ReadHandle> pins;
  for (int i = 0; i < 5; ++i) {
    Result<ReadHandle> a = store->Lookup("", "a");
    ASSERT_TRUE(a.ok());
    pins.push_back(std::move(*a));
  }
  EXPECT_EQ(store->Stats().pinned_bytes, kBlock);
  Result<ReadHandle> b = store->Lookup("", "b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(store->Stats().pinned_bytes, 2 * kBlock);
  Result<ReadHandle> c = store->Lookup("", "c");
  EXPECT_EQ(c.status().code(), StatusCode::kNoSpace);
  EXPECT_NE(c.status().message().find("max_pinned_bytes"), std::string::npos);
  EXPECT_EQ(store->Stats().pin_cap_refusals, 1u);
  ReadHandle copy = *b;  // another pin on a pinned object: free
  EXPECT_EQ(store->Stats().pinned_bytes, 2 * kBlock);
  // Once the last pin on "a" goes, "c" may be pinned.
  pins.clear();
  EXPECT_EQ(store->Stats().pinned_bytes, kBlock);
  EXPECT_TRUE(store->Lookup("", "c").ok());
  copy.Reset();
  b->Reset();
  EXPECT_EQ(store->Stats().pinned_bytes, 0u);
  // Retired versions stay pinned until their last reader: an overwrite does not unpin.
  Result<ReadHandle> old = store->Lookup("", "a");
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(Put(*store, "", "a", Blocks(1, 'A')).ok());
  EXPECT_EQ(store->Stats().pinned_bytes, kBlock);
  old->Reset();
  EXPECT_EQ(store->Stats().pinned_bytes, 0u);
}

}  // namespace
}  // namespace kvport::store::testing
