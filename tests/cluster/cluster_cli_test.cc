// SPDX-License-Identifier: Apache-2.0
// `kvport serve --cluster` and `kvport cluster status`, run as child processes of the built
// binary against a real etcd started by the test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/etcd_client.h"
#include "cluster/member.h"
#include "etcd_process.h"
#include "etcd_test_util.h"
#include "kvport/client.h"
#include "support/cli_run.h"
#include "support/serve_process.h"

namespace kvport {
namespace {
using kvport::testing::CliRun;
using kvport::testing::RunCli;
using kvport::testing::Slurp;

using kvport::testing::ServeProcess;

namespace fs = std::filesystem;
using kvport::testing::DeadEndpoint;
using kvport::testing::EtcdProcess;
using kvport::testing::WaitFor;
using namespace std::chrono_literals;

size_t Lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

class ClusterCliTest : public kvport::testing::SharedEtcdTest {
 protected:
  void SetUp() override {
    SharedEtcdTest::SetUp();
    if (HasFatalFailure()) return;
    dir_ = fs::temp_directory_path() /
           ("kvport-cluster-cli-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliRun Kvport(const std::string& args) {
    return RunCli(KVPORT_BINARY, "--log-level warn " + args, dir_);
  }

  fs::path dir_;
};

TEST_F(ClusterCliTest, ServeRegistersAndClusterStatusListsTheNode) {
  ServeProcess serve(KVPORT_BINARY,
                     {"serve", "--listen", "127.0.0.1:0", "--unix-socket", "", "--threads", "1",
                      "--capacity", "16MiB", "--cluster", "cli", "--etcd", etcd_->endpoint(),
                      "--node-id", "cli-node", "--lease-ttl", "5"},
                     dir_ / "serve.err");
  const std::string address = serve.WaitForLine("kvport: serving on ");
  ASSERT_FALSE(address.empty()) << Slurp(dir_ / "serve.err");
  // The start line names the cluster and the epoch.
  EXPECT_NE(Slurp(dir_ / "serve.err").find("cluster cli (epoch "), std::string::npos)
      << Slurp(dir_ / "serve.err");

  CliRun text = Kvport("cluster status --etcd " + etcd_->endpoint() + " --cluster cli");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("cluster cli: 1 node registered"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("cli-node"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(address), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("16 MiB"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" s ago"), std::string::npos) << text.out;

  CliRun json = Kvport("cluster status --json --etcd " + etcd_->endpoint() + " --cluster cli");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json parsed = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << json.out;
  ASSERT_EQ(parsed["nodes"].size(), 1u) << json.out;
  const nlohmann::json& node = parsed["nodes"][0];
  EXPECT_EQ(node["id"], "cli-node");
  EXPECT_EQ(node["address"], address);
  EXPECT_EQ(node["reachable"], true);
  EXPECT_EQ(node["capacity_bytes"], uint64_t{16} << 20);
  EXPECT_EQ(node["objects"], 0u);
  EXPECT_NE(node["epoch"], "0");
  EXPECT_TRUE(node["last_heartbeat_secs"].is_number()) << json.out;
  EXPECT_EQ(node["transports"], nlohmann::json::array({"tcp"}));

  // SIGTERM deregisters: the cluster is empty at once.
  EXPECT_EQ(serve.Terminate(), 0);
  CliRun after = Kvport("cluster status --etcd " + etcd_->endpoint() + " --cluster cli");
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_NE(after.out.find("cluster cli: 0 nodes registered"), std::string::npos) << after.out;
}

TEST_F(ClusterCliTest, ANodeThatDoesNotAnswerIsListedAsUnreachable) {
  auto etcd = cluster::EtcdClient::Open({etcd_->endpoint()}, 3s);
  ASSERT_TRUE(etcd.ok());
  cluster::Member ghost;
  ghost.id = "ghost";
  ghost.address = DeadEndpoint();
  ghost.epoch = 42;
  ghost.capacity_bytes = 1 << 20;
  ghost.protocol_version = 4;
  ghost.transports = {"tcp"};
  ASSERT_TRUE(
      (*etcd)->Put(cluster::EtcdNodeKey("ghosts", "ghost"), cluster::EncodeMember(ghost)).ok());
  CliRun run =
      Kvport("cluster status --timeout 2 --etcd " + etcd_->endpoint() + " --cluster ghosts");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("ghost"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("unreachable: "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(ghost.address), std::string::npos) << run.out;
}

TEST_F(ClusterCliTest, EtcdUnreachableIsOneLineAndANonZeroExit) {
  const std::string dead = DeadEndpoint();
  CliRun status = Kvport("cluster status --etcd " + dead + " --cluster c");
  EXPECT_NE(status.exit_code, 0);
  EXPECT_EQ(Lines(status.err), 1u) << status.err;
  EXPECT_NE(status.err.find(dead), std::string::npos) << status.err;
  EXPECT_TRUE(status.out.empty()) << status.out;

  ServeProcess serve(KVPORT_BINARY,
                     {"serve", "--listen", "127.0.0.1:0", "--unix-socket", "", "--threads", "1",
                      "--capacity", "16MiB", "--cluster", "c", "--etcd", dead},
                     dir_ / "serve.err");
  EXPECT_EQ(serve.WaitExit(), 1);
  const std::string err = Slurp(dir_ / "serve.err");
  EXPECT_NE(err.find("kvport: "), std::string::npos) << err;
  EXPECT_NE(err.find(dead), std::string::npos) << err;
  EXPECT_NE(err.find("'c'"), std::string::npos) << err;
}

// kill -9 of a node process: a client's reads of its keys are misses at once (one failed
// attempt), every other key still hits, writes keep succeeding, a client with two replicas
// reads everything, and the node leaves the membership when its lease lapses.
TEST_F(ClusterCliTest, AKilledNodesKeysAreMissesAndReplicasKeepEveryKey) {
  std::vector<std::unique_ptr<ServeProcess>> nodes;
  for (const char* id : {"k1", "k2", "k3"}) {
    nodes.push_back(std::make_unique<ServeProcess>(
        KVPORT_BINARY,
        std::vector<std::string>{"serve", "--listen", "127.0.0.1:0", "--unix-socket", "",
                                 "--threads", "1", "--capacity", "16MiB", "--cluster", "kill",
                                 "--etcd", etcd_->endpoint(), "--node-id", id, "--lease-ttl", "1"},
        dir_ / (std::string(id) + ".err")));
    ASSERT_FALSE(nodes.back()->WaitForLine("kvport: serving on ").empty())
        << Slurp(dir_ / (std::string(id) + ".err"));
  }
  InitOptions init;
  init.transport_type = 1;
  init.connect_timeout = 1s;
  const std::string url = "etcd:" + etcd_->endpoint() + "/kill";
  Client one, two;
  ASSERT_TRUE(one.Init("kill-test", url, init).ok());
  ASSERT_TRUE(two.Init("kill-test-r2", url + "?replicas=2", init).ok());
  auto nodes_seen = [&](Client& c) {
    Result<std::vector<NodeReport>> r = c.StatsPerNode();
    return r.ok() ? r->size() : 0;
  };
  ASSERT_TRUE(WaitFor([&] { return nodes_seen(one) == 3 && nodes_seen(two) == 3; }));

  auto keys_of = [](const std::string& prefix, int n) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i)
      keys.push_back(prefix + std::to_string(i));
    return keys;
  };
  auto put = [&](Client& c, const std::vector<std::string>& keys) {
    IOBuffers buffers;
    for (const std::string& k : keys)
      buffers.Append(k.data(), k.size());
    Result<BatchResult> r = c.MSet(keys, buffers);
    return r.ok() && r->status == BatchCode::kSuccess;
  };
  auto hits = [&](Client& c, const std::vector<std::string>& keys) {
    std::vector<std::string> space(keys.size(), std::string(32, '\0'));
    IOBuffers buffers;
    for (std::string& s : space)
      buffers.Append(s.data(), s.size());
    Result<GetResult> r = c.MGet(keys, {}, buffers);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    int n = 0;
    for (size_t i = 0; r.ok() && i < keys.size(); ++i) {
      if (r->codes[i] == KeyCode::kSuccess) {
        EXPECT_EQ(space[i].substr(0, keys[i].size()), keys[i]);
        ++n;
      } else {
        EXPECT_EQ(r->codes[i], KeyCode::kKeyNotExist) << r->error.ToString();
      }
    }
    return n;
  };
  const std::vector<std::string> single = keys_of("s", 300), replicated = keys_of("r", 300);
  ASSERT_TRUE(put(one, single));
  ASSERT_TRUE(put(two, replicated));
  Result<std::vector<NodeReport>> before = one.StatsPerNode();
  ASSERT_TRUE(before.ok());
  ASSERT_EQ((*before)[1].id, "k2");
  // What k2 holds of the single copies: exactly those become misses.
  Client k2;
  ASSERT_TRUE(k2.Init("k2", (*before)[1].address, init).ok());
  Result<BatchResult> on_k2 = k2.MExist(single);
  ASSERT_TRUE(on_k2.ok());
  const int single_on_k2 =
      static_cast<int>(std::count(on_k2->codes.begin(), on_k2->codes.end(), KeyCode::kSuccess));
  ASSERT_GT(single_on_k2, 0);

  nodes[1]->Kill();
  EXPECT_EQ(hits(one, single), 300 - single_on_k2);
  EXPECT_EQ(hits(two, replicated), 300);
  const std::vector<std::string> fresh = keys_of("f", 200);
  EXPECT_TRUE(put(one, fresh));
  EXPECT_EQ(hits(one, fresh), 200);
  // Its lease lapses (1 s): the clients stop listing it.
  ASSERT_TRUE(WaitFor([&] { return nodes_seen(one) == 2 && nodes_seen(two) == 2; }));
  EXPECT_EQ(hits(two, replicated), 300);
}

}  // namespace
}  // namespace kvport
