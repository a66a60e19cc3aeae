// SPDX-License-Identifier: Apache-2.0
// Clients of a cluster whose membership is in a real etcd (etcd:HOST:PORT/CLUSTER): nodes are
// in-process kvport::Server instances that register themselves; the client watches them come,
// go, restart and come back from a partition, and rides out an etcd restart.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "etcd_process.h"
#include "etcd_test_util.h"
#include "kvport/client.h"
#include "kvport/server.h"
#include "net/tls.h"

namespace kvport {
namespace {

using kvport::testing::EtcdProcess;
using kvport::testing::WaitFor;
using namespace std::chrono_literals;

ServerOptions MemberOptions(const std::string& cluster, const std::string& etcd,
                            const std::string& id, uint64_t capacity = 16 << 20) {
  ServerOptions o;
  o.capacity_bytes = capacity;
  o.threads = 1;
  o.unix_socket = "";
  o.shutdown_grace = 2s;
  o.cluster = cluster;
  o.etcd = {etcd};
  o.node_id = id;
  o.lease_ttl_secs = 1;
  return o;
}

std::unique_ptr<Server> StartMember(const ServerOptions& options) {
  Result<std::unique_ptr<Server>> server = Server::Start(options);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

std::string Key(const std::string& prefix, int i) {
  return prefix + std::to_string(i);
}

// Puts keys prefix0..prefix{n-1} with 64-byte values naming the key; all must succeed.
void PutAll(Client& client, const std::string& prefix, int n) {
  std::vector<std::string> keys;
  std::vector<std::string> values;
  for (int i = 0; i < n; ++i) {
    keys.push_back(Key(prefix, i));
    values.push_back(keys.back() + std::string(64 - keys.back().size(), '.'));
  }
  IOBuffers buffers;
  for (const std::string& v : values)
    buffers.Append(v.data(), v.size());
  Result<BatchResult> put = client.MSet(keys, buffers);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->status, BatchCode::kSuccess) << put->error.ToString();
}

// Per key: hit (with the right bytes: a hit with other bytes fails the test) or miss.
std::vector<bool> GetAll(Client& client, const std::string& prefix, int n) {
  std::vector<std::string> keys;
  std::vector<std::string> space(n, std::string(64, '\0'));
  IOBuffers buffers;
  for (int i = 0; i < n; ++i)
    keys.push_back(Key(prefix, i));
  for (std::string& s : space)
    buffers.Append(s.data(), s.size());
  Result<GetResult> got = client.MGet(keys, {}, buffers);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  std::vector<bool> hits(n, false);
  for (int i = 0; got.ok() && i < n; ++i) {
    if (got->codes[i] == KeyCode::kSuccess) {
      EXPECT_EQ(space[i].substr(0, keys[i].size()), keys[i]);
      hits[i] = true;
    } else {
      EXPECT_EQ(got->codes[i], KeyCode::kKeyNotExist) << got->error.ToString();
    }
  }
  return hits;
}

int Count(const std::vector<bool>& hits) {
  return static_cast<int>(std::count(hits.begin(), hits.end(), true));
}

// The objects each node the client sees holds, by node id.
std::vector<std::pair<std::string, uint64_t>> ObjectsPerNode(Client& client) {
  std::vector<std::pair<std::string, uint64_t>> out;
  Result<std::vector<NodeReport>> reports = client.StatsPerNode();
  if (!reports.ok()) return out;
  for (const NodeReport& r : *reports)
    out.emplace_back(r.id, r.status.ok() ? r.stats.Get("objects") : 0);
  return out;
}

size_t NodesSeen(Client& client) {
  Result<std::vector<NodeReport>> reports = client.StatsPerNode();
  return reports.ok() ? reports->size() : 0;
}

class ClusterClientEtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = EtcdProcess::Start();
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    etcd_ = std::move(started).value();
  }
  Status Connect(Client& client, const std::string& cluster, const std::string& options = "") {
    InitOptions init;
    init.transport_type = 1;
    init.connect_timeout = 1s;
    init.timeout = 5s;
    return client.Init("etcd-test", "eic://etcd:" + etcd_->endpoint() + "/" + cluster + options,
                       init);
  }
  std::unique_ptr<EtcdProcess> etcd_;
};

TEST_F(ClusterClientEtcdTest, KeysSpreadByCapacityAndNodesComeAndGo) {
  std::vector<std::unique_ptr<Server>> nodes;
  // Capacities 1:2:1: the middle node should get about half the keys.
  nodes.push_back(StartMember(MemberOptions("spread", etcd_->endpoint(), "a", 16 << 20)));
  nodes.push_back(StartMember(MemberOptions("spread", etcd_->endpoint(), "b", 32 << 20)));
  nodes.push_back(StartMember(MemberOptions("spread", etcd_->endpoint(), "c", 16 << 20)));
  for (const auto& n : nodes)
    ASSERT_NE(n, nullptr);
  Client client;
  ASSERT_TRUE(Connect(client, "spread").ok());
  EXPECT_TRUE(client.is_cluster());
  ASSERT_EQ(NodesSeen(client), 3u);

  constexpr int kKeys = 3000;
  PutAll(client, "k", kKeys);
  const auto objects = ObjectsPerNode(client);
  ASSERT_EQ(objects.size(), 3u);
  // Within 0.04 of the weights' shares (the binomial's standard deviation here is about 0.009).
  EXPECT_EQ(objects[0].first, "a");
  EXPECT_NEAR(objects[0].second / double(kKeys), 0.25, 0.04);
  EXPECT_NEAR(objects[1].second / double(kKeys), 0.50, 0.04);
  EXPECT_NEAR(objects[2].second / double(kKeys), 0.25, 0.04);
  EXPECT_EQ(Count(GetAll(client, "k", kKeys)), kKeys);

  // A fourth node joins: the client starts using it (new keys reach it); old keys whose first
  // choice moved to it read as misses, about its share (16 of 80 MiB: 0.2).
  nodes.push_back(StartMember(MemberOptions("spread", etcd_->endpoint(), "d", 16 << 20)));
  ASSERT_TRUE(WaitFor([&] { return NodesSeen(client) == 4; }));
  PutAll(client, "new", 400);
  const auto with_d = ObjectsPerNode(client);
  ASSERT_EQ(with_d.size(), 4u);
  EXPECT_EQ(with_d[3].first, "d");
  EXPECT_GT(with_d[3].second, 0u);
  const int old_hits = Count(GetAll(client, "k", kKeys));
  EXPECT_NEAR((kKeys - old_hits) / double(kKeys), 0.2, 0.04);

  // A node that stops cleanly deregisters: the client drops it, its keys are misses, every
  // other key still hits, and writes keep succeeding.
  nodes[1]->Stop();
  ASSERT_TRUE(WaitFor([&] { return NodesSeen(client) == 3; }));
  const int after_leave = Count(GetAll(client, "new", 400));
  EXPECT_GT(after_leave, 0);
  EXPECT_LT(after_leave, 400);
  PutAll(client, "later", 200);
  EXPECT_EQ(Count(GetAll(client, "later", 200)), 200);
}

TEST_F(ClusterClientEtcdTest, TwoReplicasKeepEveryKeyReadableWhenANodeGoes) {
  std::vector<std::unique_ptr<Server>> nodes;
  for (const char* id : {"r1", "r2", "r3"})
    nodes.push_back(StartMember(MemberOptions("replicas", etcd_->endpoint(), id)));
  Client client;
  ASSERT_TRUE(Connect(client, "replicas", "?replicas=2").ok());
  PutAll(client, "k", 300);
  nodes[0]->Stop();
  EXPECT_EQ(Count(GetAll(client, "k", 300)), 300);  // before or after the client saw it go
  ASSERT_TRUE(WaitFor([&] { return NodesSeen(client) == 2; }));
  EXPECT_EQ(Count(GetAll(client, "k", 300)), 300);
}

// on_lease_loss: drop.
TEST_F(ClusterClientEtcdTest, APartitionedNodeIsDroppedAndComesBackAsANewEmptyNode) {
  std::vector<std::unique_ptr<Server>> nodes;
  for (const char* id : {"p1", "p2", "p3"}) {
    ServerOptions options = MemberOptions("partition", etcd_->endpoint(), id);
    options.on_lease_loss = ServerOptions::LeaseLoss::kDrop;
    nodes.push_back(StartMember(options));
  }
  Client client;
  ASSERT_TRUE(Connect(client, "partition").ok());
  PutAll(client, "k", 300);
  const uint64_t old_epoch = nodes[1]->epoch();
  const uint64_t on_p2 = ObjectsPerNode(client)[1].second;
  ASSERT_GT(on_p2, 0u);

  // p2 stops renewing its lease (as if cut off from etcd): its lease lapses, the client drops it.
  nodes[1]->PauseClusterKeepAliveForTesting(true);
  ASSERT_TRUE(WaitFor([&] { return NodesSeen(client) == 2; }));
  // It returns: a new epoch, and empty (it cannot know what was written elsewhere meanwhile),
  // so its old keys are misses, never stale values.
  nodes[1]->PauseClusterKeepAliveForTesting(false);
  ASSERT_TRUE(WaitFor([&] { return NodesSeen(client) == 3; }));
  EXPECT_NE(nodes[1]->epoch(), old_epoch);
  Result<std::vector<NodeReport>> reports = client.StatsPerNode();
  ASSERT_TRUE(reports.ok());
  EXPECT_EQ((*reports)[1].epoch, nodes[1]->epoch());
  EXPECT_EQ((*reports)[1].stats.Get("objects"), 0u);
  EXPECT_EQ(Count(GetAll(client, "k", 300)), 300 - static_cast<int>(on_p2));
}

// on_lease_loss: keep (the default): the node comes back with a new epoch and what it held,
// so once the client places keys on it again every key is a hit.
TEST_F(ClusterClientEtcdTest, APartitionedNodeComesBackWithItsKeysByDefault) {
  std::vector<std::unique_ptr<Server>> nodes;
  for (const char* id : {"q1", "q2", "q3"})
    nodes.push_back(StartMember(MemberOptions("partition-keep", etcd_->endpoint(), id)));
  Client client;
  ASSERT_TRUE(Connect(client, "partition-keep").ok());
  PutAll(client, "k", 300);
  const uint64_t old_epoch = nodes[1]->epoch();
  const uint64_t on_q2 = ObjectsPerNode(client)[1].second;
  ASSERT_GT(on_q2, 0u);

  nodes[1]->PauseClusterKeepAliveForTesting(true);
  ASSERT_TRUE(WaitFor([&] { return NodesSeen(client) == 2; }));
  EXPECT_EQ(Count(GetAll(client, "k", 300)), 300 - static_cast<int>(on_q2));  // placed away
  nodes[1]->PauseClusterKeepAliveForTesting(false);
  ASSERT_TRUE(WaitFor([&] { return NodesSeen(client) == 3; }));
  EXPECT_NE(nodes[1]->epoch(), old_epoch);
  Result<std::vector<NodeReport>> reports = client.StatsPerNode();
  ASSERT_TRUE(reports.ok());
  EXPECT_EQ((*reports)[1].epoch, nodes[1]->epoch());
  EXPECT_EQ((*reports)[1].stats.Get("objects"), on_q2);
  EXPECT_EQ(Count(GetAll(client, "k", 300)), 300);
}

TEST_F(ClusterClientEtcdTest, NodesAndClientsRideOutAnEtcdRestart) {
  std::vector<std::unique_ptr<Server>> nodes;
  for (const char* id : {"e1", "e2"})
    nodes.push_back(StartMember(MemberOptions("restart", etcd_->endpoint(), id)));
  Client client;
  ASSERT_TRUE(Connect(client, "restart").ok());
  PutAll(client, "k", 100);
  ASSERT_TRUE(etcd_->Stop().ok());
  // etcd is down: the client keeps its last membership and every call goes on.
  EXPECT_EQ(Count(GetAll(client, "k", 100)), 100);
  PutAll(client, "during", 50);
  ASSERT_TRUE(etcd_->Restart().ok());
  // etcd is back: nothing was lost, and a node that joins now is seen.
  EXPECT_EQ(Count(GetAll(client, "during", 50)), 50);
  nodes.push_back(StartMember(MemberOptions("restart", etcd_->endpoint(), "e3")));
  ASSERT_NE(nodes.back(), nullptr);
  ASSERT_TRUE(WaitFor([&] { return NodesSeen(client) == 3; }));
  PutAll(client, "after", 100);
  EXPECT_GT(ObjectsPerNode(client)[2].second, 0u);
}

TEST_F(ClusterClientEtcdTest, InitWithEtcdDownOrAnEmptyCluster) {
  Client empty;
  ASSERT_TRUE(Connect(empty, "nobody").ok());  // nodes may register later
  EXPECT_EQ(empty.Ping().code(), StatusCode::kUnavailable);
  std::vector<std::string> keys = {"k"};
  EXPECT_EQ(empty.MExist(keys).status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(etcd_->Stop().ok());
  Client down;
  Status s = Connect(down, "nobody");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find(etcd_->endpoint()), std::string::npos) << s.ToString();
}

// A client that follows an etcd serving TLS with client certificates (as its nodes do) takes the
// etcd TLS settings from the environment variables a node's config takes them from.
TEST(ClusterClientEtcdTlsTest, AClientFollowsATlsEtcdWithSettingsFromTheEnvironment) {
  char tmpl[] = "/tmp/kvport-etcd-tls-client-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_TRUE(net::WriteTestCertificates(dir, {}).ok());
  testing::EtcdProcessOptions etcd_options;
  etcd_options.tls_dir = dir;
  etcd_options.client_cert_auth = true;
  auto etcd = EtcdProcess::Start(etcd_options);
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  ServerOptions member = MemberOptions("tls", (*etcd)->url(), "a");
  member.etcd_tls_ca_file = dir + "/ca.pem";
  member.etcd_tls_cert_file = dir + "/client.pem";
  member.etcd_tls_key_file = dir + "/client.key";
  std::unique_ptr<Server> node = StartMember(member);
  ASSERT_NE(node, nullptr);

  InitOptions init;
  init.transport_type = 1;
  init.connect_timeout = 2s;
  const std::string endpoint = "eic://etcd:" + (*etcd)->endpoint() + "/tls";
  Client plain;
  EXPECT_FALSE(plain.Init("etcd-plain", endpoint, init).ok());

  ::setenv("KVPORT_ETCD_TLS_CA_FILE", (dir + "/ca.pem").c_str(), 1);
  ::setenv("KVPORT_ETCD_TLS_CERT_FILE", (dir + "/client.pem").c_str(), 1);
  ::setenv("KVPORT_ETCD_TLS_KEY_FILE", (dir + "/client.key").c_str(), 1);
  Client client;
  Status connected = client.Init("etcd-tls", endpoint, init);
  ::unsetenv("KVPORT_ETCD_TLS_CA_FILE");
  ::unsetenv("KVPORT_ETCD_TLS_CERT_FILE");
  ::unsetenv("KVPORT_ETCD_TLS_KEY_FILE");
  ASSERT_TRUE(connected.ok()) << connected.ToString();
  EXPECT_TRUE(WaitFor([&] { return NodesSeen(client) == 1; }));
  PutAll(client, "tls", 8);
  std::vector<char> back(64);
  IOBuffers get;
  get.Append(back.data(), back.size());
  Result<GetResult> got = client.MGet({"tls3"}, GetOptions{}, get);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, BatchCode::kSuccess);
  EXPECT_EQ(std::string(back.data(), 4), "tls3");
  node.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvport
