// SPDX-License-Identifier: Apache-2.0
// The client against nodes that misbehave (tests/client/fake_node.h): a response that arrives
// after its call gave up, a node that stalls mid-response, an ERROR for one pipelined request,
// sizes a node announces but never backs, a connect attempt that never finishes. Each test
// asserts an order of events or a state, never a duration; every wait is bounded.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "client/batch_call.h"
#include "client/connection.h"
#include "fake_node.h"
#include "kvport/client.h"
#include "protocol/messages.h"
#include "test_node.h"

namespace kvport {
namespace {

using testing::FakeConn;
using testing::FakeFrame;
using testing::FakeNode;
using testing::Latch;
using testing::Pattern;
using testing::ResponseBytes;

constexpr size_t kBigValue = 1 << 20;
const auto kLong = std::chrono::seconds(20);  // a deadline no passing test comes near

// The answer to a one-key MGET: the key's value (OK) as the whole payload.
std::string MgetAnswer(uint64_t request_id, const std::vector<char>& value) {
  protocol::MgetResponse response;
  response.results.push_back(protocol::MgetResult{StatusCode::kOk, "", value.size(), value.data()});
  return ResponseBytes(request_id, response);
}

std::string PingAnswer(uint64_t request_id) {
  return ResponseBytes(request_id, protocol::PingResponse{});
}

// Answers PINGs (and nothing else) until the client goes away.
void ServePings(FakeConn& conn) {
  FakeFrame frame;
  while (conn.Read(&frame) && frame.header.opcode == protocol::Opcode::kPing) {
    if (!conn.Write(PingAnswer(frame.header.request_id))) return;
  }
}

// An MgetHandler that says when the reader thread has taken its response.
class SignallingMget : public client::MgetHandler {
 public:
  explicit SignallingMget(Latch* receiving) : receiving_(receiving) {}
  Status OnResponse(const protocol::FrameHeader& header, std::vector<iovec>* payload) override {
    Status s = client::MgetHandler::OnResponse(header, payload);
    receiving_->Raise();
    return s;
  }

 private:
  Latch* receiving_;
};

using PingHandler = client::DecodingHandler<protocol::PingRequest, protocol::PingResponse>;

// A connection to `node` and requests on it, at the level where the test chooses when a call's
// deadline passes.
struct Pipeline {
  std::shared_ptr<client::Connection> conn;

  explicit Pipeline(const FakeNode& node, client::ConnectionOptions options = {}) {
    Result<net::HostPort> address = net::ParseHostPort(node.address());
    EXPECT_TRUE(address.ok()) << address.status().ToString();
    auto opened = client::Connection::Open(client::NodeAddress{*address, ""}, "fault-test",
                                           MonotonicClock::now() + kLong, options);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (opened.ok()) conn = std::move(opened).value();
  }

  // Sends a one-key MGET reading into `buffer`; `deadline` is the call's (the reader drains
  // past it by the connection's drain_timeout).
  client::Connection::Ticket SendMget(SignallingMget* handler, std::vector<char>* buffer,
                                      MonotonicClock::time_point deadline) {
    handler->request.keys.push_back(protocol::MgetKey{"big", buffer->size()});
    handler->destinations.push_back(buffer->data());
    handler->limits = conn->limits();
    return Send(handler, handler->request, deadline);
  }
  client::Connection::Ticket SendPing(PingHandler* handler) {
    handler->limits = conn->limits();
    return Send(handler, handler->request, MonotonicClock::now() + kLong);
  }

  template <typename Request>
  client::Connection::Ticket Send(client::ResponseHandler* handler, const Request& request,
                                  MonotonicClock::time_point deadline) {
    protocol::EncodedFrame frame;
    const uint64_t id = conn->NextRequestId();
    EXPECT_TRUE(protocol::EncodeRequest(id, request, conn->limits(), &frame, conn->version()).ok());
    Result<client::Connection::Ticket> ticket = conn->Send(id, frame, handler, deadline);
    EXPECT_TRUE(ticket.ok()) << ticket.status().ToString();
    return ticket.ok() ? *ticket : nullptr;
  }
};

// The node's side of the drain tests: reads an MGET and a PING, sends the MGET's header,
// descriptor and the first half of its value, waits for `release`, then (unless `stall`) the
// rest of the value and the PING's answer, then serves PINGs.
FakeNode::Script HalfAnswerThen(const std::vector<char>& value, Latch* got_requests, Latch* release,
                                bool stall = false) {
  return [&value, got_requests, release, stall](FakeConn& conn, int) {
    FakeFrame mget, ping;
    if (!conn.Hello() || !conn.Read(&mget)) return;
    got_requests->Raise();
    if (!conn.Read(&ping)) return;
    got_requests->Raise();
    const std::string answer = MgetAnswer(mget.header.request_id, value);
    const size_t half = answer.size() - value.size() / 2;
    if (!conn.Write(std::string_view(answer).substr(0, half))) return;
    if (!release->WaitFor(1) || stall) {
      FakeFrame none;
      conn.Read(&none);  // until the client goes away
      return;
    }
    conn.Write(std::string_view(answer).substr(half));
    conn.Write(PingAnswer(ping.header.request_id));
    ServePings(conn);
  };
}

// The client reads ahead (net/stream.h): a small response, sent in one write (header,
// descriptor and a 4 KiB value), is read in one system call, not one for each part and another
// that finds nothing.
TEST(ClientReadAheadTest, ASmallResponseIsReadInOneSystemCall) {
  const std::vector<char> value = Pattern(3, 4096);
  FakeNode node([&value](FakeConn& conn, int) {
    FakeFrame mget;
    if (!conn.Hello()) return;
    while (conn.Read(&mget) && mget.header.opcode == protocol::Opcode::kMget) {
      if (!conn.Write(MgetAnswer(mget.header.request_id, value))) return;
    }
  });
  Pipeline p(node);
  ASSERT_NE(p.conn, nullptr);
  constexpr int kCalls = 50;
  std::vector<char> buffer(value.size());
  const uint64_t before = p.conn->socket_reads();
  for (int i = 0; i < kCalls; ++i) {
    Latch receiving;
    SignallingMget handler(&receiving);
    client::Connection::Ticket call = p.SendMget(&handler, &buffer, MonotonicClock::now() + kLong);
    ASSERT_NE(call, nullptr);
    ASSERT_TRUE(p.conn->Wait(call, MonotonicClock::now() + kLong).ok());
    ASSERT_EQ(buffer, value);
    std::fill(buffer.begin(), buffer.end(), '\0');
  }
  const uint64_t reads = p.conn->socket_reads() - before;
  // One per call, with slack for an answer the kernel delivered in two pieces. Without
  // read-ahead: 3 or 4 per call.
  EXPECT_LE(reads, kCalls * 3 / 2) << reads << " reads for " << kCalls << " calls";
  EXPECT_GE(reads, static_cast<uint64_t>(kCalls));
}

TEST(ClientDrainTest, ACallTimingOutMidResponseIsDrainedAndItsPipelinedSiblingSucceeds) {
  const std::vector<char> value = Pattern(1, kBigValue);
  Latch got_requests, release, receiving;
  FakeNode node(HalfAnswerThen(value, &got_requests, &release));
  Pipeline p(node);
  ASSERT_NE(p.conn, nullptr);

  std::vector<char> buffer(kBigValue, '\x5a');
  SignallingMget mget(&receiving);
  PingHandler ping;
  auto mget_ticket = p.SendMget(&mget, &buffer, MonotonicClock::now() + kLong);
  auto ping_ticket = p.SendPing(&ping);
  ASSERT_TRUE(got_requests.WaitFor(2));
  // The reader is on the MGET's response (its descriptor decoded, its value half sent): now its
  // call's deadline passes.
  ASSERT_TRUE(receiving.WaitFor(1));
  Status timed_out = p.conn->Wait(mget_ticket, MonotonicClock::now());
  EXPECT_EQ(timed_out.code(), StatusCode::kTimeout) << timed_out.ToString();
  EXPECT_NE(timed_out.message().find("still arriving"), std::string::npos) << timed_out.message();
  const std::vector<char> at_return = buffer;
  release.Raise();  // the rest of the MGET's value, then the PING's answer

  Status pinged = p.conn->Wait(ping_ticket, MonotonicClock::now() + kLong);
  EXPECT_TRUE(pinged.ok()) << pinged.ToString();
  EXPECT_EQ(buffer, at_return);  // nothing landed in the buffer after its call returned
  EXPECT_TRUE(p.conn->alive());
  EXPECT_EQ(p.conn->drained_responses(), 1u);
  PingHandler again;
  EXPECT_TRUE(p.conn->Wait(p.SendPing(&again), MonotonicClock::now() + kLong).ok());
  EXPECT_EQ(node.accepted(), 1);
}

TEST(ClientDrainTest, ARestOverDrainMaxBytesClosesTheConnectionInstead) {
  const std::vector<char> value = Pattern(2, kBigValue);
  Latch got_requests, release, receiving;
  FakeNode node(HalfAnswerThen(value, &got_requests, &release));
  client::ConnectionOptions options;
  options.drain_max_bytes = 1024;  // far less than the half value still to come
  Pipeline p(node, options);
  ASSERT_NE(p.conn, nullptr);

  std::vector<char> buffer(kBigValue);
  SignallingMget mget(&receiving);
  PingHandler ping;
  auto mget_ticket = p.SendMget(&mget, &buffer, MonotonicClock::now() + kLong);
  auto ping_ticket = p.SendPing(&ping);
  ASSERT_TRUE(got_requests.WaitFor(2));
  ASSERT_TRUE(receiving.WaitFor(1));
  EXPECT_EQ(p.conn->Wait(mget_ticket, MonotonicClock::now()).code(), StatusCode::kTimeout);
  release.Raise();

  Status pinged = p.conn->Wait(ping_ticket, MonotonicClock::now() + kLong);
  EXPECT_EQ(pinged.code(), StatusCode::kUnavailable) << pinged.ToString();
  EXPECT_NE(pinged.message().find("drain_max_bytes"), std::string::npos) << pinged.message();
  EXPECT_FALSE(p.conn->alive());
  EXPECT_EQ(p.conn->drained_responses(), 0u);
}

TEST(ClientDrainTest, ANodeStallingMidResponseClosesTheConnectionAfterDrainTimeout) {
  const std::vector<char> value = Pattern(3, kBigValue);
  Latch got_requests, release, receiving;
  FakeNode node(HalfAnswerThen(value, &got_requests, &release, /*stall=*/true));
  client::ConnectionOptions options;
  options.drain_timeout = std::chrono::milliseconds(50);
  Pipeline p(node, options);
  ASSERT_NE(p.conn, nullptr);

  std::vector<char> buffer(kBigValue);
  SignallingMget mget(&receiving);
  PingHandler ping;
  // The MGET's own deadline is now: its response may take drain_timeout past it, no more.
  auto mget_ticket = p.SendMget(&mget, &buffer, MonotonicClock::now());
  auto ping_ticket = p.SendPing(&ping);
  ASSERT_TRUE(got_requests.WaitFor(2));
  EXPECT_EQ(p.conn->Wait(mget_ticket, MonotonicClock::now()).code(), StatusCode::kTimeout);

  // The node never sends the rest: the connection closes and the sibling fails, long before
  // its own deadline.
  Status pinged = p.conn->Wait(ping_ticket, MonotonicClock::now() + kLong);
  EXPECT_EQ(pinged.code(), StatusCode::kUnavailable) << pinged.ToString();
  EXPECT_NE(pinged.message().find("stalled"), std::string::npos) << pinged.message();
  EXPECT_FALSE(p.conn->alive());
  release.Raise();
}

// The same through the public API: an MGet that times out while its value is arriving, with an
// MExist pipelined behind it on the one connection.
TEST(ClientFaultTest, AnMgetTimingOutMidValueLeavesItsBufferAndItsSiblingAlone) {
  const std::vector<char> value = Pattern(4, kBigValue);
  Latch got_mget, got_mexist, release;
  FakeNode node([&](FakeConn& conn, int) {
    FakeFrame mget, mexist;
    if (!conn.Hello() || !conn.Read(&mget)) return;
    got_mget.Raise();
    if (!conn.Read(&mexist)) return;
    got_mexist.Raise();
    const std::string answer = MgetAnswer(mget.header.request_id, value);
    const size_t half = answer.size() - value.size() / 2;
    if (!conn.Write(std::string_view(answer).substr(0, half)) || !release.WaitFor(1)) return;
    protocol::MexistResponse exists;
    exists.results.push_back(protocol::ExistResult{StatusCode::kOk, 5});
    conn.Write(std::string_view(answer).substr(half));
    conn.Write(ResponseBytes(mexist.header.request_id, exists));
    ServePings(conn);
  });
  InitOptions options;
  options.transport_type = 1;  // TCP only: the fake node scripts every answer it gives
  options.connections = 1;
  Client client;
  ASSERT_TRUE(client.Init("fault-test", node.address(), options).ok());

  std::vector<char> buffer(kBigValue, '\x5a');
  std::vector<char> at_return;
  Result<GetResult> got = Status::Internal("not run");
  std::thread getter([&] {
    IOBuffers buffers;
    buffers.Append(buffer.data(), buffer.size());
    GetOptions get;
    get.timeout = std::chrono::milliseconds(300);
    got = client.MGet({"big"}, get, buffers);
    at_return = buffer;
    release.Raise();
  });
  ASSERT_TRUE(got_mget.WaitFor(1));
  ExistOptions exist;
  exist.timeout = kLong;
  Result<BatchResult> exists = client.MExist({"small"}, exist);
  getter.join();

  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kTimeout) << got.status().ToString();
  ASSERT_TRUE(exists.ok()) << exists.status().ToString();
  EXPECT_EQ(exists->codes, std::vector<KeyCode>{KeyCode::kSuccess});
  EXPECT_EQ(buffer, at_return);
  EXPECT_TRUE(client.Ping().ok());
  EXPECT_EQ(node.accepted(), 1);  // the same connection throughout: no reconnect
}

// The pool's connect is slow (a node that accepts TCP but never answers HELLO); a call with a
// short deadline does not wait for another call's attempt past it.
TEST(ClientPoolTest, ACallDoesNotWaitPastItsDeadlineForAnotherCallsConnect) {
  Latch hello_pending, release;
  FakeNode node([&](FakeConn& conn, int index) {
    if (index == 0) {
      // The first connection (Init's) answers HELLO, then ends at the first request.
      FakeFrame request;
      if (conn.Hello()) conn.Read(&request);
      return;
    }
    FakeFrame hello;
    if (!conn.Read(&hello)) return;
    hello_pending.Raise();
    release.WaitFor(1);  // never answered; the connection ends when the test says so
  });
  InitOptions options;
  options.transport_type = 1;  // TCP only: the fake node scripts every answer it gives
  options.connections = 1;
  options.connect_timeout = std::chrono::seconds(30);
  options.timeout = std::chrono::seconds(30);
  Client client;
  ASSERT_TRUE(client.Init("pool-test", node.address(), options).ok());
  // The node ends the first connection: the one slot must be reconnected.
  EXPECT_EQ(client.Ping().code(), StatusCode::kUnavailable);

  std::atomic<bool> connecting_done{false};
  Status slow;
  std::thread connecting([&] {
    slow = client.Ping();  // reconnects; blocks in the handshake until `release`
    connecting_done = true;
  });
  ASSERT_TRUE(hello_pending.WaitFor(1));  // that call now holds the slot, waiting for HELLO

  ExistOptions exist;
  exist.timeout = std::chrono::milliseconds(200);
  Result<BatchResult> quick = client.MExist({"k"}, exist);
  ASSERT_FALSE(quick.ok());
  EXPECT_EQ(quick.status().code(), StatusCode::kTimeout) << quick.status().ToString();
  EXPECT_NE(quick.status().message().find("another call was connecting"), std::string::npos)
      << quick.status().ToString();
  EXPECT_FALSE(connecting_done.load());  // returned while the other connect was still running

  release.Raise();
  connecting.join();
  EXPECT_FALSE(slow.ok());
}

// A node's ERROR answers one request: the calls pipelined with it are still answered on the
// same connection.
TEST(ClientFaultTest, ANodeErrorForOneRequestFailsThatRequestAlone) {
  Latch got_list;
  FakeNode node([&](FakeConn& conn, int) {
    FakeFrame list, ping;
    if (!conn.Hello() || !conn.Read(&list)) return;
    got_list.Raise();
    if (!conn.Read(&ping)) return;
    protocol::ErrorResponse error;
    error.code = StatusCode::kInvalidArgument;
    error.message = "LIST cursor 77 is unknown for this namespace or was forgotten";
    conn.Write(ResponseBytes(list.header.request_id, error));
    conn.Write(PingAnswer(ping.header.request_id));
    ServePings(conn);
  });
  InitOptions options;
  options.transport_type = 1;  // TCP only: the fake node scripts every answer it gives
  options.connections = 1;
  Client client;
  ASSERT_TRUE(client.Init("error-test", node.address(), options).ok());

  Result<KeyPage> page = Status::Internal("not run");
  std::thread lister([&] { page = client.List("ns", 77); });
  ASSERT_TRUE(got_list.WaitFor(1));
  Status pinged = client.Ping();  // pipelined behind the LIST
  lister.join();

  ASSERT_FALSE(page.ok());
  EXPECT_EQ(page.status().code(), StatusCode::kInvalidArgument) << page.status().ToString();
  EXPECT_NE(page.status().message().find("cursor 77"), std::string::npos)
      << page.status().ToString();
  EXPECT_TRUE(pinged.ok()) << pinged.ToString();
  EXPECT_TRUE(client.Ping().ok());
  EXPECT_EQ(node.accepted(), 1);
}

// An ERROR that is not tied to a request (id 0: the node could not read the header) ends the
// connection: every call on it fails.
TEST(ClientFaultTest, ANodeErrorWithoutARequestIdEndsTheConnection) {
  FakeNode node([&](FakeConn& conn, int) {
    FakeFrame ping;
    if (!conn.Hello() || !conn.Read(&ping)) return;
    protocol::ErrorResponse error;
    error.code = StatusCode::kCorruption;
    error.message = "bad magic";
    conn.Write(ResponseBytes(0, error));
    FakeFrame none;
    conn.Read(&none);
  });
  InitOptions options;
  options.transport_type = 1;  // TCP only: the fake node scripts every answer it gives
  options.connections = 1;
  Client client;
  ASSERT_TRUE(client.Init("error-test", node.address(), options).ok());
  Status pinged = client.Ping();
  EXPECT_EQ(pinged.code(), StatusCode::kUnavailable) << pinged.ToString();
  EXPECT_NE(pinged.message().find("bad magic"), std::string::npos) << pinged.ToString();
}

// Limits a node may announce, with responses up to about 1 GiB.
protocol::Limits RoomyLimits() {
  protocol::Limits limits;
  limits.max_frame_bytes = uint64_t{1} << 30;
  EXPECT_TRUE(protocol::ValidateLimits(limits).ok());
  return limits;
}

std::string HeaderClaiming(protocol::Opcode op, uint64_t request_id, uint32_t descriptor_length) {
  protocol::FrameHeader header;
  header.version = protocol::kMaxProtocolVersion;
  header.opcode = op;
  header.flags = protocol::kFlagResponse;
  header.request_id = request_id;
  header.descriptor_length = descriptor_length;
  std::string bytes;
  protocol::AppendFrameHeader(header, &bytes);
  return bytes;
}

// A descriptor larger than any answer to the request could be is refused from the header,
// before a byte of it is allocated or read.
TEST(ClientFaultTest, AResponseLargerThanItsRequestCanBringBackIsRefusedFromTheHeader) {
  FakeNode node([&](FakeConn& conn, int) {
    FakeFrame request;
    if (!conn.Hello(RoomyLimits()) || !conn.Read(&request)) return;
    conn.Write(HeaderClaiming(protocol::Opcode::kMexist, request.header.request_id, 1u << 30));
    FakeFrame none;
    conn.Read(&none);
  });
  InitOptions options;
  options.transport_type = 1;  // TCP only: the fake node scripts every answer it gives
  options.connections = 1;
  Client client;
  ASSERT_TRUE(client.Init("claim-test", node.address(), options).ok());
  Result<BatchResult> exists = client.MExist({"k"});
  ASSERT_FALSE(exists.ok());
  EXPECT_EQ(exists.status().code(), StatusCode::kCorruption) << exists.status().ToString();
  EXPECT_NE(exists.status().message().find("at most 14"), std::string::npos)
      << exists.status().ToString();
}

long MaxRssKib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

// A STATS answer may be large, so its claim is within bounds; the client still allocates only
// for the bytes that arrive (the node sends 100 and closes), never for the 1 GiB claimed.
TEST(ClientFaultTest, AResponseDescriptorIsAllocatedAsItArrivesNotFromItsClaim) {
  FakeNode node([&](FakeConn& conn, int) {
    FakeFrame request;
    if (!conn.Hello(RoomyLimits()) || !conn.Read(&request)) return;
    conn.Write(HeaderClaiming(protocol::Opcode::kStats, request.header.request_id, 1u << 30));
    conn.Write(std::string(100, '\0'));
  });
  InitOptions options;
  options.transport_type = 1;  // TCP only: the fake node scripts every answer it gives
  options.connections = 1;
  Client client;
  ASSERT_TRUE(client.Init("claim-test", node.address(), options).ok());
  const long before = MaxRssKib();
  Result<NodeStats> stats = client.Stats();
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), StatusCode::kUnavailable) << stats.status().ToString();
  // Zero-filling the claim would have raised the peak by 1 GiB.
  EXPECT_LT(MaxRssKib() - before, 256 * 1024) << "KiB of peak RSS added";
}

// Against a real node: a forgotten LIST cursor is that call's InvalidArgument, with the node's
// reason, on a connection that stays open.
TEST(ClientFaultTest, AForgottenListCursorIsThatCallsErrorWithTheNodesReason) {
  auto server = testing::StartNode(testing::SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  InitOptions one;
  one.connections = 1;  // every call on the one connection whose survival is checked
  ASSERT_TRUE(client.Init("cursor-test", server->address(), one).ok());
  ASSERT_TRUE(client.Ping().ok());
  const uint64_t accepted = server->Stats().Get("connections_accepted");
  Result<KeyPage> page = client.List("ns", /*cursor=*/987654321);
  ASSERT_FALSE(page.ok());
  EXPECT_EQ(page.status().code(), StatusCode::kInvalidArgument) << page.status().ToString();
  EXPECT_NE(page.status().message().find("restart the listing"), std::string::npos)
      << page.status().ToString();
  EXPECT_TRUE(client.Ping().ok());
  // The node refused that request alone: the connection stayed, nothing reconnected.
  EXPECT_EQ(server->Stats().Get("connections_accepted"), accepted);
}

// The caller that waits reads the connection itself when nobody else does: here it is on its own
// MGET's response when its deadline passes (the node holds back the value's second half). It
// returns at once, its buffer untouched after, and whoever reads next drains the rest, so the
// PING pipelined behind it still succeeds.
TEST(ClientDrainTest, AWaitingCallerReadingItsOwnResponseTimesOutAndTheRestIsDrained) {
  const std::vector<char> value = Pattern(7, kBigValue);
  Latch got_requests, release, receiving;
  FakeNode node(HalfAnswerThen(value, &got_requests, &release));
  Pipeline p(node);
  ASSERT_NE(p.conn, nullptr);

  std::vector<char> buffer(kBigValue, '\x5a');
  SignallingMget mget(&receiving);
  PingHandler ping;
  auto mget_ticket = p.SendMget(&mget, &buffer, MonotonicClock::now() + kLong);
  auto ping_ticket = p.SendPing(&ping);
  // Waits with a deadline of its own, shorter than the MGET's (which the drain is bounded by).
  Status timed_out =
      p.conn->Wait(mget_ticket, MonotonicClock::now() + std::chrono::milliseconds(300));
  EXPECT_EQ(timed_out.code(), StatusCode::kTimeout) << timed_out.ToString();
  const std::vector<char> at_return = buffer;
  release.Raise();

  Status pinged = p.conn->Wait(ping_ticket, MonotonicClock::now() + kLong);
  EXPECT_TRUE(pinged.ok()) << pinged.ToString();
  EXPECT_EQ(buffer, at_return);
  EXPECT_TRUE(p.conn->alive());
  PingHandler again;
  EXPECT_TRUE(p.conn->Wait(p.SendPing(&again), MonotonicClock::now() + kLong).ok());
  EXPECT_EQ(node.accepted(), 1);
}

// Many callers on one connection, each pipelining PINGs and waiting for them in turn, some with
// a deadline already passed: whoever reads hands every other caller its answer, the reader role
// changes hands among them, and no call is lost or answered twice.
TEST(ClientDrainTest, CallersSharingAConnectionTakeTurnsReadingIt) {
  FakeNode node([](FakeConn& conn, int) {
    if (conn.Hello()) ServePings(conn);
  });
  Pipeline p(node);
  ASSERT_NE(p.conn, nullptr);
  constexpr int kThreads = 6;
  constexpr int kRounds = 150;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        PingHandler first, second;
        auto a = p.SendPing(&first);
        auto b = p.SendPing(&second);
        if (a == nullptr || b == nullptr) {
          failures.fetch_add(1);
          return;
        }
        // Every few rounds the first call gives up at once: its answer is then drained.
        const bool give_up = (round + t) % 7 == 0;
        Status sa =
            p.conn->Wait(a, give_up ? MonotonicClock::now() : MonotonicClock::now() + kLong);
        if (!sa.ok() && !(give_up && sa.code() == StatusCode::kTimeout)) failures.fetch_add(1);
        if (!p.conn->Wait(b, MonotonicClock::now() + kLong).ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(p.conn->alive());
  EXPECT_EQ(node.accepted(), 1);
}

}  // namespace
}  // namespace kvport
