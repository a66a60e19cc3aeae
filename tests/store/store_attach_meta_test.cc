// SPDX-License-Identifier: Apache-2.0
// ObjectStore::AttachMeta (the Redis protocol's folded LMCache pairs: docs/resp.md): metadata
// set once, in place, on a live version committed without any; counted as the object's own and
// carried wherever the object goes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store/object_store.h"
#include "store_test_util.h"

namespace kvport::store {
namespace {

std::unique_ptr<ObjectStore> MakeStore(StoreOptions options) {
  Result<std::unique_ptr<ObjectStore>> store = ObjectStore::Create(options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return std::move(store).value();
}

StoreOptions Options(uint64_t capacity = 1 << 20) {
  StoreOptions options;
  options.capacity_bytes = capacity;
  return options;
}

void Put(ObjectStore& store, std::string_view key, std::string_view meta = "",
         uint64_t length = 4096) {
  Result<WriteHandle> w = store.Reserve("ns", key, length, meta, kNoExpiry);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::memset(w->data(), 'v', length);
  ASSERT_TRUE(store.Commit(std::move(*w)).ok());
}

TEST(StoreAttachMetaTest, AttachesOnceInPlaceAndCountsIt) {
  auto store = MakeStore(Options());
  Put(*store, "data");
  Result<ReadHandle> before = store->Lookup("ns", "data");
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->meta(), "");
  const uint64_t index_bytes = store->Stats().index_bytes;

  ASSERT_TRUE(store->AttachMeta("ns", "data", "meta!").ok());
  EXPECT_EQ(before->meta(), "meta!");  // the same version: a pin taken before sees it
  uint64_t value_length = 0, meta_length = 0;
  ASSERT_TRUE(store->Exists("ns", "data", &value_length, &meta_length).ok());
  EXPECT_EQ(value_length, 4096u);
  EXPECT_EQ(meta_length, 5u);
  EXPECT_EQ(store->Stats().index_bytes, index_bytes + 5);
  EXPECT_EQ(store->UsageOf("ns").meta_bytes, 5u);

  // Once: a second attach, and an object committed with metadata, are refused.
  EXPECT_EQ(store->AttachMeta("ns", "data", "other").code(), StatusCode::kAborted);
  EXPECT_EQ(store->Lookup("ns", "data")->meta(), "meta!");
  Put(*store, "with-meta", "m");
  EXPECT_EQ(store->AttachMeta("ns", "with-meta", "x").code(), StatusCode::kAborted);
  EXPECT_EQ(store->AttachMeta("ns", "missing", "x").code(), StatusCode::kNotFound);
  EXPECT_EQ(store->AttachMeta("ns", "data", "").code(), StatusCode::kInvalidArgument);

  // Removing the object gives its metadata's charge back.
  before->Reset();
  ASSERT_TRUE(store->Delete("ns", "data").ok());
  ASSERT_TRUE(store->Delete("ns", "with-meta").ok());
  EXPECT_EQ(store->Stats().index_bytes, 0u);
  EXPECT_EQ(store->UsageOf("ns").meta_bytes, 0u);
}

TEST(StoreAttachMetaTest, ANewVersionStartsWithoutIt) {
  auto store = MakeStore(Options());
  Put(*store, "data");
  ASSERT_TRUE(store->AttachMeta("ns", "data", "old").ok());
  Put(*store, "data");  // the chunk written again: its metadata must be written again too
  uint64_t meta_length = 99;
  ASSERT_TRUE(store->Exists("ns", "data", nullptr, &meta_length).ok());
  EXPECT_EQ(meta_length, 0u);
  ASSERT_TRUE(store->AttachMeta("ns", "data", "new").ok());
  EXPECT_EQ(store->Lookup("ns", "data")->meta(), "new");
}

TEST(StoreAttachMetaTest, EvictionHandsTheMetaOn) {
  StoreOptions options = Options(64 * 1024);
  std::vector<std::string> evicted_metas;
  testing::EvictedTo sink([&](const EvictedObject& o) {
    if (o.key == "first") evicted_metas.emplace_back(o.meta);
  });
  options.eviction_sink = &sink;
  auto store = MakeStore(options);
  Put(*store, "first");
  ASSERT_TRUE(store->AttachMeta("ns", "first", "its meta").ok());
  for (int i = 0; i < 32; ++i)
    Put(*store, "filler" + std::to_string(i));
  EXPECT_EQ(store->Exists("ns", "first").code(), StatusCode::kNotFound);
  ASSERT_EQ(evicted_metas.size(), 1u);
  EXPECT_EQ(evicted_metas[0], "its meta");
}

TEST(StoreAttachMetaTest, RefusedBeyondMaxIndexBytesWithoutEvicting) {
  StoreOptions options = Options();
  options.max_index_bytes = ObjectStore::ChargeOf("ns", "data", "") + 8;
  auto store = MakeStore(options);
  Put(*store, "data");
  EXPECT_EQ(store->AttachMeta("ns", "data", std::string(64, 'm')).code(), StatusCode::kNoSpace);
  EXPECT_TRUE(store->Exists("ns", "data").ok());  // nothing evicted
  EXPECT_TRUE(store->AttachMeta("ns", "data", "tiny").ok());
}

// Readers loading meta() while it is attached (the TSan lane checks the publication).
TEST(StoreAttachMetaTest, ReadersRaceTheAttach) {
  auto store = MakeStore(Options());
  for (int round = 0; round < 50; ++round) {
    Put(*store, "data");
    Result<ReadHandle> pin = store->Lookup("ns", "data");
    ASSERT_TRUE(pin.ok());
    std::atomic<bool> seen{false};
    std::thread reader([&] {
      for (int i = 0; i < 100000 && !seen; ++i) {
        std::string_view meta = pin->meta();
        if (!meta.empty()) {
          EXPECT_EQ(meta, "attached");
          seen = true;
        }
      }
    });
    ASSERT_TRUE(store->AttachMeta("ns", "data", "attached").ok());
    reader.join();
    EXPECT_EQ(pin->meta(), "attached");
  }
}

}  // namespace
}  // namespace kvport::store
