// SPDX-License-Identifier: Apache-2.0
// `kvport bench --url etcd:HOST:PORT/CLUSTER`: the bench against a cluster whose membership is
// in a real etcd (started by the test), three in-process nodes registered in it.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/bench_report.h"
#include "bench/bench_run.h"
#include "etcd_process.h"
#include "kvport/server.h"

namespace kvport::bench {
namespace {

using kvport::testing::EtcdProcess;

TEST(BenchClusterTest, RunsAgainstAnEtcdClusterAndNamesItsNodes) {
  Result<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start();
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  std::vector<std::unique_ptr<Server>> servers;
  for (int i = 0; i < 3; ++i) {
    ServerOptions so;
    so.capacity_bytes = 32 << 20;
    so.threads = 1;
    so.cluster = "bench";
    so.etcd = {(*etcd)->endpoint()};
    so.node_id = "n" + std::to_string(i);
    Result<std::unique_ptr<Server>> server = Server::Start(so);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    servers.push_back(std::move(server).value());
  }
  BenchOptions o;
  o.url = "etcd:" + (*etcd)->endpoint() + "/bench";
  o.value_bytes = 16 << 10;
  o.batch = 16;  // 32 keys over 3 nodes
  o.count = 4;
  o.max_seconds = 120;  // bounded by count; the time limit is only a safety net
  o.exists_batch = 64;
  o.exists_count = 4;
  o.warmup_bytes = 1 << 20;
  o.socket_baseline = false;
  o.redis_baseline = false;
  Result<BenchReport> r = RunBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->kvport.size(), 3u);
  for (const PhaseResult& p : r->kvport) {
    EXPECT_TRUE(p.error.empty()) << p.error;
    EXPECT_EQ(p.failed_keys, 0u);
  }
  EXPECT_TRUE(r->AllPassed());
  EXPECT_NE(r->node.find(o.url), std::string::npos) << r->node;
  EXPECT_NE(r->node.find("a cluster of 3 nodes"), std::string::npos) << r->node;
  for (const auto& server : servers)
    EXPECT_NE(r->node.find(server->address()), std::string::npos) << r->node;
  uint64_t objects = 0;
  for (const auto& server : servers)
    objects += server->Stats().Get("objects");
  EXPECT_EQ(objects, 2 * o.batch);  // 2 threads' keys, each on one node
  EXPECT_NE(FormatBenchText(*r).find("a cluster of 3 nodes"), std::string::npos);
  for (auto& server : servers)
    server->Stop();
}

}  // namespace
}  // namespace kvport::bench
