// SPDX-License-Identifier: Apache-2.0
// The node's HTTP endpoint against an in-process node: /health through the node's life,
// /metrics after a workload (counters move, the histogram is consistent, namespaces are capped,
// promtool accepts the page), /stats as JSON, and the auth hook.
#include <httplib.h>

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "http/metrics.h"
#include "http_test_util.h"

namespace kvport::testing {
namespace {

using http::HttpOptions;

httplib::Result Get(const http::HttpServer& server, const std::string& path,
                    const httplib::Headers& headers = {}) {
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(10, 0);
  return client.Get(path.c_str(), headers);
}

TEST(HttpEndpoint, HealthSaysStartingUntilANodeIsAttachedThenServingThenDraining) {
  auto http = http::HttpServer::Start(HttpOptions{});
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  auto r = Get(**http, "/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(nlohmann::json::parse(r->body)["status"], "starting");
  EXPECT_EQ(Get(**http, "/metrics")->status, 503);

  ServerOptions options;
  options.capacity_bytes = 4 << 20;
  options.threads = 1;
  auto node = Server::Start(options);
  ASSERT_TRUE(node.ok());
  (*http)->Attach(node->get());
  r = Get(**http, "/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body.find('\n'), r->body.size() - 1) << "one line: " << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body)["status"], "serving");

  (*node)->Stop();
  r = Get(**http, "/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(nlohmann::json::parse(r->body)["status"], "stopped");
  (*http)->Attach(nullptr);
  (*http)->Stop();
  (*http)->Stop();  // idempotent
}

TEST(HttpEndpoint, BarePortMeansLoopback) {
  EXPECT_EQ(http::HttpListenAddress("9470"), "127.0.0.1:9470");
  EXPECT_EQ(http::HttpListenAddress("0.0.0.0:9470"), "0.0.0.0:9470");
  EXPECT_EQ(http::HttpListenAddress("[::1]:9470"), "[::1]:9470");
  HttpOptions bad;
  bad.listen = "nonsense:port";
  EXPECT_FALSE(http::HttpServer::Start(bad).ok());
}

TEST(HttpEndpoint, MetricsMoveWithAWorkload) {
  NodeWithHttp n = NodeWithHttp::Start();
  ASSERT_TRUE(n.node && n.http);
  auto before = Get(*n.http, "/metrics");
  ASSERT_TRUE(before);
  ASSERT_EQ(before->status, 200);
  EXPECT_NE(before->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  const auto b = Samples(before->body);
  EXPECT_EQ(b.at("kvport_objects"), 0);
  EXPECT_EQ(b.at("kvport_capacity_bytes"), 16 << 20);
  EXPECT_EQ(b.at("kvport_build_info{version=\"test-version\"}"), 1);
  EXPECT_EQ(b.at("kvport_auth_info{mode=\"none\"}"), 1);
  EXPECT_EQ(b.at("kvport_serving"), 1);
  EXPECT_GT(b.at("kvport_process_resident_memory_bytes"), 0);

  RunWorkload(*n.node, {"", "tenant-a"}, 20);
  auto after = Get(*n.http, "/metrics");
  ASSERT_TRUE(after);
  const auto a = Samples(after->body);
  EXPECT_EQ(a.at("kvport_objects"), 40);
  EXPECT_GE(a.at("kvport_used_bytes"), 40 * 1024);
  EXPECT_EQ(a.at("kvport_hits_total"), 40);
  EXPECT_EQ(a.at("kvport_misses_total"), 40);
  EXPECT_EQ(a.at("kvport_requests_total{op=\"mset\"}"), 40);
  EXPECT_EQ(a.at("kvport_requests_total{op=\"mget\"}"), 80);
  EXPECT_EQ(a.at("kvport_request_errors_total{op=\"mget\"}"), 0);
  EXPECT_GT(a.at("kvport_received_bytes_total"), 40 * 1024);
  EXPECT_GT(a.at("kvport_sent_bytes_total"), 40 * 1024);
  EXPECT_GE(a.at("kvport_connections"), 0);
  EXPECT_GE(a.at("kvport_connections_accepted_total"), 1);
  EXPECT_EQ(a.at("kvport_namespaces"), 2);
  EXPECT_EQ(a.at("kvport_namespace_objects{namespace=\"tenant-a\"}"), 20);
  EXPECT_EQ(a.at("kvport_namespace_objects{namespace=\"\"}"), 20);
  EXPECT_GE(a.at("kvport_namespace_bytes{namespace=\"tenant-a\"}"), 20 * 1024);

  // The MGET histogram: every request in +Inf, buckets cumulative, a positive sum.
  const std::string op = "op=\"mget\"";
  EXPECT_EQ(a.at("kvport_request_duration_seconds_count{" + op + "}"), 80);
  EXPECT_EQ(a.at("kvport_request_duration_seconds_bucket{" + op + ",le=\"+Inf\"}"), 80);
  EXPECT_GT(a.at("kvport_request_duration_seconds_sum{" + op + "}"), 0);
  double previous = 0;
  int buckets = 0;
  for (const auto& [name, value] : a) {
    if (name.rfind("kvport_request_duration_seconds_bucket{" + op, 0) != 0) continue;
    ++buckets;
    (void)previous;
  }
  EXPECT_GE(buckets, 10);
  std::vector<std::pair<double, double>> ordered;
  const std::regex le(
      "kvport_request_duration_seconds_bucket\\{op=\"mget\",le=\"([0-9.e+-]+)\"\\}");
  for (const auto& [name, value] : a) {
    std::smatch m;
    if (std::regex_match(name, m, le)) ordered.emplace_back(std::stod(m[1]), value);
  }
  std::sort(ordered.begin(), ordered.end());
  for (const auto& [bound, count] : ordered) {
    EXPECT_GE(count, previous) << "le=" << bound;
    previous = count;
  }
  EXPECT_LE(previous, 80);
}

TEST(HttpEndpoint, StatsIsTheStatsContentAsJson) {
  NodeWithHttp n = NodeWithHttp::Start();
  ASSERT_TRUE(n.node && n.http);
  RunWorkload(*n.node, {"ns1"}, 5);
  auto r = Get(*n.http, "/stats");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const auto json = nlohmann::json::parse(r->body);
  EXPECT_EQ(json["counters"]["objects"], 5);
  EXPECT_EQ(json["counters"]["op_mset"], 5);
  EXPECT_EQ(json["counters"]["hits"], 5);
  EXPECT_TRUE(json["counters"].contains("latency_mget_p99_us"));
  EXPECT_TRUE(json["counters"].contains("errors_mget"));
  ASSERT_EQ(json["namespaces"].size(), 1u);
  EXPECT_EQ(json["namespaces"][0]["name"], "ns1");
  EXPECT_EQ(json["namespaces"][0]["objects"], 5);
  // Every counter of the node's own snapshot is there.
  for (const auto& [name, value] : n.node->Stats().counters)
    EXPECT_TRUE(json["counters"].contains(name)) << name;
  EXPECT_EQ(Get(*n.http, "/nothing-here")->status, 404);
}

TEST(HttpEndpoint, AuthHookGuardsEverythingButHealth) {
  HttpOptions options;
  std::vector<std::string> seen;
  options.authorize = [&seen](std::string_view bearer) {
    seen.emplace_back(bearer);
    return bearer == "admin-secret";
  };
  NodeWithHttp n = NodeWithHttp::Start(options);
  ASSERT_TRUE(n.node && n.http);
  EXPECT_EQ(Get(*n.http, "/health")->status, 200);
  EXPECT_TRUE(seen.empty()) << "/health never asks";
  for (const char* path : {"/metrics", "/stats"}) {
    auto denied = Get(*n.http, path);
    ASSERT_TRUE(denied);
    EXPECT_EQ(denied->status, 401) << path;
    EXPECT_EQ(denied->get_header_value("WWW-Authenticate").rfind("Bearer", 0), 0u);
    EXPECT_EQ(Get(*n.http, path, {{"Authorization", "Bearer wrong"}})->status, 401);
    EXPECT_EQ(Get(*n.http, path, {{"Authorization", "Bearer admin-secret"}})->status, 200);
    EXPECT_EQ(Get(*n.http, path, {{"Authorization", "bearer admin-secret"}})->status, 200);
  }
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(seen[0], "");
  EXPECT_EQ(seen[1], "wrong");
}

// Without a hook, the node's own tokens decide: only an admin token sees /metrics and /stats.
TEST(HttpEndpoint, ANodeWithTokensShowsItsPagesToAdminTokensOnly) {
  NodeWithHttp n = NodeWithHttp::Start(
      {}, {{"ops", "ops-admin-secret-0123", {}, {}, true, std::nullopt, {}},
           {"tenant", "tenant-secret-0123456", {"*"}, {"*"}, false, std::nullopt, {}}});
  ASSERT_TRUE(n.node && n.http);
  EXPECT_EQ(Get(*n.http, "/health")->status, 200);
  for (const char* path : {"/metrics", "/stats"}) {
    EXPECT_EQ(Get(*n.http, path)->status, 401) << path;
    EXPECT_EQ(Get(*n.http, path, {{"Authorization", "Bearer tenant-secret-0123456"}})->status, 401)
        << path;
    EXPECT_EQ(Get(*n.http, path, {{"Authorization", "Bearer ops-admin-secret-0123"}})->status, 200)
        << path;
  }
  auto metrics = Get(*n.http, "/metrics", {{"Authorization", "Bearer ops-admin-secret-0123"}});
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("kvport_auth_info{mode=\"token\"} 1"), std::string::npos);
}

TEST(HttpEndpoint, NamespaceLabelsAreCappedWithTheRestSummed) {
  ServerStats stats;
  for (int i = 0; i < 30; ++i) {
    stats.namespaces.push_back({"ns" + std::to_string(i), 1, static_cast<uint64_t>(100 + i)});
  }
  stats.namespaces.push_back({"evil\"\n\\name", 2, 1000});
  stats.namespaces.push_back({std::string(http::kOtherNamespaceLabel), 3, 5});
  http::MetricsContext context;
  context.max_namespace_labels = 5;
  const auto s = Samples(http::RenderMetrics(stats, context));
  int labelled = 0;
  for (const auto& [name, value] : s) {
    if (name.rfind("kvport_namespace_objects{", 0) == 0) ++labelled;
  }
  EXPECT_EQ(labelled, 6);  // 5 + the overflow series
  // The largest: the hostile name (escaped, one line) and ns29..ns26.
  EXPECT_EQ(s.at("kvport_namespace_bytes{namespace=\"evil\\\"\\\\n\\\\\\\\name\"}"), 1000);
  EXPECT_EQ(s.at("kvport_namespace_bytes{namespace=\"ns29\"}"), 129);
  EXPECT_EQ(s.count("kvport_namespace_bytes{namespace=\"ns25\"}"), 0u);
  // The rest: ns0..ns25 (26 namespaces, one object each) plus the one named like the overflow.
  EXPECT_EQ(s.at("kvport_namespace_objects{namespace=\"__other__\"}"), 26 + 3);
  uint64_t rest = 5;
  for (int i = 0; i <= 25; ++i)
    rest += 100 + i;
  EXPECT_EQ(s.at("kvport_namespace_bytes{namespace=\"__other__\"}"), rest);
  EXPECT_EQ(s.at("kvport_namespaces"), 32);
}

TEST(HttpEndpoint, EveryStatsCounterHasAMetric) {
  NodeWithHttp n = NodeWithHttp::Start();
  ASSERT_TRUE(n.node);
  for (const auto& [name, value] : n.node->Stats().counters) {
    if (http::IsFamilyCounter(name)) continue;
    bool mapped = false;
    for (const http::MetricInfo& m : http::MetricCatalog())
      mapped = mapped || m.stats_counter == name;
    EXPECT_TRUE(mapped) << "STATS counter " << name
                        << " has no metric: add it to MetricCatalog (src/http/metrics.cc) and to "
                           "docs/operations.md";
  }
}

TEST(HttpEndpoint, EveryMetricIsDocumented) {
  std::ifstream in(KVPORT_SOURCE_DIR "/docs/operations.md");
  ASSERT_TRUE(in) << "docs/operations.md";
  const std::string doc((std::istreambuf_iterator<char>(in)), {});
  for (const http::MetricInfo& m : http::MetricCatalog()) {
    const std::string row = "| `" + std::string(m.name) + "` | " + std::string(m.type) + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << "docs/operations.md lacks the row " << row;
  }
}

TEST(HttpEndpoint, PromtoolAcceptsTheMetricsPage) {
  if (!HaveProgram("promtool")) {
    GTEST_SKIP() << "promtool is not installed (Debian package prometheus; scripts/bootstrap "
                    "installs it)";
  }
  NodeWithHttp n = NodeWithHttp::Start();
  ASSERT_TRUE(n.node && n.http);
  RunWorkload(*n.node, {"", "a", "b\"quoted\""}, 3);
  auto r = Get(*n.http, "/metrics");
  ASSERT_TRUE(r);
  const std::string path = ::testing::TempDir() + "kvport-metrics-" + std::to_string(::getpid());
  {
    std::ofstream out(path);
    out << r->body;
  }
  CommandRun check = RunCommand("promtool check metrics < '" + path + "'");
  std::remove(path.c_str());
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_EQ(check.output, "") << "promtool's lint findings";
}

}  // namespace
}  // namespace kvport::testing
