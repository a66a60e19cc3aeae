// SPDX-License-Identifier: Apache-2.0
// Hostile peers that could stall, fill or lock out a node: each test is one failure
// of a hostile-client run, replayed over raw loopback sockets against an in-process node, with
// the bound asserted (a refusal, a close, a gauge under its cap, another client still served).
// Waits are bounded polls on the node's counters or bounded socket reads; nothing here asserts
// a time.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/socket.h"
#include "protocol/wire.h"
#include "server_fixture.h"

namespace kvport::testing {
namespace {

uint64_t Stat(const Server& server, const char* name) {
  return server.Stats().Get(name);
}

// A connection that sends nothing at all (no HELLO).
TestClient Silent(const Server& server) {
  auto client = TestClient::Connect(server.port(), /*hello=*/false);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return std::move(client).value();
}

// A HELLO frame header announcing a `descriptor_bytes` descriptor, followed by `sent` bytes of it.
std::string HugeHello(uint64_t descriptor_bytes, size_t sent) {
  protocol::HelloRequest hello;
  protocol::EncodedFrame frame;
  EXPECT_TRUE(protocol::EncodeRequest(7, hello, protocol::Limits{}, &frame).ok());
  std::string bytes = frame.Flatten();
  protocol::StoreLE32(bytes.data() + 16, static_cast<uint32_t>(descriptor_bytes));
  bytes.resize(protocol::kFrameHeaderSize + sent, 'h');
  return bytes;
}

// Before HELLO a node reads only a HELLO of its real maximum size: a peer announcing a
// 16 MiB descriptor is refused at the header (ERROR TooLarge) and never buffered. Before: eight
// such peers made the node buffer 2 MiB each here (160 MiB in the hostile run).
TEST(HostileClientTest, BeforeHelloOnlyAHelloSizedFrameIsRead) {
  ServerOptions options = SmallNodeOptions();
  options.request_timeout = std::chrono::seconds(60);  // the bound, not the deadline, must act
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  std::vector<TestClient> peers;
  for (int i = 0; i < 8; ++i) {
    peers.push_back(Silent(*server));
    ASSERT_TRUE(peers.back().SendRaw(HugeHello((16 << 20) - 64, 32 << 10)).ok());
  }
  for (TestClient& peer : peers) {
    auto frame = peer.ReadFrame();
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    const Status refused = peer.ErrorOf(*frame);
    EXPECT_EQ(refused.code(), StatusCode::kTooLarge) << refused.ToString();
    EXPECT_NE(refused.message().find("before HELLO"), std::string::npos) << refused.ToString();
    EXPECT_TRUE(peer.ReadsEndOfStream());
  }
  // Nothing of theirs stayed buffered (4 KiB a connection always passes).
  EXPECT_LE(Stat(*server, "input_buffer_bytes"), 8u * 4096);
  // A HELLO of the largest real size still works.
  const std::string longest(255, 'n');
  auto client = TestClient::Connect(server->port(), /*hello=*/false);
  ASSERT_TRUE(client.ok());
  protocol::HelloRequest hello;
  hello.client_name = longest;
  hello.token = longest;
  protocol::EncodedFrame frame;
  ASSERT_TRUE(protocol::EncodeRequest(1, hello, protocol::Limits{}, &frame).ok());
  EXPECT_EQ(frame.head.size(), protocol::kFrameHeaderSize + protocol::kMaxHelloDescriptorBytes);
  ASSERT_TRUE(client->Send(frame).ok());
  auto answer = client->ReadFrame();
  ASSERT_TRUE(answer.ok());
  EXPECT_TRUE(client->ErrorOf(*answer).ok()) << client->ErrorOf(*answer).ToString();
}

// A peer that has not said HELLO and goes on sending after its oversized frame was refused is
// closed once the node has dropped a little of it, not read for the whole linger. Before: the
// node read and dropped what it sent for two seconds (1.6 GB in the hostile run).
TEST(HostileClientTest, BeforeHelloAPeerSendingPastItsRefusalIsClosed) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  TestClient peer = Silent(*server);
  ASSERT_TRUE(peer.SendRaw(HugeHello((16 << 20) - 64, 0)).ok());
  timeval bound{10, 0};  // a node that stops reading without closing fails the test, not hangs
  ASSERT_EQ(::setsockopt(peer.fd(), SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound)), 0);
  const std::string chunk(64 << 10, 'x');
  uint64_t accepted = 0;
  while (accepted < (uint64_t{256} << 20)) {
    const ssize_t n = ::send(peer.fd(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    accepted += static_cast<uint64_t>(n);
  }
  // What the socket buffers took before the reset, never the 256 MiB sent at loopback speed.
  EXPECT_LT(accepted, uint64_t{256} << 20);
  EXPECT_TRUE(Eventually([&] { return Stat(*server, "connections") == 0; }));
}

// Connections that never send a byte cannot lock out a client with a token: at
// max_connections the oldest of them is closed to let the new one in. Before: the token holder
// was refused (ERROR Unavailable) for as long as the silent ones stayed (the idle timeout).
TEST(HostileClientTest, SilentConnectionsMakeRoomForAClientThatHellos) {
  ServerOptions options = SmallNodeOptions();
  options.max_connections = 32;
  options.hello_timeout = std::chrono::seconds(600);  // the room rule, not the deadline, acts
  options.tokens = {{"admin", "admin-secret-0123456789", {"*"}, {"*"}, true, std::nullopt, {}}};
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  std::vector<TestClient> silent;
  for (uint32_t i = 0; i < options.max_connections; ++i)
    silent.push_back(Silent(*server));
  ASSERT_TRUE(Eventually([&] { return Stat(*server, "unauthenticated_connections") == 32; }));

  auto admin = TestClient::Connect(server->port(), /*hello=*/false);
  ASSERT_TRUE(admin.ok());
  ASSERT_TRUE(admin->Hello(protocol::kMaxProtocolVersion, "admin-secret-0123456789").ok());
  EXPECT_TRUE(admin->Ping().ok());
  // The oldest silent connection was closed for it, and told why.
  auto why = silent.front().ReadFrame();
  ASSERT_TRUE(why.ok()) << why.status().ToString();
  EXPECT_EQ(silent.front().ErrorOf(*why).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(silent.front().ReadsEndOfStream());
  EXPECT_EQ(Stat(*server, "unauthenticated_evictions"), 1u);
  EXPECT_EQ(Stat(*server, "unauthenticated_connections"), 31u);
  EXPECT_EQ(Stat(*server, "connections_refused"), 0u);

  // With every slot held by authenticated sessions, a new connection is refused.
  silent.clear();
  ASSERT_TRUE(Eventually([&] { return Stat(*server, "connections") == 1; }));
  std::vector<TestClient> admins;
  for (uint32_t i = 1; i < options.max_connections; ++i) {
    auto c = TestClient::Connect(server->port(), /*hello=*/false);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c->Hello(protocol::kMaxProtocolVersion, "admin-secret-0123456789").ok());
    admins.push_back(std::move(c).value());
  }
  TestClient refused = Silent(*server);
  auto full = refused.ReadFrame();
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(refused.ErrorOf(*full).code(), StatusCode::kUnavailable);
  EXPECT_EQ(Stat(*server, "connections_refused"), 1u);
  EXPECT_TRUE(admin->Ping().ok());
}

// A connection that does not complete HELLO within hello_timeout is told so and closed;
// an authenticated idle one is not. Before: it stayed until the idle timeout (300 s).
TEST(HostileClientTest, AConnectionWithoutHelloIsClosedAtItsDeadline) {
  ServerOptions options = SmallNodeOptions();
  options.hello_timeout = std::chrono::milliseconds(200);
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  TestClient silent = Silent(*server);
  TestClient half = Silent(*server);
  ASSERT_TRUE(half.SendRaw(HugeHello(16, 4)).ok());  // a HELLO that never completes
  for (TestClient* late : {&silent, &half}) {
    auto frame = late->ReadFrame();
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    const Status timeout = late->ErrorOf(*frame);
    EXPECT_EQ(timeout.code(), StatusCode::kTimeout);
    EXPECT_NE(timeout.message().find("hello_timeout"), std::string::npos) << timeout.ToString();
    EXPECT_TRUE(late->ReadsEndOfStream());
  }
  EXPECT_EQ(Stat(*server, "hello_timeouts"), 2u);
  EXPECT_TRUE(client.Ping().ok());
  EXPECT_EQ(Stat(*server, "unauthenticated_connections"), 0u);
}

// One address may hold at most max_unauthenticated_per_address connections that have
// not completed HELLO; one more is refused, and a slot frees when one of them authenticates.
TEST(HostileClientTest, OneAddressHoldsABoundedNumberOfConnectionsBeforeHello) {
  ServerOptions options = SmallNodeOptions();
  options.max_unauthenticated_per_address = 4;
  options.hello_timeout = std::chrono::seconds(600);
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  std::vector<TestClient> silent;
  for (int i = 0; i < 4; ++i)
    silent.push_back(Silent(*server));
  ASSERT_TRUE(Eventually([&] { return Stat(*server, "unauthenticated_connections") == 4; }));
  TestClient fifth = Silent(*server);
  auto refused = fifth.ReadFrame();
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  const Status why = fifth.ErrorOf(*refused);
  EXPECT_EQ(why.code(), StatusCode::kUnavailable);
  EXPECT_NE(why.message().find("max_unauthenticated_per_address"), std::string::npos);
  EXPECT_EQ(Stat(*server, "connections_refused_per_address"), 1u);

  ASSERT_TRUE(silent[0].Hello().ok());  // authenticated: no longer counted
  EXPECT_EQ(Stat(*server, "unauthenticated_connections"), 3u);
  auto sixth = TestClient::Connect(server->port());
  ASSERT_TRUE(sixth.ok()) << sixth.status().ToString();
  EXPECT_TRUE(sixth->Ping().ok());
}

// The encoded MGET of `key` repeated `count` times.
std::string RepeatedMget(const TestClient& client, const std::string& key, int count,
                         bool meta_only = false) {
  protocol::MgetRequest get;
  get.meta_only = meta_only;
  for (int i = 0; i < count; ++i)
    get.keys.push_back({key});
  protocol::EncodedFrame frame;
  EXPECT_TRUE(protocol::EncodeRequest(99, get, client.limits(), &frame, client.version()).ok());
  return frame.Flatten();
}

// An MGET that names one key so often that its answer would carry more than the node
// holds is refused (TooLarge), and the connection goes on. Before: a 45 KB request named one
// 1 MiB key 4096 times and was answered with 4 GiB.
TEST(HostileClientTest, AnAnswerLargerThanTheNodeIsRefused) {
  ServerOptions options = SmallNodeOptions();  // 8 MiB
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  const std::string value = ValueFor("k", 1 << 20);
  ASSERT_TRUE(client.Mset("", {{"k", value, ""}}).ok());
  ASSERT_TRUE(client.SendRaw(RepeatedMget(client, "k", 4096)).ok());
  auto frame = client.ReadFrame();
  ASSERT_TRUE(frame.ok());
  const Status refused = client.ErrorOf(*frame);
  EXPECT_EQ(refused.code(), StatusCode::kTooLarge);
  EXPECT_NE(refused.message().find("repeated"), std::string::npos) << refused.ToString();
  EXPECT_TRUE(client.Ping().ok());
  EXPECT_EQ(Stat(*server, "pinned_bytes"), 0u);
  // Eight times (8 MiB, what the arena holds) is answered.
  auto eight = client.Mget("", std::vector<std::string>(8, "k"));
  ASSERT_TRUE(eight.ok()) << eight.status().ToString();
  for (const GetItem& item : *eight)
    EXPECT_TRUE(item.value == value);
}

// One client's large answer that it never reads does not stop the node's other
// connections: queued answers are capped node-wide by their heap (heads, bookkeeping), not by
// the arena bytes they pin (those are the store's max_pinned_bytes). Before: an 8 MiB answer of
// one pinned 1 MiB value counted 8 MiB against a 4 MiB node-wide cap, and every connection, old
// or new, stopped being served.
TEST(HostileClientTest, AnUnreadLargeAnswerDoesNotPauseOtherConnections) {
  ServerOptions options = SmallNodeOptions();
  options.max_queued_response_bytes = 4 << 20;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient writer = MustConnect(*server);
  ASSERT_TRUE(writer.Mset("", {{"k", ValueFor("k", 1 << 20), ""}}).ok());
  TestClient hostile = MustConnect(*server);
  ASSERT_TRUE(net::SetReceiveBufferSize(hostile.fd(), 4096).ok());
  ASSERT_TRUE(hostile.SendRaw(RepeatedMget(hostile, "k", 8)).ok());
  ASSERT_TRUE(Eventually([&] { return Stat(*server, "op_mget") == 1; }));
  EXPECT_LE(Stat(*server, "queued_response_bytes"), uint64_t{64} << 10);
  EXPECT_TRUE(writer.Ping().ok());
  TestClient late = MustConnect(*server);
  EXPECT_TRUE(late.Ping().ok());
  EXPECT_EQ(Stat(*server, "paused_connections"), 0u);
}

// A client that never reads answers with large heads (metadata) holds at most its share
// of the node-wide cap (an eighth), plus the answer being queued. Before: one connection went on
// to half the cap (8 MiB here), and a few such took all of it.
TEST(HostileClientTest, EachConnectionHoldsAtMostItsShareOfQueuedAnswers) {
  ServerOptions options = SmallNodeOptions();
  options.max_queued_response_bytes = 16 << 20;
  options.max_connection_outstanding_bytes = uint64_t{1} << 30;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient writer = MustConnect(*server);
  ASSERT_TRUE(writer.Mset("", {{"m", "", std::string(4000, 'm')}}).ok());
  TestClient hostile = MustConnect(*server);
  ASSERT_TRUE(net::SetReceiveBufferSize(hostile.fd(), 4096).ok());
  std::string pipeline;
  for (int r = 0; r < 64; ++r)  // each answer ~256 KiB of metadata: 16 MiB if all were queued
    pipeline += RepeatedMget(hostile, "m", 64, /*meta_only=*/true);
  ASSERT_TRUE(hostile.SendRaw(pipeline).ok());
  ASSERT_TRUE(Eventually([&] { return Stat(*server, "paused_connections") == 1; }));
  const uint64_t answer = 64 * (4000 + 64) + 4096;
  const uint64_t share = options.max_queued_response_bytes / 8;
  EXPECT_LE(Stat(*server, "queued_response_bytes"), share + 2 * answer);
  EXPECT_TRUE(writer.Ping().ok());
}

// A node whose queued-answer cap one client's unread answer fills by itself (a meta-only MGET
// naming a key with 4000 bytes of metadata 1024 times: ~4 MB of heads against a 2 MiB cap),
// and that client, paused.
struct NonReader {
  std::unique_ptr<Server> server;
  std::optional<TestClient> writer;
  std::optional<TestClient> hostile;
};

NonReader StartNonReader(std::chrono::milliseconds request_timeout) {
  ServerOptions options = SmallNodeOptions();
  options.capacity_bytes = 64 << 20;
  options.max_queued_response_bytes = 2 << 20;
  options.max_connection_outstanding_bytes = uint64_t{1} << 30;
  options.request_timeout = request_timeout;
  NonReader n{StartNode(options), {}, {}};
  if (n.server == nullptr) return n;
  n.writer = MustConnect(*n.server);
  EXPECT_TRUE(n.writer->Mset("", {{"m", "", std::string(4000, 'm')}}).ok());
  n.hostile = MustConnect(*n.server);
  EXPECT_TRUE(net::SetReceiveBufferSize(n.hostile->fd(), 4096).ok());
  std::string pipeline;
  for (int r = 0; r < 3; ++r)
    pipeline += RepeatedMget(*n.hostile, "m", 1024, /*meta_only=*/true);
  EXPECT_TRUE(n.hostile->SendRaw(pipeline).ok());
  return n;
}

// One client that does not read its answers fills the node's queued-answer cap alone, and only
// it is paused: a new client's HELLO and a connected client's calls are answered meanwhile.
// Before: every connection of the node stopped being read, new ones got no HELLO answer, until
// the non-reader left or idled out.
TEST(HostileClientTest, AClientThatDoesNotReadItsAnswersPausesItselfAlone) {
  NonReader n = StartNonReader(std::chrono::seconds(120));
  ASSERT_NE(n.server, nullptr);
  ASSERT_TRUE(Eventually([&] { return Stat(*n.server, "paused_connections") == 1; }));
  EXPECT_GE(Stat(*n.server, "queued_response_bytes"), uint64_t{2} << 20);
  auto late = TestClient::Connect(n.server->port());  // its HELLO is answered
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_TRUE(late->Ping().ok());
  EXPECT_TRUE(n.writer->Ping().ok());
  auto got = n.writer->Mget("", {"m"}, /*meta_only=*/true);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].meta, std::string(4000, 'm'));
  EXPECT_EQ(Stat(*n.server, "paused_connections"), 1u);  // the non-reader, still connected
  EXPECT_EQ(Stat(*n.server, "unread_answers_closes"), 0u);
}

// The paused non-reader is closed once its peer has taken none of its answers within the
// request deadline: what it held goes back to the node.
TEST(HostileClientTest, AClientThatDoesNotReadItsAnswersIsClosedPastTheDeadline) {
  NonReader n = StartNonReader(std::chrono::seconds(1));
  ASSERT_NE(n.server, nullptr);
  ASSERT_TRUE(Eventually([&] { return Stat(*n.server, "unread_answers_closes") == 1; }));
  EXPECT_TRUE(Eventually([&] { return Stat(*n.server, "queued_response_bytes") == 0; }));
  EXPECT_EQ(Stat(*n.server, "paused_connections"), 0u);
  EXPECT_TRUE(n.writer->Ping().ok());
}

// `count` objects of 1 MiB, "o0", "o1", ...: a 64 MiB node nearly full.
void FillWithObjects(TestClient& writer, int count) {
  for (int i = 0; i < count; ++i) {
    const std::string key = "o" + std::to_string(i);
    ASSERT_TRUE(writer.Mset("", {{key, ValueFor(key, 1 << 20), ""}}).ok());
  }
}

// The header and descriptor of an MSET of one `value_bytes` value, and `sent` payload bytes.
std::string StalledMset(const TestClient& client, const std::string& key, uint64_t value_bytes,
                        size_t sent) {
  const std::string value(value_bytes, 'v');  // encoded, then cut short
  protocol::MsetRequest m;
  m.items = {{key, "", value.size(), value.data()}};
  protocol::EncodedFrame frame;
  EXPECT_TRUE(protocol::EncodeRequest(5, m, client.limits(), &frame, client.version()).ok());
  return frame.head + value.substr(0, sent);
}

// An MSET announcing a value as large as the node whose payload stops after 10 bytes
// makes the node evict for what arrived plus one step (4 MiB), not for the value: the cache
// keeps its objects and other writes succeed. Before: all 60 objects were evicted at its first
// byte, and other writes got NoSpace until its deadline.
TEST(HostileClientTest, AStalledMsetEvictsOnlyForWhatArrived) {
  ServerOptions options = SmallNodeOptions();
  options.capacity_bytes = 64 << 20;
  options.request_timeout = std::chrono::seconds(60);  // the step, not the deadline, must act
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient writer = MustConnect(*server);
  FillWithObjects(writer, 60);
  TestClient hostile = MustConnect(*server);
  ASSERT_TRUE(hostile.SendRaw(StalledMset(hostile, "huge", 64 << 20, 10)).ok());
  ASSERT_TRUE(Eventually([&] { return Stat(*server, "reserved_bytes") > 0; }));
  EXPECT_LE(Stat(*server, "reserved_bytes"), uint64_t{4 << 20} + 4096);
  EXPECT_LE(Stat(*server, "evictions"), 5u);
  EXPECT_GE(Stat(*server, "objects"), 55u);
  auto stored = writer.Mset("", {{"after", ValueFor("after", 1 << 20), ""}});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ((*stored)[0], StatusCode::kOk);
  auto got = writer.Mget("", {"o59"});
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE((*got)[0].value == ValueFor("o59", 1 << 20));
}

// The other side of it: values are still written whole however large, even past
// max_reserved_bytes (it counts what is reserved and not yet written), in a full node, through
// steps that grow in place or move.
TEST(HostileClientTest, ALargeValueInAFullNodeIsWrittenStepByStep) {
  ServerOptions options = SmallNodeOptions();
  options.capacity_bytes = 64 << 20;
  options.max_reserved_bytes = 8 << 20;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient writer = MustConnect(*server);
  FillWithObjects(writer, 60);
  const std::string big = ValueFor("big", 40 << 20);
  const std::string small = ValueFor("small", 3 << 20);
  auto stored = writer.Mset("", {{"big", big, ""}, {"small", small, ""}});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ((*stored)[0], StatusCode::kOk);
  EXPECT_EQ((*stored)[1], StatusCode::kOk);
  for (const auto& [key, value] : {std::pair{"big", &big}, std::pair{"small", &small}}) {
    auto got = writer.Mget("", {key});  // one at a time: 43 MiB is over max_pinned_bytes
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE((*got)[0].value == *value) << key;
  }
  EXPECT_EQ(Stat(*server, "reserved_bytes"), 0u);
  EXPECT_EQ(Stat(*server, "reserved_unwritten_bytes"), 0u);
}

// One token cannot take every other token's room to write: what its stalled MSETs hold
// reserved and not yet written is bounded by its share (a quarter of max_reserved_bytes), so
// another token's writes succeed. Before: one stalled MSET per connection of tenA held all of
// max_reserved_bytes and tenB's writes were NoSpace.
TEST(HostileClientTest, OneTokensStalledWritesLeaveRoomForAnotherToken) {
  ServerOptions options = SmallNodeOptions();
  options.capacity_bytes = 64 << 20;
  options.max_reserved_bytes = 16 << 20;  // tenA's share: 4 MiB
  options.request_timeout = std::chrono::seconds(60);
  options.tokens = {{"tenA", "tenant-a-secret-0123456789", {"tenA"}, {"tenA"}, false, "tenA", {}},
                    {"tenB", "tenant-b-secret-0123456789", {"tenB"}, {"tenB"}, false, "tenB", {}}};
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  std::vector<TestClient> stalled;
  for (int i = 0; i < 8; ++i) {  // 8 x (1 byte + a 4 MiB step) would be twice the node's cap
    auto c = TestClient::Connect(server->port(), /*hello=*/false);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c->Hello(protocol::kMaxProtocolVersion, "tenant-a-secret-0123456789").ok());
    protocol::MsetRequest m;
    m.ns = "tenA";
    const std::string value(32 << 20, 'a');
    const std::string key = "k" + std::to_string(i);  // the item views it
    m.items = {{key, "", value.size(), value.data()}};
    protocol::EncodedFrame frame;
    ASSERT_TRUE(protocol::EncodeRequest(5, m, c->limits(), &frame, c->version()).ok());
    ASSERT_TRUE(c->SendRaw(frame.head + "a").ok());
    stalled.push_back(std::move(c).value());
  }
  ASSERT_TRUE(Eventually([&] { return Stat(*server, "op_mset") == 8; }));
  EXPECT_LE(Stat(*server, "reserved_unwritten_bytes"), uint64_t{4 << 20});

  auto b = TestClient::Connect(server->port(), /*hello=*/false);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(b->Hello(protocol::kMaxProtocolVersion, "tenant-b-secret-0123456789").ok());
  for (int i = 0; i < 4; ++i) {
    const std::string key = "b" + std::to_string(i);
    auto stored = b->Mset("tenB", {{key, ValueFor(key, 2 << 20), ""}});
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    EXPECT_EQ((*stored)[0], StatusCode::kOk) << i;
  }
}

// The steps shrink to the caps: on a small node with tokens (a token's share of unwritten bytes
// 1 MiB), a token still writes a value several times its share, step by step.
TEST(HostileClientTest, ATokenWritesAValueLargerThanItsShareOnASmallNode) {
  ServerOptions options = SmallNodeOptions();
  options.capacity_bytes = 16 << 20;
  options.max_reserved_bytes = 4 << 20;  // a token's share: 1 MiB
  options.tokens = {{"tenA", "tenant-a-secret-0123456789", {"tenA"}, {"tenA"}, false, "tenA", {}}};
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  auto a = TestClient::Connect(server->port(), /*hello=*/false);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(a->Hello(protocol::kMaxProtocolVersion, "tenant-a-secret-0123456789").ok());
  const std::string value = ValueFor("six", 6 << 20);
  auto stored = a->Mset("tenA", {{"six", value, ""}});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ((*stored)[0], StatusCode::kOk);
  auto got = a->Mget("tenA", {"six"});
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE((*got)[0].value == value);
}

// The node-wide cap on queued answers follows the capacity when not set.
TEST(HostileClientTest, TheQueuedAnswerCapScalesWithCapacity) {
  ServerOptions options = SmallNodeOptions();
  options.capacity_bytes = uint64_t{512} << 20;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Stat(*server, "max_queued_response_bytes"), uint64_t{32} << 20);
  options.capacity_bytes = 8 << 20;
  server = StartNode(options);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Stat(*server, "max_queued_response_bytes"), uint64_t{16} << 20);
}

}  // namespace
}  // namespace kvport::testing
