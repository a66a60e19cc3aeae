// SPDX-License-Identifier: Apache-2.0
// ObjectStore::SetExpiry and ExpiryOf (the Redis protocol's EXPIRE, PERSIST, TTL: docs/resp.md):
// an expiry changed in place, on the injected clock, and the Sweep that honours it.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "store/object_store.h"
#include "store/ttl_clock.h"

namespace kvport::store {
namespace {

std::unique_ptr<ObjectStore> MakeStore(const TtlClock* clock) {
  StoreOptions options;
  options.capacity_bytes = 1 << 20;
  options.ttl_clock = clock;
  Result<std::unique_ptr<ObjectStore>> store = ObjectStore::Create(options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return std::move(store).value();
}

void Put(ObjectStore& store, std::string_view key, uint32_t ttl_seconds) {
  Result<WriteHandle> w = store.Reserve("ns", key, 1, "", ttl_seconds);
  ASSERT_TRUE(w.ok());
  w->data()[0] = 'v';
  ASSERT_TRUE(store.Commit(std::move(*w)).ok());
}

TEST(StoreExpiryTest, SetAndReadAnExpiryInPlace) {
  ManualTtlClock clock(1'000'000);
  auto store = MakeStore(&clock);
  Put(*store, "k", kNoExpiry);
  uint64_t left = 99;
  ASSERT_TRUE(store->ExpiryOf("ns", "k", &left).ok());
  EXPECT_EQ(left, 0u);  // never expires
  ASSERT_TRUE(store->SetExpiry("ns", "k", 1500).ok());
  ASSERT_TRUE(store->ExpiryOf("ns", "k", &left).ok());
  EXPECT_EQ(left, 1500u);
  clock.AdvanceMillis(1499);
  EXPECT_TRUE(store->Exists("ns", "k").ok());
  clock.AdvanceMillis(1);
  EXPECT_EQ(store->Exists("ns", "k").code(), StatusCode::kNotFound);
  EXPECT_EQ(store->ExpiryOf("ns", "k", &left).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->SetExpiry("ns", "k", 10).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->SetExpiry("ns", "missing", 10).code(), StatusCode::kNotFound);
}

TEST(StoreExpiryTest, PersistAndLengthenAreSweptRight) {
  ManualTtlClock clock;
  auto store = MakeStore(&clock);
  Put(*store, "a", 5);
  Put(*store, "b", 5);
  Put(*store, "c", kNoExpiry);
  ASSERT_TRUE(store->SetExpiry("ns", "a", 0).ok());       // persist
  ASSERT_TRUE(store->SetExpiry("ns", "b", 60'000).ok());  // longer
  ASSERT_TRUE(store->SetExpiry("ns", "c", 1'000).ok());   // a TTL where there was none
  clock.AdvanceSeconds(5);
  EXPECT_EQ(store->Sweep(), 1u);  // c
  EXPECT_TRUE(store->Exists("ns", "a").ok());
  EXPECT_TRUE(store->Exists("ns", "b").ok());
  EXPECT_EQ(store->Exists("ns", "c").code(), StatusCode::kNotFound);
  clock.AdvanceSeconds(55);
  EXPECT_EQ(store->Sweep(), 1u);  // b
  EXPECT_TRUE(store->Exists("ns", "a").ok());
  EXPECT_EQ(store->Stats().expirations, 2u);
}

TEST(StoreExpiryTest, APinReadsTheNewExpiry) {
  ManualTtlClock clock;
  auto store = MakeStore(&clock);
  Put(*store, "k", 10);
  Result<ReadHandle> pin = store->Lookup("ns", "k");
  ASSERT_TRUE(pin.ok());
  ASSERT_TRUE(store->SetExpiry("ns", "k", 2'000).ok());
  EXPECT_EQ(pin->ttl_left_ms(), 2'000u);
}

}  // namespace
}  // namespace kvport::store
