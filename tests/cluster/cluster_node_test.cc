// SPDX-License-Identifier: Apache-2.0
// In-process kvport::Server nodes in a cluster, against a real etcd started by the test: what
// a node writes to etcd, when it goes, and what etcd failures do to it (docs/cluster.md).
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cluster/etcd_client.h"
#include "cluster/member.h"
#include "etcd_process.h"
#include "etcd_test_util.h"
#include "kvport/client.h"
#include "kvport/server.h"
#include "protocol/frame.h"
#include "tcp_proxy.h"

namespace kvport {
namespace {

using cluster::EtcdClient;
using cluster::EtcdKeyValue;
using cluster::Member;
using kvport::testing::DeadEndpoint;
using kvport::testing::EtcdProcess;
using kvport::testing::WaitFor;
using namespace std::chrono_literals;

ServerOptions NodeOptions(const std::string& cluster, const std::string& etcd) {
  ServerOptions o;
  o.capacity_bytes = 8 << 20;
  o.max_value_bytes = 1 << 20;
  o.threads = 1;
  o.unix_socket = "";
  o.shutdown_grace = 2s;
  o.cluster = cluster;
  o.etcd = {etcd};
  return o;
}

// The node's record as etcd holds it now.
std::optional<EtcdKeyValue> RecordOf(EtcdClient& etcd, const std::string& cluster,
                                     const std::string& id) {
  Result<cluster::EtcdRange> range = etcd.RangePrefix(cluster::EtcdNodesPrefix(cluster));
  if (!range.ok()) return std::nullopt;
  for (const EtcdKeyValue& kv : range->kvs) {
    if (kv.key == cluster::EtcdNodeKey(cluster, id)) return kv;
  }
  return std::nullopt;
}

uint64_t EpochIn(const EtcdKeyValue& kv) {
  Result<Member> m = cluster::DecodeMember(kv.value);
  return m.ok() ? m->epoch : 0;
}

// A one-node client: put and get of short strings.
class NodeClient {
 public:
  Status Init(const std::string& address) {
    InitOptions init;
    init.transport_type = 1;
    init.connections = 1;
    init.timeout = 5s;
    return client_.Init("cluster-node-test", address, init);
  }
  bool Put(const std::string& key, const std::string& value) {
    IOBuffers buffers;
    buffers.Append(value.data(), value.size());
    Result<BatchResult> r = client_.MSet({key}, buffers);
    return r.ok() && r->status == BatchCode::kSuccess;
  }
  // The value, or nullopt for a miss (or an error).
  std::optional<std::string> Get(const std::string& key) {
    std::string out(64, '\0');
    IOBuffers buffers;
    buffers.Append(out.data(), out.size());
    Result<GetResult> r = client_.MGet({key}, GetOptions{}, buffers);
    if (!r.ok() || r->codes.empty() || r->codes[0] != KeyCode::kSuccess) return std::nullopt;
    out.resize(r->value_sizes[0]);
    return out;
  }

 private:
  Client client_;
};

// One etcd for the suite; each test uses a cluster name of its own.
class ClusterNodeTest : public kvport::testing::SharedEtcdTest {
 protected:
  void SetUp() override {
    SharedEtcdTest::SetUp();
    if (HasFatalFailure()) return;
    auto opened = EtcdClient::Open({etcd_->endpoint()}, 3s);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    client_ = std::move(opened).value();
  }

  std::unique_ptr<EtcdClient> client_;
};

TEST_F(ClusterNodeTest, RegistersItsRecordWithTheRightFields) {
  ServerOptions o = NodeOptions("fields", etcd_->endpoint());
  o.node_id = "node-1";
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::optional<EtcdKeyValue> kv = RecordOf(*client_, "fields", "node-1");
  ASSERT_TRUE(kv.has_value());
  EXPECT_NE(kv->lease, 0);  // attached to a lease: it goes when the node does
  Result<Member> m = cluster::DecodeMember(kv->value);
  ASSERT_TRUE(m.ok()) << m.status().ToString() << ": " << kv->value;
  EXPECT_EQ(m->id, "node-1");
  EXPECT_EQ(m->address, (*server)->address());
  EXPECT_NE(m->epoch, 0u);
  EXPECT_EQ(m->epoch, (*server)->epoch());
  EXPECT_EQ(m->capacity_bytes, (*server)->Stats().Get("capacity_bytes"));
  EXPECT_EQ(m->protocol_version, protocol::kMaxProtocolVersion);
  EXPECT_EQ(m->transports, (std::vector<std::string>{"tcp"}));
  EXPECT_GT(m->started_unix_ms, 0);
  EXPECT_EQ((*server)->Stats().Get("cluster_registered"), 1u);
  EXPECT_EQ((*server)->Stats().Get("cluster_reregistrations"), 0u);
  Result<cluster::EtcdLeaseTtl> ttl = client_->TimeToLive(kv->lease);
  ASSERT_TRUE(ttl.ok());
  EXPECT_EQ(ttl->granted_ttl_seconds, 10);  // lease_ttl_secs' default
}

TEST_F(ClusterNodeTest, IdDefaultsToTheAddressAndSharedMemoryIsATransport) {
  ServerOptions o = NodeOptions("defaults", etcd_->endpoint());
  o.unix_socket = "auto";
  o.lease_ttl_secs = 7;
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::optional<EtcdKeyValue> kv = RecordOf(*client_, "defaults", (*server)->address());
  ASSERT_TRUE(kv.has_value());
  Result<Member> m = cluster::DecodeMember(kv->value);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->id, (*server)->address());
  EXPECT_EQ(m->transports, (std::vector<std::string>{"tcp", "shm"}));
  EXPECT_EQ(client_->TimeToLive(kv->lease)->granted_ttl_seconds, 7);
  // Every start is a new epoch.
  const uint64_t first = (*server)->epoch();
  (*server)->Stop();
  auto again = Server::Start(NodeOptions("defaults", etcd_->endpoint()));
  ASSERT_TRUE(again.ok());
  EXPECT_NE((*again)->epoch(), first);
  EXPECT_NE((*again)->epoch(), 0u);
}

TEST_F(ClusterNodeTest, ACleanStopRemovesTheRecordAtOnce) {
  ServerOptions o = NodeOptions("stop", etcd_->endpoint());
  o.node_id = "leaving";
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE(RecordOf(*client_, "stop", "leaving").has_value());
  (*server)->Stop();
  // At once: the lease was revoked, not left to lapse (its TTL is 10 s).
  EXPECT_FALSE(RecordOf(*client_, "stop", "leaving").has_value());
  EXPECT_EQ((*server)->Stats().Get("cluster_registered"), 0u);
}

TEST_F(ClusterNodeTest, EtcdUnreachableAtStartFailsNamingItAndTheCluster) {
  const std::string dead = DeadEndpoint();
  auto server = Server::Start(NodeOptions("nowhere", dead));
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kUnavailable) << server.status().ToString();
  EXPECT_NE(server.status().message().find(dead), std::string::npos) << server.status().ToString();
  EXPECT_NE(server.status().message().find("nowhere"), std::string::npos)
      << server.status().ToString();
}

TEST_F(ClusterNodeTest, AStandaloneNodeHasNoEpoch) {
  ServerOptions o = NodeOptions("", "");
  o.etcd.clear();
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ((*server)->epoch(), 0u);
  EXPECT_EQ((*server)->Stats().Get("cluster_registered"), 0u);
}

TEST_F(ClusterNodeTest, BadClusterOptionsAreRefused) {
  // A wildcard bind says nothing clients could connect to.
  ServerOptions wildcard = NodeOptions("wild", etcd_->endpoint());
  wildcard.listen = "0.0.0.0:0";
  wildcard.insecure = true;
  auto refused = Server::Start(wildcard);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("advertise"), std::string::npos)
      << refused.status().ToString();
  EXPECT_FALSE(RecordOf(*client_, "wild", "").has_value());

  // With an advertise address it registers that.
  wildcard.advertise = "127.0.0.1:17470";
  auto advertised = Server::Start(wildcard);
  ASSERT_TRUE(advertised.ok()) << advertised.status().ToString();
  std::optional<EtcdKeyValue> kv = RecordOf(*client_, "wild", "127.0.0.1:17470");
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(cluster::DecodeMember(kv->value)->address, "127.0.0.1:17470");
  (*advertised)->Stop();

  ServerOptions no_etcd = NodeOptions("c", etcd_->endpoint());
  no_etcd.etcd.clear();
  EXPECT_EQ(Server::Start(no_etcd).status().code(), StatusCode::kInvalidArgument);
  ServerOptions ttl = NodeOptions("c", etcd_->endpoint());
  ttl.lease_ttl_secs = 0;
  EXPECT_EQ(Server::Start(ttl).status().code(), StatusCode::kInvalidArgument);
  ServerOptions slash = NodeOptions("a/b", etcd_->endpoint());
  EXPECT_EQ(Server::Start(slash).status().code(), StatusCode::kInvalidArgument);
  ServerOptions wildcard_advertise = NodeOptions("c", etcd_->endpoint());
  wildcard_advertise.advertise = "0.0.0.0:7470";
  EXPECT_EQ(Server::Start(wildcard_advertise).status().code(), StatusCode::kInvalidArgument);
}

// A node cut off from etcd (a proxy between them drops every connection) past its lease, then
// healed: it registers again with one new epoch and, by default (on_lease_loss: keep), keeps
// what it stores: its keys are still hits. Before: it dropped its whole store, and again
// before every failed attempt to register.
TEST_F(ClusterNodeTest, APartitionPastTheLeaseKeepsTheStoreByDefault) {
  testing::TcpProxy proxy(etcd_->port());
  ServerOptions o = NodeOptions("keep", proxy.endpoint());
  o.node_id = "kept";
  o.lease_ttl_secs = 2;  // etcd calls time out after a third of it: two hops under sanitizers
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const uint64_t old_epoch = (*server)->epoch();
  NodeClient node;
  ASSERT_TRUE(node.Init((*server)->address()).ok());
  ASSERT_TRUE(node.Put("k", "kept bytes"));

  proxy.Cut();
  ASSERT_TRUE(WaitFor([&] { return !RecordOf(*client_, "keep", "kept").has_value(); }))
      << "the lease did not lapse";
  ASSERT_TRUE(WaitFor([&] { return (*server)->Stats().Get("cluster_etcd_failures") > 0; }));
  EXPECT_EQ(node.Get("k"), "kept bytes");  // serving all along
  proxy.Heal();

  std::optional<EtcdKeyValue> back;
  ASSERT_TRUE(WaitFor([&] {
    back = RecordOf(*client_, "keep", "kept");
    return back.has_value() && (*server)->Stats().Get("cluster_registered") == 1;
  })) << "the node did not register again";
  EXPECT_NE(EpochIn(*back), old_epoch);
  EXPECT_EQ((*server)->epoch(), EpochIn(*back));
  EXPECT_EQ((*server)->Stats().Get("cluster_reregistrations"), 1u);
  EXPECT_EQ(node.Get("k"), "kept bytes");
  EXPECT_EQ((*server)->Stats().Get("objects"), 1u);
}

// on_lease_loss: drop. A node partitioned away (by stopping its keepalive) is dropped and
// rejoins with a new epoch: its old objects are gone when it is back (for keys that are
// overwritten, a client that wrote the key elsewhere meanwhile must never read the old bytes
// here).
TEST_F(ClusterNodeTest, APartitionedNodeIsDroppedAndRejoinsEmptyWithANewEpoch) {
  ServerOptions o = NodeOptions("partition", etcd_->endpoint());
  o.node_id = "island";
  o.lease_ttl_secs = 1;
  o.on_lease_loss = ServerOptions::LeaseLoss::kDrop;
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const uint64_t old_epoch = (*server)->epoch();
  NodeClient node;
  ASSERT_TRUE(node.Init((*server)->address()).ok());
  ASSERT_TRUE(node.Put("k", "old bytes"));
  ASSERT_EQ(node.Get("k"), "old bytes");

  (*server)->PauseClusterKeepAliveForTesting(true);
  ASSERT_TRUE(WaitFor([&] { return !RecordOf(*client_, "partition", "island").has_value(); }))
      << "the lease did not lapse";
  (*server)->PauseClusterKeepAliveForTesting(false);

  // The record is in etcd a moment before the node counts itself registered: wait for both.
  std::optional<EtcdKeyValue> back;
  ASSERT_TRUE(WaitFor([&] {
    back = RecordOf(*client_, "partition", "island");
    return back.has_value() && (*server)->Stats().Get("cluster_registered") == 1;
  })) << "the node did not register again";
  const uint64_t new_epoch = EpochIn(*back);
  EXPECT_NE(new_epoch, old_epoch);
  EXPECT_NE(new_epoch, 0u);
  EXPECT_EQ((*server)->epoch(), new_epoch);
  EXPECT_EQ(node.Get("k"), std::nullopt);  // a miss, never the old bytes
  EXPECT_EQ((*server)->Stats().Get("objects"), 0u);
  EXPECT_EQ((*server)->Stats().Get("cluster_reregistrations"), 1u);
  EXPECT_EQ((*server)->Stats().Get("cluster_registered"), 1u);
  // And it serves as a new, empty node.
  ASSERT_TRUE(node.Put("k", "new bytes"));
  EXPECT_EQ(node.Get("k"), "new bytes");
}

// A node with a disk tier restarted on another port: the same member (its name kept in the disk
// folder), serving what it held; under on_lease_loss: drop it starts empty instead.
TEST_F(ClusterNodeTest, ANodeWithADiskRestartsUnderItsNameWithItsKeys) {
  const std::string dir =
      ::testing::TempDir() + "kvport-cluster-disk-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ServerOptions o = NodeOptions("disk", etcd_->endpoint());
  o.disk_dir = dir;
  o.disk_capacity = 16 << 20;
  std::string first_id;
  {
    auto server = Server::Start(o);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    first_id = (*server)->address();  // no node_id: the first address is the name
    ASSERT_TRUE(RecordOf(*client_, "disk", first_id).has_value());
    NodeClient node;
    ASSERT_TRUE(node.Init((*server)->address()).ok());
    ASSERT_TRUE(node.Put("k", "kept bytes"));
  }  // a clean stop: the object goes to disk
  {
    auto server = Server::Start(o);  // port 0: another port
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    ASSERT_NE((*server)->address(), first_id);
    std::optional<EtcdKeyValue> kv = RecordOf(*client_, "disk", first_id);
    ASSERT_TRUE(kv.has_value()) << "registered under its first name";
    EXPECT_EQ(cluster::DecodeMember(kv->value)->address, (*server)->address());
    NodeClient node;
    ASSERT_TRUE(node.Init((*server)->address()).ok());
    EXPECT_EQ(node.Get("k"), "kept bytes");
  }
  o.on_lease_loss = ServerOptions::LeaseLoss::kDrop;
  {
    auto server = Server::Start(o);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    NodeClient node;
    ASSERT_TRUE(node.Init((*server)->address()).ok());
    EXPECT_EQ(node.Get("k"), std::nullopt) << "no data from a dead epoch under drop";
  }
  std::filesystem::remove_all(dir);
}

// etcd stopped and restarted while the lease is still valid: the node keeps serving through
// the outage and stays the same member (same epoch, same lease), its record there after.
TEST(ClusterNodeEtcdRestartTest, TheNodeKeepsServingAndItsEpoch) {
  auto etcd = EtcdProcess::Start();
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  auto opened = EtcdClient::Open({(*etcd)->endpoint()}, 3s);
  ASSERT_TRUE(opened.ok());
  EtcdClient& client = **opened;
  ServerOptions o = NodeOptions("restart", (*etcd)->endpoint());
  o.node_id = "steady";
  o.lease_ttl_secs = 3;  // renewed every second; etcd restores leases' TTL when it restarts
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const uint64_t epoch = (*server)->epoch();
  std::optional<EtcdKeyValue> before = RecordOf(client, "restart", "steady");
  ASSERT_TRUE(before.has_value());
  NodeClient node;
  ASSERT_TRUE(node.Init((*server)->address()).ok());
  ASSERT_TRUE(node.Put("k", "kept"));

  ASSERT_TRUE((*etcd)->Stop().ok());
  // The node finds etcd gone (a renewal fails) and keeps serving.
  ASSERT_TRUE(WaitFor([&] { return (*server)->Stats().Get("cluster_etcd_failures") > 0; }));
  EXPECT_EQ(node.Get("k"), "kept");
  ASSERT_TRUE(node.Put("k2", "written during the outage"));
  EXPECT_EQ((*server)->epoch(), epoch);
  ASSERT_TRUE((*etcd)->Restart().ok());

  std::optional<EtcdKeyValue> after;
  ASSERT_TRUE(WaitFor([&] {
    after = RecordOf(client, "restart", "steady");
    return after.has_value();
  }));
  EXPECT_EQ(after->lease, before->lease);
  EXPECT_EQ(EpochIn(*after), epoch);
  EXPECT_EQ((*server)->epoch(), epoch);
  EXPECT_EQ(node.Get("k"), "kept");
  EXPECT_EQ(node.Get("k2"), "written during the outage");
  EXPECT_EQ((*server)->Stats().Get("cluster_reregistrations"), 0u);
  (*server)->Stop();
  EXPECT_FALSE(RecordOf(client, "restart", "steady").has_value());
}

}  // namespace
}  // namespace kvport
