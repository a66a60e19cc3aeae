// SPDX-License-Identifier: Apache-2.0
// Failures: disconnects mid-request, malformed frames, shutdown in flight, idle timeouts.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "protocol/wire.h"
#include "server_fixture.h"

namespace kvport::testing {
namespace {

TEST(ServerFailureTest, DisconnectInTheMiddleOfAnMsetPayloadLeavesNoTrace) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  TestClient keeper = MustConnect(*server);
  ASSERT_TRUE(keeper.Mset("d", {{"kept", "safe", ""}}).ok());
  const ServerStats before = server->Stats();

  TestClient quitter = MustConnect(*server);
  std::string v1 = ValueFor("x1", 100000), v2 = ValueFor("x2", 100000);
  protocol::MsetRequest m;
  m.ns = "d";
  m.items = {{"x1", "meta", v1.size(), v1.data()}, {"x2", "", v2.size(), v2.data()}};
  protocol::EncodedFrame frame;
  ASSERT_TRUE(protocol::EncodeRequest(7, m, quitter.limits(), &frame, quitter.version()).ok());
  std::string bytes = frame.Flatten();
  // Header, descriptor, all of x1 and half of x2: the server has reserved both.
  ASSERT_TRUE(quitter.SendRaw(bytes.substr(0, frame.head.size() + v1.size() + v2.size() / 2)).ok());
  ASSERT_TRUE(Eventually([&] { return server->Stats().Get("reserved_bytes") > 0; }));
  quitter.Close();

  ASSERT_TRUE(Eventually([&] { return server->Stats().Get("connections") == 1; }));
  ServerStats after = server->Stats();
  EXPECT_EQ(after.Get("used_bytes"), before.Get("used_bytes"));
  EXPECT_EQ(after.Get("reserved_bytes"), 0u);
  EXPECT_EQ(after.Get("objects"), before.Get("objects"));
  EXPECT_EQ(after.Get("aborted_msets"), 1u);
  auto got = keeper.Mget("d", {"x1", "x2", "kept"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].status, StatusCode::kNotFound);
  EXPECT_EQ((*got)[1].status, StatusCode::kNotFound);
  EXPECT_EQ((*got)[2].value, "safe");
}

TEST(ServerFailureTest, MalformedFrameGetsAnErrorThenCloseAndTouchesNothing) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  TestClient good = MustConnect(*server);
  ASSERT_TRUE(good.Mset("m", {{"k", "v", ""}}).ok());

  // 1. Bad magic.
  {
    TestClient bad = MustConnect(*server);
    ASSERT_TRUE(bad.SendRaw(std::string(protocol::kFrameHeaderSize, 'Z')).ok());
    auto frame = bad.ReadFrame();
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    Status error = bad.ErrorOf(*frame);
    EXPECT_EQ(error.code(), StatusCode::kCorruption) << error.ToString();
    EXPECT_TRUE(bad.ReadsEndOfStream());
  }
  // 2. A valid header with a descriptor that lies about its counts; the request id is echoed.
  {
    TestClient bad = MustConnect(*server);
    protocol::MdelRequest del;
    del.ns = "m";
    del.keys = {"k"};
    protocol::EncodedFrame frame;
    ASSERT_TRUE(protocol::EncodeRequest(99, del, bad.limits(), &frame, bad.version()).ok());
    std::string bytes = frame.Flatten();
    bytes.back() ^= 0x7f;            // corrupt the last key byte...
    bytes.resize(bytes.size() - 1);  // ...and truncate the descriptor by one
    protocol::StoreLE32(bytes.data() + 16, static_cast<uint32_t>(bytes.size() - 32));
    ASSERT_TRUE(bad.SendRaw(bytes).ok());
    auto reply = bad.ReadFrame();
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->header.request_id, 99u);
    EXPECT_FALSE(bad.ErrorOf(*reply).ok());
    EXPECT_TRUE(bad.ReadsEndOfStream());
  }
  // 3. A request before HELLO.
  {
    auto bad = TestClient::Connect(server->port(), /*hello=*/false);
    ASSERT_TRUE(bad.ok());
    Status ping = bad->Ping();
    EXPECT_EQ(ping.code(), StatusCode::kInvalidArgument) << ping.ToString();
    EXPECT_NE(ping.message().find("HELLO"), std::string::npos);
    EXPECT_TRUE(bad->ReadsEndOfStream());
  }

  // The well-behaved connection and the data are untouched.
  auto got = good.Mget("m", {"k"});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].value, "v");
  ServerStats stats = server->Stats();
  EXPECT_EQ(stats.Get("objects"), 1u);
  EXPECT_EQ(stats.Get("error_responses"), 3u);
  EXPECT_EQ(stats.Get("op_mdel"), 0u);  // the corrupt MDEL never reached the store
}

TEST(ServerFailureTest, MalformedAnyNamespaceRequestsGetAnErrorThenClose) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  TestClient good = MustConnect(*server);
  ASSERT_TRUE(good.Mset("x", {{"k", "v", ""}}).ok());
  auto with_flag = [](const protocol::EncodedFrame& frame) {
    std::string bytes = frame.Flatten();
    bytes[6] = static_cast<char>(static_cast<uint8_t>(bytes[6]) | protocol::kFlagAnyNamespace);
    return bytes;
  };
  struct Case {
    const char* what;
    uint8_t max_version;  // what the connection offers in HELLO
    std::string ns;
    protocol::Opcode op;
    StatusCode code;
    const char* message_part;
  };
  const Case cases[] = {
      // The namespace must be empty: a bad field like any other.
      {"with a namespace", 2, "x", protocol::Opcode::kMdel, StatusCode::kInvalidArgument,
       "must be empty"},
      // On a version 1 connection the bit is reserved, as it always was.
      {"on version 1", 1, "", protocol::Opcode::kMdel, StatusCode::kCorruption, "reserved flag"},
      {"on MSET", 2, "", protocol::Opcode::kMset, StatusCode::kCorruption,
       "any-namespace flag on a MSET"},
  };
  for (const Case& c : cases) {
    auto bad = TestClient::Connect(server->port(), true, c.max_version);
    ASSERT_TRUE(bad.ok()) << bad.status().ToString();
    protocol::EncodedFrame frame;
    if (c.op == protocol::Opcode::kMdel) {
      protocol::MdelRequest del{c.ns, {"k"}};
      ASSERT_TRUE(protocol::EncodeRequest(5, del, bad->limits(), &frame, bad->version()).ok());
    } else {
      protocol::MsetRequest set{c.ns, 0, {{"k", "", 0, nullptr}}};
      ASSERT_TRUE(protocol::EncodeRequest(5, set, bad->limits(), &frame, bad->version()).ok());
    }
    ASSERT_TRUE(bad->SendRaw(with_flag(frame)).ok());
    auto reply = bad->ReadFrame();
    ASSERT_TRUE(reply.ok()) << c.what << ": " << reply.status().ToString();
    EXPECT_EQ(reply->header.request_id, 5u) << c.what;
    Status error = bad->ErrorOf(*reply);
    EXPECT_EQ(error.code(), c.code) << c.what << ": " << error.ToString();
    EXPECT_NE(error.message().find(c.message_part), std::string::npos)
        << c.what << ": " << error.ToString();
    EXPECT_TRUE(bad->ReadsEndOfStream()) << c.what;
  }
  // Nothing was deleted or stored.
  auto got = good.Mget("x", {"k"});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].value, "v");
  ServerStats stats = server->Stats();
  EXPECT_EQ(stats.Get("objects"), 1u);
  EXPECT_EQ(stats.Get("op_mdel"), 0u);
  EXPECT_EQ(stats.Get("error_responses"), 3u);
}

TEST(ServerFailureTest, IdleConnectionsAreClosed) {
  ServerOptions options = SmallNodeOptions();
  options.idle_timeout = std::chrono::milliseconds(50);
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  ASSERT_TRUE(client.Ping().ok());
  EXPECT_TRUE(client.ReadsEndOfStream());  // blocks until the server closes us
  EXPECT_TRUE(Eventually([&] { return server->Stats().Get("connections") == 0; }));
  EXPECT_EQ(server->Stats().Get("idle_timeouts"), 1u);
}

// Client threads that MSET then MGET their own key in a loop until the server goes away.
class BusyClients {
 public:
  BusyClients(uint16_t port, int clients) {
    for (int t = 0; t < clients; ++t) {
      threads_.emplace_back([this, port, t] {
        auto client = TestClient::Connect(port);
        if (!client.ok()) return;
        ++connected_;
        std::string key = "t" + std::to_string(t);
        std::string value = ValueFor(key, 200000);
        for (int i = 0; i < 100000; ++i) {
          auto set = client->Mset("s", {{key, value, ""}});
          if (!set.ok()) return;  // the server went away: a clean failure
          auto got = client->Mget("s", {key});
          if (!got.ok()) return;
          if ((*set)[0] != StatusCode::kOk || (*got)[0].value != value) ++wrong_answers_;
          if (i == 0) ++finished_a_round_;
          ++completed_;
        }
      });
    }
  }
  ~BusyClients() { Join(); }
  void Join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  int connected() const { return connected_.load(); }
  int completed() const { return completed_.load(); }
  // Clients whose first MSET + MGET round completed (so their key is stored).
  int finished_a_round() const { return finished_a_round_.load(); }
  int wrong_answers() const { return wrong_answers_.load(); }

 private:
  std::atomic<int> connected_{0};
  std::atomic<int> completed_{0};
  std::atomic<int> finished_a_round_{0};
  std::atomic<int> wrong_answers_{0};
  std::vector<std::thread> threads_;
};

TEST(ServerFailureTest, StopLetsRequestsInFlightCompleteAndThenCloses) {
  auto server = StartNode(SmallNodeOptions());  // a long grace: every request may finish
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 6;
  BusyClients clients(server->port(), kClients);
  ASSERT_TRUE(Eventually(
      [&] { return clients.finished_a_round() == kClients && clients.completed() > 20; }));
  server->Stop();  // returns once each connection finished its request in flight
  clients.Join();
  EXPECT_EQ(clients.wrong_answers(), 0);
  ServerStats stats = server->Stats();
  EXPECT_EQ(stats.Get("connections"), 0u);
  EXPECT_EQ(stats.Get("reserved_bytes"), 0u);
  EXPECT_EQ(stats.Get("objects"), uint64_t{kClients});
  server->Stop();  // idempotent
  EXPECT_FALSE(TestClient::Connect(server->port()).ok());
}

TEST(ServerFailureTest, StopDoesNotWaitPastTheGraceForAStalledMset) {
  ServerOptions options = SmallNodeOptions();
  options.shutdown_grace = std::chrono::milliseconds(200);
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  BusyClients clients(server->port(), 3);
  // A client stuck in the middle of an MSET payload.
  TestClient stuck = MustConnect(*server);
  std::string v = ValueFor("stuck", 50000);
  protocol::MsetRequest m;
  m.ns = "s";
  m.items = {{"stuck", "", v.size(), v.data()}};
  protocol::EncodedFrame frame;
  ASSERT_TRUE(protocol::EncodeRequest(1, m, stuck.limits(), &frame, stuck.version()).ok());
  ASSERT_TRUE(stuck.SendRaw(frame.Flatten().substr(0, frame.head.size() + 10)).ok());
  ASSERT_TRUE(Eventually([&] { return server->Stats().Get("reserved_bytes") > 0; }));
  ASSERT_TRUE(
      Eventually([&] { return clients.finished_a_round() == 3 && clients.completed() > 5; }));

  server->Stop();
  clients.Join();
  EXPECT_EQ(clients.wrong_answers(), 0);
  EXPECT_TRUE(stuck.ReadsEndOfStream());
  ServerStats stats = server->Stats();
  EXPECT_EQ(stats.Get("connections"), 0u);
  EXPECT_EQ(stats.Get("reserved_bytes"), 0u);
  EXPECT_EQ(stats.Get("objects"), 3u);  // "stuck" never became visible
  EXPECT_EQ(stats.Get("aborted_msets"), 1u);
}

}  // namespace
}  // namespace kvport::testing

namespace kvport {
namespace {

using testing::MustConnect;
using testing::SmallNodeOptions;
using testing::StartNode;
using testing::TestClient;

// Shared memory is a Unix-socket matter: on TCP, SHM_ATTACH is declined with its reason (a
// normal answer, the session stays), and the ARENA_* requests that need a granted attach are
// refused (ERROR for that request alone) without touching the store. NODE_INFO says what the node
// offers.
TEST(ServerFailureTest, SharedMemoryRequestsOnATcpSession) {
  ServerOptions options = SmallNodeOptions();
  options.unix_socket = "auto";
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  ASSERT_GE(client.version(), protocol::kShmVersion);

  protocol::EncodedFrame frame;
  ASSERT_TRUE(protocol::EncodeRequest(1, protocol::NodeInfoRequest{}, client.limits(), &frame,
                                      client.version())
                  .ok());
  ASSERT_TRUE(client.Send(frame).ok());
  auto info_frame = client.ReadFrame();
  ASSERT_TRUE(info_frame.ok()) << info_frame.status().ToString();
  protocol::NodeInfoResponse info;
  ASSERT_TRUE(
      protocol::DecodeResponse(info_frame->header, info_frame->descriptor, client.limits(), &info)
          .ok());
  EXPECT_NE(info.node_id, 0u);
  EXPECT_EQ(info.offers & protocol::kOfferSharedMemory, protocol::kOfferSharedMemory);
  EXPECT_EQ(info.unix_path, server->unix_socket_path());
  EXPECT_FALSE(info.host_id.empty());

  ASSERT_TRUE(protocol::EncodeRequest(2, protocol::ShmAttachRequest{}, client.limits(), &frame,
                                      client.version())
                  .ok());
  ASSERT_TRUE(client.Send(frame).ok());
  auto attach_frame = client.ReadFrame();
  ASSERT_TRUE(attach_frame.ok());
  protocol::ShmAttachResponse attach;
  ASSERT_TRUE(protocol::DecodeResponse(attach_frame->header, attach_frame->descriptor,
                                       client.limits(), &attach)
                  .ok());
  EXPECT_EQ(attach.status, StatusCode::kNotSupported);
  EXPECT_NE(attach.reason.find("Unix socket"), std::string_view::npos) << attach.reason;
  ASSERT_TRUE(client.Ping().ok());  // still served

  protocol::ArenaGetRequest get;
  get.keys.push_back(protocol::MgetKey{"k", protocol::kUnlimitedCapacity});
  ASSERT_TRUE(protocol::EncodeRequest(3, get, client.limits(), &frame, client.version()).ok());
  ASSERT_TRUE(client.Send(frame).ok());
  auto refused = client.ReadFrame();
  ASSERT_TRUE(refused.ok());
  Status error = client.ErrorOf(*refused);
  EXPECT_EQ(error.code(), StatusCode::kInvalidArgument) << error.ToString();
  EXPECT_NE(error.message().find("without a granted SHM_ATTACH"), std::string::npos);
  EXPECT_EQ(refused->header.request_id, 3u);
  EXPECT_TRUE(client.Ping().ok());  // refused alone: the session goes on
  EXPECT_EQ(server->Stats().Get("leases"), 0u);
  EXPECT_EQ(server->Stats().Get("hits") + server->Stats().Get("misses"), 0u);
}

// Beyond max_connections a connection is told why (ERROR Unavailable naming the limit, before
// it sent anything) and closed; the connections already open are untouched, and a slot freed
// by a close is usable again.
TEST(ServerFailureTest, ConnectionsBeyondTheLimitAreRefusedWithTheReason) {
  ServerOptions options = SmallNodeOptions();
  options.max_connections = 2;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  std::optional<TestClient> first = MustConnect(*server);
  TestClient second = MustConnect(*server);

  auto third = TestClient::Connect(server->port(), /*hello=*/false);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  auto refused = third->ReadFrame();
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  Status why = third->ErrorOf(*refused);
  EXPECT_EQ(why.code(), StatusCode::kUnavailable) << why.ToString();
  EXPECT_NE(why.message().find("max_connections"), std::string::npos) << why.ToString();
  EXPECT_TRUE(third->ReadsEndOfStream());
  EXPECT_EQ(server->Stats().Get("connections_refused"), 1u);
  EXPECT_TRUE(second.Ping().ok());

  // Closing one frees its slot (the node notices on its loop thread: wait for it, bounded).
  first.reset();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (server->Stats().Get("connections") > 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(server->Stats().Get("connections"), 1u);
  TestClient again = MustConnect(*server);
  EXPECT_TRUE(again.Ping().ok());

  ServerOptions none = SmallNodeOptions();
  none.max_connections = 0;
  EXPECT_EQ(Server::Start(none).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvport
