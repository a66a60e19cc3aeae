// SPDX-License-Identifier: Apache-2.0
// Failed and throttled authentications on /metrics: a client guessing tokens shows in
// kvport_auth_failures_total until its address is backed off, then in
// kvport_auth_throttled_total (docs/security.md, "Failed authentications").
#include <httplib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <sstream>
#include <string>

#include "http_test_util.h"

namespace kvport::testing {
namespace {

constexpr char kAdmin[] = "ops-admin-secret-0123";

// The status of GET /metrics with `bearer` ("" for no Authorization header).
int Get(const http::HttpServer& server, const std::string& bearer) {
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(10, 0);
  httplib::Headers headers;
  if (!bearer.empty()) headers.emplace("Authorization", "Bearer " + bearer);
  auto r = client.Get("/metrics", headers);
  return r ? r->status : 0;
}

// "name{labels}" -> value, for every sample line of the node's /metrics page.
std::map<std::string, double> Scrape(const http::HttpServer& server) {
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(10, 0);
  auto r = client.Get("/metrics", {{"Authorization", std::string("Bearer ") + kAdmin}});
  EXPECT_TRUE(r && r->status == 200);
  return r ? Samples(r->body) : std::map<std::string, double>();
}

TEST(AuthMetrics, GuessesAndTheRefusalsThatFollowAreCounted) {
  NodeWithHttp n = NodeWithHttp::Start({}, {{"ops", kAdmin, {"*"}, {"*"}, true, std::nullopt, {}}});
  ASSERT_TRUE(n.node && n.http);
  EXPECT_EQ(Scrape(*n.http).at("kvport_auth_failures_total"), 0);
  EXPECT_EQ(Scrape(*n.http).at("kvport_auth_throttled_total"), 0);

  // Clients with a wrong token: each is refused, until the address has spent its budget and the
  // node refuses its connections without looking at their tokens.
  int refused_for_the_token = 0;
  Status last;
  for (int i = 0; i < 30; ++i) {
    Client client;
    InitOptions options;
    options.token = "wrong-secret-0123456789";
    last = client.Init("guesser", n.node->address(), options);
    if (last.code() != StatusCode::kPermissionDenied) break;
    ++refused_for_the_token;
  }
  EXPECT_EQ(refused_for_the_token, 10);
  EXPECT_EQ(last.code(), StatusCode::kUnavailable) << last.ToString();
  EXPECT_NE(last.message().find("too many failed authentications"), std::string::npos)
      << last.ToString();

  // The address is backed off for the HTTP endpoint too: even the admin token is refused.
  EXPECT_EQ(Get(*n.http, kAdmin), 401);
  n.node->AdvanceAuthClockForTesting(std::chrono::minutes(2));
  const auto samples = Scrape(*n.http);
  EXPECT_EQ(samples.at("kvport_auth_failures_total"), 10);
  EXPECT_GE(samples.at("kvport_auth_throttled_total"), 2);
}

// Bearer tokens guessed at /metrics are charged like tokens guessed at HELLO: after the budget
// the address is backed off, its right token refused until the back-off ends, and a client's
// HELLO from it refused as well. A request with no token guesses nothing and is not charged.
// Before: /metrics checked every guess, as fast as HTTP could carry them.
TEST(AuthMetrics, BearerGuessesSpendTheAddressesBudget) {
  NodeWithHttp n = NodeWithHttp::Start({}, {{"ops", kAdmin, {"*"}, {"*"}, true, std::nullopt, {}}});
  ASSERT_TRUE(n.node && n.http);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(Get(*n.http, ""), 401);  // no token: refused, not charged
  EXPECT_EQ(Get(*n.http, kAdmin), 200);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(Get(*n.http, "wrong-secret-0123456789"), 401);
  EXPECT_EQ(Get(*n.http, kAdmin), 401) << "backed off";
  Client client;
  InitOptions options;
  options.token = kAdmin;
  EXPECT_EQ(client.Init("admin", n.node->address(), options).code(), StatusCode::kUnavailable);
  n.node->AdvanceAuthClockForTesting(std::chrono::seconds(2));
  EXPECT_EQ(Get(*n.http, kAdmin), 200);
  const auto samples = Scrape(*n.http);
  EXPECT_EQ(samples.at("kvport_auth_failures_total"), 10);
  EXPECT_GE(samples.at("kvport_auth_throttled_total"), 2);
}

}  // namespace
}  // namespace kvport::testing
