// SPDX-License-Identifier: Apache-2.0
// ObjectStore::DropAll: what a cluster node does when it takes a new epoch (docs/cluster.md).
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>

#include "store/object_store.h"
#include "store_test_util.h"

namespace kvport::store {
namespace {

using testing::Blocks;
using testing::Get;
using testing::kBlock;
using testing::MakeStore;
using testing::Put;

TEST(StoreDropTest, EveryObjectOfEveryNamespaceIsGoneAndItsSpaceFreed) {
  auto store = MakeStore(16);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Put(*store, "", "a", Blocks(1, 'a'), "meta-a").ok());
  ASSERT_TRUE(Put(*store, "", "b", Blocks(2, 'b')).ok());
  ASSERT_TRUE(Put(*store, "tenant", "a", Blocks(1, 'c')).ok());
  const StoreStats before = store->Stats();
  ASSERT_EQ(before.objects, 3u);

  EXPECT_EQ(store->DropAll(), 3u);

  EXPECT_EQ(Get(*store, "", "a"), std::nullopt);
  EXPECT_EQ(store->Exists("", "b").code(), StatusCode::kNotFound);
  EXPECT_EQ(store->LookupInAnyNamespace("a").status().code(), StatusCode::kNotFound);
  Result<KeyListing> listing = store->ListKeys("", "", 10);
  ASSERT_TRUE(listing.ok());
  EXPECT_TRUE(listing->keys.empty());
  EXPECT_TRUE(store->NamespaceUsages().empty());
  const StoreStats after = store->Stats();
  EXPECT_EQ(after.objects, 0u);
  EXPECT_EQ(after.used_bytes, 0u);
  EXPECT_EQ(after.value_bytes, 0u);
  EXPECT_EQ(after.index_bytes, 0u);
  // A drop is neither an eviction nor an expiration.
  EXPECT_EQ(after.evictions, before.evictions);
  EXPECT_EQ(after.expirations, before.expirations);
  EXPECT_EQ(store->DropAll(), 0u);

  // The store is an ordinary, empty store afterwards.
  ASSERT_TRUE(Put(*store, "", "a", "new").ok());
  EXPECT_EQ(Get(*store, "", "a"), "new");
}

TEST(StoreDropTest, APinnedObjectStaysReadableToItsReaderUntilReleased) {
  auto store = MakeStore(4);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Put(*store, "ns", "k", Blocks(1, 'P')).ok());
  Result<ReadHandle> reader = store->Lookup("ns", "k");
  ASSERT_TRUE(reader.ok());

  EXPECT_EQ(store->DropAll(), 1u);
  EXPECT_EQ(store->Lookup("ns", "k").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(reader->data()), reader->size()),
            Blocks(1, 'P'));
  EXPECT_EQ(store->Stats().objects, 0u);
  EXPECT_EQ(store->Stats().used_bytes, kBlock);  // held by the reader
  EXPECT_EQ(store->Stats().pinned_bytes, kBlock);
  reader->Reset();
  EXPECT_EQ(store->Stats().used_bytes, 0u);
  EXPECT_EQ(store->Stats().pinned_bytes, 0u);
}

TEST(StoreDropTest, AWriteReservedBeforeTheDropNeverBecomesVisible) {
  auto store = MakeStore(8);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Put(*store, "", "k", "old").ok());
  Result<WriteHandle> early = store->Reserve("", "k", 5, "", kNoExpiry);
  ASSERT_TRUE(early.ok());
  std::memcpy(early->data(), "early", 5);

  store->DropAll();
  ASSERT_TRUE(Put(*store, "", "k", "newer").ok());

  // OK (ordered before the drop), but neither visible nor replacing the newer version.
  EXPECT_TRUE(store->Commit(std::move(*early)).ok());
  EXPECT_EQ(Get(*store, "", "k"), "newer");
  EXPECT_EQ(store->Stats().objects, 1u);
  EXPECT_EQ(store->Stats().reserved_bytes, 0u);
  EXPECT_EQ(store->Stats().used_bytes, kBlock);
  ASSERT_TRUE(store->Delete("", "k").ok());
  EXPECT_EQ(store->Stats().used_bytes, 0u);
  EXPECT_EQ(store->Stats().index_bytes, 0u);

  // Same without a newer version: nothing appears at all.
  Result<WriteHandle> lone = store->Reserve("", "lone", 3, "", kNoExpiry);
  ASSERT_TRUE(lone.ok());
  std::memcpy(lone->data(), "abc", 3);
  store->DropAll();
  EXPECT_TRUE(store->Commit(std::move(*lone)).ok());
  EXPECT_EQ(Get(*store, "", "lone"), std::nullopt);
  EXPECT_EQ(store->Stats().objects, 0u);
  EXPECT_EQ(store->Stats().used_bytes, 0u);
}

TEST(StoreDropTest, AWriteReservedAfterTheDropIsKept) {
  auto store = MakeStore(8);
  ASSERT_NE(store, nullptr);
  store->DropAll();
  Result<WriteHandle> w = store->Reserve("", "k", 2, "m", kNoExpiry);
  ASSERT_TRUE(w.ok());
  std::memcpy(w->data(), "ok", 2);
  ASSERT_TRUE(store->Commit(std::move(*w)).ok());
  EXPECT_EQ(Get(*store, "", "k"), "ok");
  EXPECT_EQ(store->DropAll(), 1u);
  EXPECT_EQ(Get(*store, "", "k"), std::nullopt);
}

}  // namespace
}  // namespace kvport::store
