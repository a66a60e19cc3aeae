// SPDX-License-Identifier: Apache-2.0
// CacheService's shared-memory policy, which the Unix-socket tests cannot reach as another user.
#include <gtest/gtest.h>
#include <unistd.h>

#include "server/cache_service.h"
#include "server/request_context.h"
#include "store/object_store.h"

namespace kvport::server {
namespace {

std::unique_ptr<store::ObjectStore> SmallStore() {
  store::StoreOptions options;
  options.capacity_bytes = 1 << 20;
  Result<std::unique_ptr<store::ObjectStore>> store = store::ObjectStore::Create(options);
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
