// SPDX-License-Identifier: Apache-2.0
// Many clients at once, and batches under capacity pressure.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "server_fixture.h"

namespace kvport::testing {
namespace {

TEST(ServerConcurrencyTest, EightClientsFiftyBatchesEachSeeTheirOwnBytes) {
  ServerOptions options = SmallNodeOptions();
  options.capacity_bytes = 64 << 20;  // everything fits: no eviction in this test
  options.threads = 3;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 8;
  constexpr int kBatches = 50;
  constexpr int kKeysPerBatch = 4;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      auto client = TestClient::Connect(server->port());
      if (!client.ok()) {
        ++failures;
        return;
      }
      std::string ns = "client" + std::to_string(t);
      for (int b = 0; b < kBatches; ++b) {
        std::vector<SetItem> items;
        std::vector<std::string> keys;
        for (int k = 0; k < kKeysPerBatch; ++k) {
          std::string key = "b" + std::to_string(b) + "k" + std::to_string(k);
          items.push_back({key, ValueFor(ns + key, 1000 + 997 * k), key});
          keys.push_back(key);
        }
        auto set = client->Mset(ns, items);
        if (!set.ok() || *set != std::vector<StatusCode>(kKeysPerBatch, StatusCode::kOk)) {
          ++failures;
          continue;
        }
        keys.push_back("never-written");
        auto got = client->Mget(ns, keys);
        if (!got.ok() || got->size() != keys.size()) {
          ++failures;
          continue;
        }
        for (int k = 0; k < kKeysPerBatch; ++k) {
          if ((*got)[k].status != StatusCode::kOk || (*got)[k].value != items[k].value ||
              (*got)[k].meta != items[k].meta) {
            ++failures;
          }
        }
        if (got->back().status != StatusCode::kNotFound) ++failures;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(failures.load(), 0);
  ServerStats stats = server->Stats();
  EXPECT_EQ(stats.Get("op_mset"), uint64_t{kClients * kBatches});
  EXPECT_EQ(stats.Get("op_mget"), uint64_t{kClients * kBatches});
  EXPECT_EQ(stats.Get("objects"), uint64_t{kClients * kBatches * kKeysPerBatch});
  EXPECT_EQ(stats.Get("misses"), uint64_t{kClients * kBatches});
  EXPECT_EQ(stats.namespaces.size(), size_t{kClients});
}

TEST(ServerConcurrencyTest, UnderCapacityPressureEveryKeyGetsItsTrueStatus) {
  ServerOptions options = SmallNodeOptions();
  options.capacity_bytes = 256 * 1024;
  // The check below reads every stored value in one MGET, more than the default pinned cap
  // (half the capacity) allows at once; this test is about writes under pressure.
  options.max_pinned_bytes = options.capacity_bytes;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  const uint64_t capacity = server->Stats().Get("capacity_bytes");
  ASSERT_GT(capacity, 0u);

  ASSERT_TRUE(client.Mset("p", {{"old", ValueFor("old", 1000), ""}}).ok());
  // One batch: a value larger than the whole node, then more 64 KiB values than fit at once.
  // Reservations of one batch cannot evict each other, so the tail of the batch gets NoSpace
  // (each item decided as its first payload byte arrives).
  std::vector<SetItem> items;
  items.push_back({"huge", ValueFor("huge", capacity + 4096), ""});
  for (int i = 0; i < 6; ++i) {
    std::string key = "v" + std::to_string(i);
    items.push_back({key, ValueFor(key, 64 * 1024), "meta" + key});
  }
  auto set = client.Mset("p", items);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ((*set)[0], StatusCode::kTooLarge);
  int stored = 0, no_space = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    EXPECT_TRUE((*set)[i] == StatusCode::kOk || (*set)[i] == StatusCode::kNoSpace)
        << i << ": " << StatusCodeName((*set)[i]);
    stored += (*set)[i] == StatusCode::kOk;
    no_space += (*set)[i] == StatusCode::kNoSpace;
  }
  EXPECT_GT(stored, 0);
  EXPECT_GT(no_space, 0);

  // The truth per key: stored keys return exactly their bytes; refused ones do not exist (no
  // half-written object is visible); "old" was evicted or is intact, never corrupted.
  std::vector<std::string> keys = {"huge", "old", "missing"};
  for (size_t i = 1; i < items.size(); ++i)
    keys.push_back(items[i].key);
  auto got = client.Mget("p", keys);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].status, StatusCode::kNotFound);
  if ((*got)[1].status == StatusCode::kOk) {
    EXPECT_TRUE((*got)[1].value == ValueFor("old", 1000));
  } else {
    EXPECT_EQ((*got)[1].status, StatusCode::kNotFound);
  }
  EXPECT_EQ((*got)[2].status, StatusCode::kNotFound);
  for (size_t i = 1; i < items.size(); ++i) {
    const GetItem& g = (*got)[i + 2];
    if ((*set)[i] == StatusCode::kOk) {
      EXPECT_EQ(g.status, StatusCode::kOk) << items[i].key;
      EXPECT_TRUE(g.value == items[i].value) << items[i].key;
      EXPECT_EQ(g.meta, items[i].meta);
    } else {
      EXPECT_EQ(g.status, StatusCode::kNotFound) << items[i].key;
    }
  }
  ServerStats stats = server->Stats();
  EXPECT_LE(stats.Get("used_bytes"), capacity);
  EXPECT_EQ(stats.Get("reserved_bytes"), 0u);

  // The connection is still in sync after discarding refused payloads.
  ASSERT_TRUE(client.Ping().ok());
  // A later batch evicts the LRU objects to make room: everything fits again.
  auto again = client.Mset(
      "p", {{"w0", ValueFor("w0", 64 * 1024), ""}, {"w1", ValueFor("w1", 64 * 1024), ""}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, std::vector<StatusCode>(2, StatusCode::kOk));
}

// A client that pipelines MGETs and never reads its answers stops being read from once its
// queued answers cost max_connection_outstanding_bytes (plus the one answer that crossed it),
// while the node goes on serving others; once it reads, every answer arrives, complete and in
// order. The pipeline is far larger than what the kernel's socket buffers absorb (a few MiB),
// so without backpressure the node reads every request and queues ~40 MiB for this client
// (this test passed either way before it asserted the bound).
TEST(ServerConcurrencyTest, BackpressureKeepsPipelinedResponsesCompleteAndInOrder) {
  ServerOptions options = SmallNodeOptions();
  constexpr uint64_t kCap = 64 * 1024;  // below one response
  options.max_connection_outstanding_bytes = kCap;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  ASSERT_TRUE(net::SetReceiveBufferSize(client.fd(), 64 * 1024).ok());
  const std::string value = ValueFor("big", 1 << 20);
  ASSERT_TRUE(client.Mset("", {{"big", value, ""}}).ok());

  constexpr int kRequests = 48;
  protocol::MgetRequest get;
  get.keys.push_back({"big"});
  std::string pipelined;
  for (int i = 0; i < kRequests; ++i) {
    protocol::EncodedFrame frame;
    ASSERT_TRUE(
        protocol::EncodeRequest(1000 + i, get, client.limits(), &frame, client.version()).ok());
    pipelined += frame.Flatten();
  }
  ASSERT_TRUE(client.SendRaw(pipelined).ok());  // a few KiB: the socket takes it at once
  auto stat = [&](const char* name) { return server->Stats().Get(name); };
  ASSERT_TRUE(
      Eventually([&] { return stat("paused_connections") == 1 || stat("op_mget") == kRequests; }));
  EXPECT_EQ(stat("paused_connections"), 1u);
  EXPECT_LT(stat("op_mget"), uint64_t{kRequests});  // it stopped reading requests
  // Its own cap, plus the one answer (value + head + bookkeeping) queued before it paused.
  EXPECT_LE(stat("queued_response_bytes"), kCap + value.size() + 4096);

  // Others are served meanwhile.
  TestClient other = MustConnect(*server);
  auto got = other.Mget("", {"big"});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE((*got)[0].value == value);

  for (int i = 0; i < kRequests; ++i) {
    auto frame = client.ReadFrame();
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    EXPECT_EQ(frame->header.request_id, uint64_t(1000 + i));
    EXPECT_TRUE(frame->payload == value);
  }
  EXPECT_EQ(stat("hits"), uint64_t{kRequests + 1});
  EXPECT_TRUE(Eventually([&] { return stat("queued_response_bytes") == 0; }));
}

}  // namespace
}  // namespace kvport::testing
