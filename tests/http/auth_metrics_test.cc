// SPDX-License-Identifier: Apache-2.0
// Failed and throttled authentications on /metrics: a client guessing tokens shows in
// kvport_auth_failures_total until its address is backed off, then in
// kvport_auth_throttled_total (docs/security.md, "Failed authentications").
#include <httplib.h>

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "http_test_util.h"

namespace kvport::testing {
namespace {

constexpr char kAdmin[] = "ops-admin-secret-0123";

// "name{labels}" -> value, for every sample line of the node's /metrics page.
std::map<std::string, double> Scrape(const http::HttpServer& server) {
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(10, 0);
  auto r = client.Get("/metrics", {{"Authorization", std::string("Bearer ") + kAdmin}});
  std::map<std::string, double> samples;
  EXPECT_TRUE(r && r->status == 200);
  if (!r) return samples;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
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

  const auto samples = Scrape(*n.http);
  EXPECT_EQ(samples.at("kvport_auth_failures_total"), 10);
  EXPECT_GE(samples.at("kvport_auth_throttled_total"), 1);
}

}  // namespace
}  // namespace kvport::testing
