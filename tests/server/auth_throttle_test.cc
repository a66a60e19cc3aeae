// SPDX-License-Identifier: Apache-2.0
// The budget of failed authentications (server/auth_throttle.h, docs/security.md "Failed
// authentications"): the rule on a hand-driven clock, then a node with tokens over the binary
// protocol and over RESP, whose clock the tests move instead of waiting.
#include "server/auth_throttle.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "resp_test_client.h"
#include "server_fixture.h"

namespace kvport::testing {
namespace {

using server::AuthThrottle;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kSecret[] = "reader-secret-0123456789";
constexpr char kWrong[] = "wrong-secret-000000000000";

// A clock the test moves by hand.
struct FakeClock {
  MonotonicClock::time_point now{seconds(1000)};
  AuthThrottle::Clock clock() {
    return [this] { return now; };
  }
};

bool Refused(AuthThrottle& throttle, std::string_view address) {
  return !throttle.Admit(address).ok();
}

TEST(AuthThrottleTest, ABudgetOfFailuresThenABackOffThatDoublesUpToItsCap) {
  FakeClock time;
  AuthThrottle throttle(AuthThrottle::Options(), time.clock());
  for (int i = 1; i < 10; ++i) {
    EXPECT_FALSE(throttle.Charge("192.0.2.7")) << i;
    EXPECT_TRUE(throttle.Admit("192.0.2.7").ok()) << i;
  }
  EXPECT_TRUE(throttle.Charge("192.0.2.7"));  // the tenth spends the budget
  Status refused = throttle.Admit("192.0.2.7");
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("192.0.2.7"), std::string::npos) << refused.ToString();
  EXPECT_NE(refused.message().find("retry"), std::string::npos) << refused.ToString();
  // A refusal is not a failure: asking again does not lengthen the back-off.
  for (int i = 0; i < 100; ++i)
    EXPECT_TRUE(Refused(throttle, "192.0.2.7"));
  time.now += milliseconds(999);
  EXPECT_TRUE(Refused(throttle, "192.0.2.7"));
  time.now += milliseconds(1);
  EXPECT_TRUE(throttle.Admit("192.0.2.7").ok());

  // Each failure after the budget doubles the back-off: 2 s, 4 s, ... at most 60 s.
  milliseconds expected(2000);
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(throttle.Charge("192.0.2.7"));
    time.now += expected - milliseconds(1);
    EXPECT_TRUE(Refused(throttle, "192.0.2.7")) << expected.count();
    time.now += milliseconds(1);
    EXPECT_TRUE(throttle.Admit("192.0.2.7").ok()) << expected.count();
    expected = std::min<milliseconds>(expected * 2, seconds(60));
  }
}

TEST(AuthThrottleTest, PeersAreChargedApartAndForgottenAfterAQuietSpell) {
  FakeClock time;
  AuthThrottle throttle(AuthThrottle::Options(), time.clock());
  for (int i = 0; i < 10; ++i)
    throttle.Charge("192.0.2.7");
  EXPECT_TRUE(Refused(throttle, "192.0.2.7"));
  EXPECT_TRUE(throttle.Admit("192.0.2.8").ok());
  EXPECT_TRUE(throttle.Admit("2001:db8::1").ok());

  // Nine failures, then ten quiet minutes: the whole budget again.
  for (int i = 0; i < 9; ++i)
    EXPECT_FALSE(throttle.Charge("192.0.2.8"));
  time.now += std::chrono::minutes(10);
  for (int i = 0; i < 9; ++i)
    EXPECT_FALSE(throttle.Charge("192.0.2.8")) << i;
  EXPECT_TRUE(throttle.Charge("192.0.2.8"));
}

TEST(AuthThrottleTest, AnIpv6SlashSixtyFourIsOnePeerAndUnixSocketsAreNeverThrottled) {
  EXPECT_EQ(AuthThrottle::PeerOf("192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(AuthThrottle::PeerOf("::ffff:192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(AuthThrottle::PeerOf("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(AuthThrottle::PeerOf("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::/64");
  EXPECT_EQ(AuthThrottle::PeerOf("2001:db8:1:3::1"), "2001:db8:1:3::/64");
  EXPECT_EQ(AuthThrottle::PeerOf(AuthThrottle::TokenPeer("reader")), "token:reader");
  EXPECT_EQ(AuthThrottle::PeerOf("unix:uid=1000"), std::nullopt);
  EXPECT_EQ(AuthThrottle::PeerOf("?"), std::nullopt);

  FakeClock time;
  AuthThrottle throttle(AuthThrottle::Options(), time.clock());
  // A host rotating through its /64 is still one peer.
  for (int i = 0; i < 10; ++i)
    throttle.Charge("2001:db8:1:2::" + std::to_string(i + 1));
  EXPECT_TRUE(Refused(throttle, "2001:db8:1:2:beef::9"));
  EXPECT_TRUE(throttle.Admit("2001:db8:1:3::1").ok());
  for (int i = 0; i < 100; ++i)
    EXPECT_FALSE(throttle.Charge("unix:uid=1000"));
  EXPECT_TRUE(throttle.Admit("unix:uid=1000").ok());
}

TEST(AuthThrottleTest, TheTableIsBoundedForgettingThePeerSeenLeastRecently) {
  FakeClock time;
  AuthThrottle::Options options;
  options.max_peers = 4;
  AuthThrottle throttle(options, time.clock());
  for (int i = 0; i < 10; ++i)
    throttle.Charge("192.0.2.1");
  for (int peer = 2; peer <= 4; ++peer)
    throttle.Charge("192.0.2." + std::to_string(peer));
  EXPECT_TRUE(Refused(throttle, "192.0.2.1"));  // seen last: kept
  for (int peer = 5; peer <= 100; ++peer)
    throttle.Charge("192.0.2." + std::to_string(peer));
  EXPECT_EQ(throttle.tracked(), 4u);
  EXPECT_TRUE(throttle.Admit("192.0.2.1").ok());  // pushed out by 96 newer peers
}

// --- a node with tokens ---------------------------------------------------------------------

ServerOptions TokenNodeOptions() {
  ServerOptions options = SmallNodeOptions();
  options.tokens = {{"reader", kSecret, {"*"}, {"*"}, false, std::nullopt, {}},
                    {"admin", "admin-secret-0123456789", {"*"}, {"*"}, true, std::nullopt, {}}};
  return options;
}

uint64_t Stat(const Server& server, const char* name) {
  return server.Stats().Get(name);
}

// The ERROR a connection is greeted with when the node refused it at accept.
Status GreetingOf(const Server& server) {
  auto c = TestClient::Connect(server.port(), /*hello=*/false);
  if (!c.ok()) return c.status();
  auto frame = c->ReadFrame();
  if (!frame.ok()) return frame.status();
  return c->ErrorOf(*frame);
}

TEST(AuthThrottleNodeTest, GuessedTokensBackOffTheAddressUntilTheBackOffEnds) {
  auto server = StartNode(TokenNodeOptions());
  ASSERT_NE(server, nullptr);
  // Accepted before the guessing starts: its HELLO comes while the address is backed off.
  auto early = TestClient::Connect(server->port(), /*hello=*/false);
  ASSERT_TRUE(early.ok());
  ASSERT_TRUE(Eventually([&] { return Stat(*server, "unauthenticated_connections") == 1; }));

  // A failed HELLO ends its connection, so a guesser needs one per guess.
  for (int i = 0; i < 10; ++i) {
    auto guesser = TestClient::Connect(server->port(), /*hello=*/false);
    ASSERT_TRUE(guesser.ok());
    EXPECT_EQ(guesser->Hello(protocol::kMaxProtocolVersion, kWrong).code(),
              StatusCode::kPermissionDenied)
        << i;
    EXPECT_TRUE(guesser->ReadsEndOfStream());
  }
  EXPECT_EQ(Stat(*server, "auth_failures"), 10u);

  // Backed off: a new connection from the address is refused at accept, saying when to retry.
  Status greeting = GreetingOf(*server);
  EXPECT_EQ(greeting.code(), StatusCode::kUnavailable) << greeting.ToString();
  EXPECT_NE(greeting.message().find("too many failed authentications from 127.0.0.1"),
            std::string::npos)
      << greeting.ToString();
  // One already open is refused at HELLO without its secret being checked, even the right one.
  Status early_hello = early->Hello(protocol::kMaxProtocolVersion, kSecret);
  EXPECT_EQ(early_hello.code(), StatusCode::kUnavailable) << early_hello.ToString();
  EXPECT_TRUE(early->ReadsEndOfStream());
  EXPECT_EQ(Stat(*server, "auth_failures"), 10u);  // refusals are not failures
  EXPECT_EQ(Stat(*server, "auth_throttled"), 2u);

  // Once the back-off (1 s after the tenth failure) has passed, the right token works.
  server->AdvanceAuthClockForTesting(seconds(1));
  auto later = TestClient::Connect(server->port(), /*hello=*/false);
  ASSERT_TRUE(later.ok());
  EXPECT_TRUE(later->Hello(protocol::kMaxProtocolVersion, kSecret).ok());
  EXPECT_TRUE(later->Ping().ok());
}

TEST(AuthThrottleNodeTest, ASuccessDoesNotBuyMoreGuesses) {
  auto server = StartNode(TokenNodeOptions());
  ASSERT_NE(server, nullptr);
  for (int i = 0; i < 9; ++i) {
    auto guesser = TestClient::Connect(server->port(), /*hello=*/false);
    ASSERT_TRUE(guesser.ok());
    EXPECT_FALSE(guesser->Hello(protocol::kMaxProtocolVersion, kWrong).ok());
  }
  auto holder = TestClient::Connect(server->port(), /*hello=*/false);
  ASSERT_TRUE(holder.ok());
  ASSERT_TRUE(holder->Hello(protocol::kMaxProtocolVersion, kSecret).ok());
  auto guesser = TestClient::Connect(server->port(), /*hello=*/false);
  ASSERT_TRUE(guesser.ok());
  EXPECT_EQ(guesser->Hello(protocol::kMaxProtocolVersion, kWrong).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(GreetingOf(*server).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(holder->Ping().ok());  // an authenticated session is not touched
}

TEST(AuthThrottleNodeTest, ConnectionsThatNeverHelloCountAgainstTheirAddress) {
  ServerOptions options = TokenNodeOptions();
  options.hello_timeout = milliseconds(500);
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  // Sixteen silent connections: the six after the budget back the address off for 60 s, far
  // longer than this test takes to connect again.
  std::vector<TestClient> silent;
  for (int i = 0; i < 16; ++i) {
    auto c = TestClient::Connect(server->port(), /*hello=*/false);
    ASSERT_TRUE(c.ok());
    silent.push_back(std::move(c).value());
  }
  ASSERT_TRUE(Eventually([&] { return Stat(*server, "hello_timeouts") == 16; }));
  EXPECT_EQ(Stat(*server, "auth_failures"), 0u);  // no secret was refused
  Status greeting = GreetingOf(*server);
  EXPECT_EQ(greeting.code(), StatusCode::kUnavailable) << greeting.ToString();
  EXPECT_NE(greeting.message().find("too many failed authentications"), std::string::npos)
      << greeting.ToString();
  EXPECT_EQ(Stat(*server, "auth_throttled"), 1u);
}

// --- RESP -----------------------------------------------------------------------------------

ServerOptions RespTokenNodeOptions() {
  ServerOptions options = TokenNodeOptions();
  options.resp_listen = "127.0.0.1:0";
  return options;
}

const std::string kWrongPass = "-WRONGPASS invalid username-password pair or user is disabled.";

TEST(AuthThrottleRespTest, APipelinedGuessingLoopIsClosedAtTheBudget) {
  auto server = StartNode(RespTokenNodeOptions());
  ASSERT_NE(server, nullptr);
  RespTestClient guesser(server->resp_port());
  ASSERT_TRUE(guesser.connected());
  std::string loop;
  for (int i = 0; i < 1000; ++i)
    loop += RespTestClient::Encode({"AUTH", "guess-" + std::to_string(i) + "-0123456789abcdef"});
  ASSERT_TRUE(guesser.SendRaw(loop));
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(guesser.Read(), kWrongPass) << i;
  EXPECT_EQ(guesser.Read(), "<closed>");  // the other 990 were never looked at
  EXPECT_EQ(Stat(*server, "auth_failures"), 10u);

  // A second connection from the address is refused at accept, saying why.
  RespTestClient second(server->resp_port());
  ASSERT_TRUE(second.connected());
  const std::string greeting = second.Read();
  EXPECT_EQ(greeting.rfind("-ERR too many failed authentications from 127.0.0.1", 0), 0u)
      << greeting;
  EXPECT_EQ(second.Read(), "<closed>");
  EXPECT_EQ(Stat(*server, "auth_throttled"), 1u);

  server->AdvanceAuthClockForTesting(seconds(1));
  RespTestClient later(server->resp_port());
  ASSERT_TRUE(later.connected());
  EXPECT_EQ(later.Call({"AUTH", kSecret}), "+OK");
  EXPECT_EQ(later.Call({"SET", "k", "v"}), "+OK");
}

TEST(AuthThrottleRespTest, AnAuthAfterAnotherIsChargedToTheTokenHeld) {
  auto server = StartNode(RespTokenNodeOptions());
  ASSERT_NE(server, nullptr);
  RespTestClient holder(server->resp_port());
  ASSERT_EQ(holder.Call({"HELLO", "3", "AUTH", "reader", kSecret}).substr(0, 1), "%");
  // Guessing the admin's secret from a session of one's own: the same budget, then closed.
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(holder.Call({"AUTH", "admin", kWrong}), kWrongPass) << i;
  EXPECT_EQ(holder.Read(), "<closed>");

  // The token, not the address, is backed off: a new connection authenticates, and its next
  // guess is refused unchecked.
  RespTestClient again(server->resp_port());
  EXPECT_EQ(again.Call({"AUTH", kSecret}), "+OK");
  const std::string refused = again.Call({"AUTH", "admin", "admin-secret-0123456789"});
  EXPECT_EQ(refused.rfind("-ERR too many failed authentications from token:reader", 0), 0u)
      << refused;
  EXPECT_EQ(again.Read(), "<closed>");
  EXPECT_EQ(Stat(*server, "auth_failures"), 10u);
  EXPECT_EQ(Stat(*server, "auth_throttled"), 1u);
}

}  // namespace
}  // namespace kvport::testing
