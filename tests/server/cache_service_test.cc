// SPDX-License-Identifier: Apache-2.0
// CacheService's shared-memory policy, which the Unix-socket tests cannot reach as another user,
// and what a shared-memory session holds (ArenaHoldings).
#include <gtest/gtest.h>
#include <unistd.h>

#include "server/arena_holdings.h"
#include "server/cache_service.h"
#include "server/request_context.h"
#include "store/tiered_store.h"

namespace kvport::server {
namespace {

std::unique_ptr<store::TieredStore> SmallStore() {
  store::TieredStoreOptions options;
  options.memory.capacity_bytes = 1 << 20;
  Result<std::unique_ptr<store::TieredStore>> store = store::TieredStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return std::move(store).value();
}

TEST(CacheServiceTest, OnlyTheNodesUserOrRootMayMapTheArena) {
  auto store = SmallStore();
  ServerCounters counters;
  ServiceOptions options;
  options.identity.unix_path = "/tmp/kvport-test.sock";
  CacheService service(store.get(), &counters, options);
  ASSERT_TRUE(service.offers_shared_memory());
  EXPECT_TRUE(service.MayMapArena(::geteuid()).ok());
  EXPECT_TRUE(service.MayMapArena(0).ok());
  const uid_t stranger = ::geteuid() == 12345 ? 12346 : 12345;
  Status refused = service.MayMapArena(stranger);
  EXPECT_EQ(refused.code(), StatusCode::kNotSupported);
  EXPECT_NE(refused.message().find("uid " + std::to_string(stranger)), std::string::npos)
      << refused.ToString();
}

TEST(CacheServiceTest, SharedMemoryNeedsTheOptionAUnixSocketAndAMemfdArena) {
  auto store = SmallStore();
  ServerCounters counters;
  ServiceOptions off;
  off.identity.unix_path = "/tmp/kvport-test.sock";
  off.offer_shared_memory = false;
  CacheService switched_off(store.get(), &counters, off);
  EXPECT_FALSE(switched_off.offers_shared_memory());
  EXPECT_NE(switched_off.MayMapArena(::geteuid()).message().find("switched off"),
            std::string::npos);
  CacheService no_socket(store.get(), &counters, ServiceOptions{});
  EXPECT_FALSE(no_socket.offers_shared_memory());
}

// A reservation ended without its commit stays reserved while its session has the arena
// mapped: the client may still be copying into it, and those bytes must not land in a key that
// reused the space. A session without a mapping gives it back at once.
TEST(ArenaHoldingsTest, AReservationEndedWithoutItsCommitIsKeptUntilTheMappingSessionEnds) {
  auto store = SmallStore();
  ServerCounters counters;
  ServiceOptions options;
  options.identity.unix_path = "/tmp/kvport-test.sock";
  CacheService service(store.get(), &counters, options);
  ASSERT_NE(service.lease_words(), nullptr);
  const auto now = MonotonicClock::now();
  const auto overdue = [](uint64_t) { return std::chrono::microseconds(0); };
  auto reserve = [&](ArenaHoldings& holdings, std::string_view key) {
    WriteBatch batch(&service, Grant::Everything());
    batch.Reserve("ns", key, 4096, "", 0);
    EXPECT_TRUE(batch.any_reserved());
    return holdings.AddReservation(std::move(batch), now);
  };
  {
    ArenaHoldings mapped;
    ASSERT_TRUE(mapped.TakeLeaseWord(service.lease_words()).ok());
    reserve(mapped, "overdue");
    EXPECT_EQ(mapped.AbortOverdueReservations(now + std::chrono::hours(1), overdue), 1u);
    const uint64_t left_out = reserve(mapped, "left out");
    Result<std::vector<StatusCode>> committed = mapped.Commit(left_out, std::vector<uint8_t>{0});
    ASSERT_TRUE(committed.ok()) << committed.status().ToString();
    EXPECT_EQ(*committed, std::vector<StatusCode>{StatusCode::kAborted});
    EXPECT_EQ(mapped.quarantined_bytes(), 2 * 4096u);
    EXPECT_EQ(store->memory().Stats().reserved_bytes, 2 * 4096u);  // neither back in the arena
    EXPECT_EQ(mapped.reservations(), 2u);  // they count against the session's reservations
    mapped.Clear();                        // the session ends
    EXPECT_EQ(store->memory().Stats().reserved_bytes, 0u);
  }
  ArenaHoldings unmapped;
  reserve(unmapped, "overdue");
  EXPECT_EQ(unmapped.AbortOverdueReservations(now + std::chrono::hours(1), overdue), 1u);
  EXPECT_EQ(store->memory().Stats().reserved_bytes, 0u);
  EXPECT_EQ(unmapped.reservations(), 0u);
}

}  // namespace
}  // namespace kvport::server

namespace kvport::server {
namespace {

// What a session keeps between requests is bounded: lists that grew past kKeptItems for one
// large batch are let go after its answer; smaller ones keep their capacity for the next.
TEST(ReplyScratchTest, ListsPastTheKeptSizeAreLetGoAndSmallerOnesKept) {
  ReplyScratch scratch;
  scratch.mget.results.resize(ReplyScratch::kKeptItems);
  scratch.mexist.results.resize(ReplyScratch::kKeptItems + 1);
  scratch.mdel.statuses.resize(4096);
  scratch.payloads.resize(4096);
  scratch.pins = std::make_shared<ReplyScratch::PinBlock>();
  scratch.pins->handles.resize(4096);
  scratch.Trim();
  EXPECT_EQ(scratch.mget.results.capacity(), ReplyScratch::kKeptItems);
  EXPECT_EQ(scratch.mexist.results.capacity(), 0u);
  EXPECT_EQ(scratch.mdel.statuses.capacity(), 0u);
  EXPECT_EQ(scratch.payloads.capacity(), 0u);
  EXPECT_EQ(scratch.pins, nullptr);
}

}  // namespace
}  // namespace kvport::server
