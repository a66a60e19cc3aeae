// SPDX-License-Identifier: Apache-2.0
// Every request type against a real in-process node.
#include <gtest/gtest.h>

#include <algorithm>

#include "kvport/client.h"
#include "server_fixture.h"

namespace kvport::testing {
namespace {

TEST(ServerRoundTripTest, MsetThenMgetReturnsEveryByteAndMeta) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  ASSERT_TRUE(client.Ping().ok());

  std::vector<SetItem> items = {{"a", ValueFor("a", 100000), "meta-a"},
                                {"b", "", "meta-only-b"},  // an empty value is a value
                                {"c", ValueFor("c", 1), ""}};
  auto set = client.Mset("ns1", items);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(*set, std::vector<StatusCode>(3, StatusCode::kOk));

  auto got = client.Mget("ns1", {"a", "missing", "b", "c"});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 4u);
  EXPECT_EQ((*got)[0].status, StatusCode::kOk);
  EXPECT_EQ((*got)[0].meta, "meta-a");
  EXPECT_TRUE((*got)[0].value == items[0].value);
  EXPECT_EQ((*got)[1].status, StatusCode::kNotFound);
  EXPECT_EQ((*got)[2].status, StatusCode::kOk);
  EXPECT_EQ((*got)[2].meta, "meta-only-b");
  EXPECT_EQ((*got)[2].value, "");
  EXPECT_EQ((*got)[3].value, items[2].value);

  // Namespaces are separate.
  auto other = client.Mget("ns2", {"a"});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)[0].status, StatusCode::kNotFound);
}

// The node reads ahead of each step (net/stream.h): a small call, written by the client in one
// writev, is read in one system call, not one each for its header, descriptor and value (and
// another that finds nothing). Counted by the node itself (socket_reads).
// A client of `server` over TCP (a same-host client would otherwise choose shared memory).
void InitTcpClient(const Server& server, Client* client) {
  InitOptions tcp;
  tcp.transport_type = 1;
  ASSERT_TRUE(client->Init("round-trip-test", server.address(), tcp).ok());
}

TEST(ServerRoundTripTest, ASmallCallIsReadInOneSystemCall) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  InitTcpClient(*server, &client);
  std::vector<char> value(4096, 'v');
  std::vector<char> out(4096);
  IOBuffers in, back;
  in.Append(value.data(), value.size());
  back.Append(out.data(), out.size());
  ASSERT_TRUE(client.MSet({"warm"}, in).ok());

  constexpr int kCalls = 100;
  const uint64_t before = server->Stats().Get("socket_reads");
  for (int i = 0; i < kCalls; ++i) {
    Result<BatchResult> put = client.MSet({"k" + std::to_string(i)}, in);
    ASSERT_TRUE(put.ok() && put->status == BatchCode::kSuccess);
  }
  for (int i = 0; i < kCalls; ++i) {
    Result<GetResult> got = client.MGet({"k" + std::to_string(i)}, {}, back);
    ASSERT_TRUE(got.ok() && got->status == BatchCode::kSuccess);
  }
  const uint64_t reads = server->Stats().Get("socket_reads") - before;
  // One per call, and some slack for a request the kernel delivered in two pieces. Without
  // read-ahead: 4 per MSET and 3 per MGET.
  EXPECT_LE(reads, 2 * kCalls * 3 / 2) << reads << " reads for " << 2 * kCalls << " calls";
  EXPECT_GE(reads, 2u * kCalls);
}

// Busy polling (ServerOptions::busy_poll): after answering a call the node's I/O thread keeps
// asking epoll instead of sleeping, so the next call of a client calling back to back is found
// while it polls (busy_poll_hits), never by a thread woken from sleep. With the maximum spin a
// client's next call comes well within it on any machine; without busy polling nothing counts.
TEST(ServerRoundTripTest, ABusyPollingNodeFindsTheNextCallWithoutSleeping) {
  for (const auto spin : {std::chrono::microseconds(0), std::chrono::microseconds(1'000'000)}) {
    ServerOptions options = SmallNodeOptions();
    options.threads = 1;
    options.busy_poll = spin;
    auto server = StartNode(options);
    ASSERT_NE(server, nullptr);
    Client client;
    InitTcpClient(*server, &client);
    std::vector<char> value(4096, 'v');
    IOBuffers in;
    in.Append(value.data(), value.size());
    constexpr int kCalls = 40;
    const uint64_t before = server->Stats().Get("busy_poll_hits");
    for (int i = 0; i < kCalls; ++i) {
      Result<BatchResult> put = client.MSet({"k" + std::to_string(i)}, in);
      ASSERT_TRUE(put.ok() && put->status == BatchCode::kSuccess);
    }
    const uint64_t hits = server->Stats().Get("busy_poll_hits") - before;
    if (spin.count() == 0) {
      EXPECT_EQ(hits, 0u);
    } else {
      // Each call after the first (and the STATS call) arrives while the thread polls; a
      // preempted client may miss a spin now and then.
      EXPECT_GE(hits, kCalls / 2) << hits << " of " << kCalls << " calls";
    }
  }
}

TEST(ServerRoundTripTest, ABusyPollOverOneSecondIsRefused) {
  ServerOptions options = SmallNodeOptions();
  options.busy_poll = std::chrono::microseconds(1'000'001);
  Result<std::unique_ptr<Server>> server = Server::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("busy_poll"), std::string::npos);
}

TEST(ServerRoundTripTest, MetaOnlyAndTooSmallBuffersReportLengthsWithoutBytes) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  ASSERT_TRUE(client.Mset("", {{"k", ValueFor("k", 5000), "m"}}).ok());

  auto meta = client.Mget("", {"k", "nope"}, /*meta_only=*/true);
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ((*meta)[0].status, StatusCode::kOk);
  EXPECT_EQ((*meta)[0].meta, "m");
  EXPECT_EQ((*meta)[0].value_length, 5000u);
  EXPECT_TRUE((*meta)[0].value.empty());
  EXPECT_EQ((*meta)[1].status, StatusCode::kNotFound);

  auto small = client.Mget("", {"k"}, false, /*buffer_capacity=*/4999);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ((*small)[0].status, StatusCode::kTooLarge);
  EXPECT_EQ((*small)[0].value_length, 5000u);
  EXPECT_TRUE((*small)[0].value.empty());
}

TEST(ServerRoundTripTest, MexistMdelAndTheLastWriteOfADuplicateKeyWins) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  auto set = client.Mset("n", {{"dup", "first", ""}, {"x", "xx", ""}, {"dup", "second!", ""}});
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(*set, std::vector<StatusCode>(3, StatusCode::kOk));

  const uint64_t hits_before = server->Stats().Get("hits");
  auto exist = client.Mexist("n", {"dup", "x", "y"});
  ASSERT_TRUE(exist.ok()) << exist.status().ToString();
  EXPECT_EQ((*exist)[0].status, StatusCode::kOk);
  EXPECT_EQ((*exist)[0].value_length, 7u);
  EXPECT_EQ((*exist)[1].value_length, 2u);
  EXPECT_EQ((*exist)[2].status, StatusCode::kNotFound);
  EXPECT_EQ(server->Stats().Get("hits"), hits_before);  // a probe is not a use

  auto got = client.Mget("n", {"dup"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].value, "second!");

  auto del = client.Mdel("n", {"dup", "y"});
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(*del, (std::vector<StatusCode>{StatusCode::kOk, StatusCode::kNotFound}));
  auto after = client.Mget("n", {"dup", "x"});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)[0].status, StatusCode::kNotFound);
  EXPECT_EQ((*after)[1].status, StatusCode::kOk);
}

TEST(ServerRoundTripTest, AnyNamespaceRequestsMatchTheKeyInEveryNamespace) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  ASSERT_EQ(client.version(), protocol::kMaxProtocolVersion);
  ASSERT_TRUE(client.Mset("x", {{"k", "in-x", "mx"}}).ok());
  constexpr bool kAny = true;
  constexpr uint64_t kNoLimit = protocol::kUnlimitedCapacity;

  // The default namespace, exactly, does not hold it; any namespace does.
  auto exact = client.Mexist("", {"k"});
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ((*exact)[0].status, StatusCode::kNotFound);
  auto exist = client.Mexist("", {"k", "nope"}, kAny);
  ASSERT_TRUE(exist.ok()) << exist.status().ToString();
  EXPECT_EQ((*exist)[0].status, StatusCode::kOk);
  EXPECT_EQ((*exist)[0].value_length, 4u);
  EXPECT_EQ((*exist)[1].status, StatusCode::kNotFound);

  auto got = client.Mget("", {"k", "nope"}, /*meta_only=*/false, kNoLimit, kAny);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].status, StatusCode::kOk);
  EXPECT_EQ((*got)[0].value, "in-x");
  EXPECT_EQ((*got)[0].meta, "mx");
  EXPECT_EQ((*got)[1].status, StatusCode::kNotFound);
  auto meta = client.Mget("", {"k"}, /*meta_only=*/true, kNoLimit, kAny);
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ((*meta)[0].value_length, 4u);
  EXPECT_EQ((*meta)[0].meta, "mx");
  EXPECT_TRUE((*meta)[0].value.empty());
  auto small = client.Mget("", {"k"}, false, /*buffer_capacity=*/3, kAny);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ((*small)[0].status, StatusCode::kTooLarge);

  // The default namespace first, then the others by name.
  ASSERT_TRUE(client.Mset("", {{"k", "default!", ""}}).ok());
  ASSERT_TRUE(client.Mset("a", {{"k", "in-a", "ma"}}).ok());
  got = client.Mget("", {"k"}, false, kNoLimit, kAny);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].value, "default!");
  // An exact MDEL of the default namespace deletes that copy only.
  auto del = client.Mdel("", {"k"});
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(*del, std::vector<StatusCode>{StatusCode::kOk});
  got = client.Mget("", {"k"}, false, kNoLimit, kAny);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].value, "in-a");
  exist = client.Mexist("x", {"k"});
  ASSERT_TRUE(exist.ok());
  EXPECT_EQ((*exist)[0].status, StatusCode::kOk);

  // An any-namespace MDEL deletes it in every namespace; the emptied namespaces disappear.
  ASSERT_TRUE(client.Mset("x", {{"keep", "me", ""}}).ok());
  del = client.Mdel("", {"k", "nope"}, kAny);
  ASSERT_TRUE(del.ok()) << del.status().ToString();
  EXPECT_EQ(*del, (std::vector<StatusCode>{StatusCode::kOk, StatusCode::kNotFound}));
  for (const char* ns : {"", "a", "x"}) {
    exist = client.Mexist(ns, {"k"});
    ASSERT_TRUE(exist.ok());
    EXPECT_EQ((*exist)[0].status, StatusCode::kNotFound) << ns;
  }
  del = client.Mdel("", {"k"}, kAny);
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(*del, std::vector<StatusCode>{StatusCode::kNotFound});
  ServerStats stats = server->Stats();
  ASSERT_EQ(stats.namespaces.size(), 1u);
  EXPECT_EQ(stats.namespaces[0].ns, "x");
  EXPECT_EQ(stats.Get("objects"), 1u);
}

TEST(ServerRoundTripTest, AVersion1ClientIsServedInVersion1) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  auto old = TestClient::Connect(server->port(), /*hello=*/true, /*max_version=*/1);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->version(), 1);
  ASSERT_TRUE(old->Mset("n", {{"k", "v1 value", "m"}}).ok());
  auto got = old->Mget("n", {"k"});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].value, "v1 value");
  auto exist = old->Mexist("n", {"k"});
  ASSERT_TRUE(exist.ok());
  EXPECT_EQ((*exist)[0].value_length, 8u);

  // Its responses are version 1 frames.
  protocol::EncodedFrame ping;
  ASSERT_TRUE(protocol::EncodeRequest(500, protocol::PingRequest{}, old->limits(), &ping, 1).ok());
  ASSERT_TRUE(old->Send(ping).ok());
  auto pong = old->ReadFrame();
  ASSERT_TRUE(pong.ok()) << pong.status().ToString();
  EXPECT_EQ(pong->header.version, 1);
  EXPECT_EQ(pong->header.request_id, 500u);

  auto del = old->Mdel("n", {"k"});
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(*del, std::vector<StatusCode>{StatusCode::kOk});
}

TEST(ServerRoundTripTest, ListPagesThroughEveryKeyOfANamespace) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  std::vector<SetItem> items;
  std::vector<std::string> expected;
  for (int i = 0; i < 23; ++i) {
    std::string key = "key-" + std::to_string(100 + i);
    items.push_back({key, "v", ""});
    expected.push_back(key);
  }
  ASSERT_TRUE(client.Mset("listed", items).ok());
  ASSERT_TRUE(client.Mset("other", {{"not-me", "v", ""}}).ok());

  auto all = client.ListAll("listed", 5);  // 5 pages, cursors in between
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::sort(all->begin(), all->end());
  EXPECT_EQ(*all, expected);

  // A cursor belongs to its listing: another namespace cannot use it.
  uint64_t next = 0;
  ASSERT_TRUE(client.List("listed", 0, 5, &next).ok());
  ASSERT_NE(next, 0u);
  auto wrong = client.List("other", next, 5, &next);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  // That request alone is refused: the session goes on, the cursor still works for its listing.
  EXPECT_TRUE(client.Ping().ok());
  EXPECT_TRUE(client.List("listed", next, 5, &next).ok());
}

TEST(ServerRoundTripTest, StatsReportsStoreAndServerCountersAndNamespaces) {
  ServerOptions options = SmallNodeOptions();
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  ASSERT_TRUE(client.Mset("alpha", {{"k1", std::string(1000, 'x'), "mm"}}).ok());
  ASSERT_TRUE(client.Mset("beta", {{"k2", "yy", ""}, {"k3", "zzz", ""}}).ok());
  ASSERT_TRUE(client.Mget("alpha", {"k1", "nope"}).ok());

  auto stats = client.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_GT(stats->Get("capacity_bytes"), 0u);
  EXPECT_LE(stats->Get("capacity_bytes"), options.capacity_bytes);
  EXPECT_GT(stats->Get("used_bytes"), 0u);
  EXPECT_EQ(stats->Get("objects"), 3u);
  EXPECT_EQ(stats->Get("hits"), 1u);
  EXPECT_EQ(stats->Get("misses"), 1u);
  EXPECT_EQ(stats->Get("evictions"), 0u);
  EXPECT_EQ(stats->Get("connections"), 1u);
  EXPECT_EQ(stats->Get("op_hello"), 1u);
  EXPECT_EQ(stats->Get("op_mset"), 2u);
  EXPECT_EQ(stats->Get("op_mget"), 1u);
  EXPECT_EQ(stats->Get("op_stats"), 1u);
  ASSERT_EQ(stats->namespaces.size(), 2u);
  EXPECT_EQ(stats->namespaces[0].ns, "alpha");
  EXPECT_EQ(stats->namespaces[0].objects, 1u);
  EXPECT_EQ(stats->namespaces[0].bytes, 1002u);
  EXPECT_EQ(stats->namespaces[1].ns, "beta");
  EXPECT_EQ(stats->namespaces[1].objects, 2u);
  EXPECT_EQ(stats->namespaces[1].bytes, 5u);
  for (const char* name : {"expirations", "bytes_received", "bytes_sent", "op_ping"}) {
    bool present = false;
    for (const auto& [n, v] : stats->counters)
      present = present || n == name;
    EXPECT_TRUE(present) << name;
  }

  // The in-process API reports the same counters.
  EXPECT_EQ(server->Stats().Get("objects"), 3u);
}

TEST(ServerRoundTripTest, ThePeriodicSweepRemovesExpiredObjects) {
  ServerOptions options = SmallNodeOptions();
  options.ttl_sweep_interval = std::chrono::milliseconds(10);
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  ASSERT_TRUE(client.Mset("t", {{"short", "lived", ""}}, /*ttl_seconds=*/1).ok());
  ASSERT_TRUE(client.Mset("t", {{"forever", "stays", ""}}).ok());
  // Nobody looks the expired key up: only the sweep can remove it (after >= 1 s).
  ASSERT_TRUE(Eventually([&] { return server->Stats().Get("expirations") == 1; }));
  ServerStats stats = server->Stats();
  EXPECT_EQ(stats.Get("objects"), 1u);
  auto got = client.Mget("t", {"short", "forever"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].status, StatusCode::kNotFound);
  EXPECT_EQ((*got)[1].value, "stays");
}

TEST(ServerRoundTripTest, StartRejectsBadOptionsWithTheReason) {
  ServerOptions bad_address = SmallNodeOptions();
  bad_address.listen = "127.0.0.1";
  auto a = Server::Start(bad_address);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("HOST:PORT"), std::string::npos);

  ServerOptions bad_limits = SmallNodeOptions();
  bad_limits.max_batch_keys = 0;
  auto b = Server::Start(bad_limits);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("max_batch_keys"), std::string::npos);

  ServerOptions tiny = SmallNodeOptions();
  tiny.capacity_bytes = 100;
  EXPECT_FALSE(Server::Start(tiny).ok());
}

TEST(ServerRoundTripTest, ListensOnLoopbackByDefault) {
  ServerOptions options;
  options.capacity_bytes = 1 << 20;
  options.threads = 1;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->address().rfind("127.0.0.1:", 0), 0u) << server->address();
}

}  // namespace
}  // namespace kvport::testing
