// SPDX-License-Identifier: Apache-2.0
// EtcdMembership against a real etcd: members join, leave and lapse; etcd goes and comes back.
#include "cluster/etcd_membership.h"

#include <gtest/gtest.h>

#include "etcd_process.h"
#include "etcd_test_util.h"
#include "tcp_proxy.h"

namespace kvport::cluster {
namespace {

using kvport::testing::DeadEndpoint;
using kvport::testing::EtcdProcess;
using kvport::testing::TcpProxy;
using kvport::testing::WaitFor;
using namespace std::chrono_literals;

constexpr auto kRequestTimeout = 2000ms;

Member MakeMember(std::string id, uint16_t port, uint64_t epoch) {
  Member m;
  m.id = std::move(id);
  m.address = "127.0.0.1:" + std::to_string(port);
  m.epoch = epoch;
  m.capacity_bytes = 1 << 20;
  m.protocol_version = 5;
  m.transports = {"tcp"};
  m.started_unix_ms = 1;
  return m;
}

std::vector<std::string> Ids(const Membership& membership) {
  std::vector<std::string> ids;
  for (const Member& m : membership.Members())
    ids.push_back(m.id);
  return ids;
}

class EtcdMembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = EtcdProcess::Start();
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    etcd_ = std::move(started).value();
    auto opened = EtcdClient::Open({etcd_->endpoint()}, kRequestTimeout);
    ASSERT_TRUE(opened.ok());
    writer_ = std::move(opened).value();
  }
  Status Register(const std::string& cluster, const Member& m, int64_t lease = 0) {
    return writer_->Put(EtcdNodeKey(cluster, m.id), EncodeMember(m), lease);
  }
  Result<std::unique_ptr<EtcdMembership>> OpenMembership(const std::string& cluster) {
    return EtcdMembership::Open({etcd_->endpoint()}, cluster, kRequestTimeout);
  }

  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<EtcdClient> writer_;
};

TEST(EtcdMembershipOpen, EtcdDownIsUnavailableNamingEndpointsAndCluster) {
  const std::string dead = DeadEndpoint();
  auto opened = EtcdMembership::Open({dead}, "c-down", 1000ms);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(opened.status().message().find(dead), std::string::npos) << opened.status().ToString();
  EXPECT_NE(opened.status().message().find("c-down"), std::string::npos)
      << opened.status().ToString();
}

TEST(EtcdMembershipOpen, RefusesBadArguments) {
  EXPECT_EQ(EtcdMembership::Open({"nohost"}, "c", 1s).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EtcdMembership::Open({"127.0.0.1:2379"}, "", 1s).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(EtcdMembershipTest, EmptyClusterHasNoMembers) {
  auto membership = OpenMembership("empty");
  ASSERT_TRUE(membership.ok()) << membership.status().ToString();
  EXPECT_TRUE((*membership)->Members().empty());
  EXPECT_TRUE((*membership)->connected());
  EXPECT_NE((*membership)->Describe().find(etcd_->endpoint()), std::string::npos);
  EXPECT_NE((*membership)->Describe().find("empty"), std::string::npos);
}

TEST_F(EtcdMembershipTest, ReadsExistingMembersAtOpenAndSkipsBadRecords) {
  ASSERT_TRUE(Register("c1", MakeMember("b", 7002, 2)).ok());
  ASSERT_TRUE(Register("c1", MakeMember("a", 7001, 1)).ok());
  ASSERT_TRUE(writer_->Put(EtcdNodeKey("c1", "broken"), "{not json").ok());
  // Another cluster's node is not ours.
  ASSERT_TRUE(Register("c10", MakeMember("z", 7009, 9)).ok());
  auto membership = OpenMembership("c1");
  ASSERT_TRUE(membership.ok()) << membership.status().ToString();
  EXPECT_EQ(Ids(**membership), (std::vector<std::string>{"a", "b"}));
  auto members = (*membership)->Members();
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0], MakeMember("a", 7001, 1));
}

TEST_F(EtcdMembershipTest, SeesMembersJoinLeaveAndLapse) {
  auto opened = OpenMembership("c2");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EtcdMembership& membership = **opened;
  uint64_t generation = membership.generation();

  ASSERT_TRUE(Register("c2", MakeMember("a", 7001, 11)).ok());
  ASSERT_TRUE(WaitFor([&] { return Ids(membership) == std::vector<std::string>{"a"}; }));
  EXPECT_GT(membership.generation(), generation);
  generation = membership.generation();

  // A node with a 1 s lease that it never renews.
  auto lease = writer_->GrantLease(1s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(Register("c2", MakeMember("b", 7002, 22), *lease).ok());
  ASSERT_TRUE(WaitFor([&] { return Ids(membership) == std::vector<std::string>{"a", "b"}; }));
  EXPECT_GT(membership.generation(), generation);

  // A restart of "a": same id, new epoch and address, replaces it.
  ASSERT_TRUE(Register("c2", MakeMember("a", 7011, 12)).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto members = membership.Members();
    return !members.empty() && members[0].id == "a" && members[0].epoch == 12;
  }));
  EXPECT_EQ(membership.Members()[0].address, "127.0.0.1:7011");

  // A bad record that appears later is skipped; the others stay.
  ASSERT_TRUE(writer_->Put(EtcdNodeKey("c2", "junk"), R"({"id":"junk"})").ok());

  // b's lease lapses: etcd deletes its key, the watch reports the delete.
  ASSERT_TRUE(WaitFor([&] { return Ids(membership) == std::vector<std::string>{"a"}; }))
      << "the member whose lease lapsed is still listed";

  // a leaves (a clean shutdown deletes its key).
  generation = membership.generation();
  ASSERT_TRUE(writer_->Delete(EtcdNodeKey("c2", "a")).ok());
  ASSERT_TRUE(WaitFor([&] { return membership.Members().empty(); }));
  EXPECT_GT(membership.generation(), generation);
}

// The membership follows etcd over one watch stream: 30 joins and leaves arrive as they happen,
// each seen before the next is made, over the watch's one connection (the other one relayed is
// the kept-alive connection of the first read), and the stream is not reopened in between.
TEST_F(EtcdMembershipTest, FollowsEveryChangeOverOneWatchStream) {
  TcpProxy proxy(etcd_->port());
  auto client = EtcdClient::Open({proxy.endpoint()}, kRequestTimeout);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EtcdClient* watcher = client->get();
  auto opened = EtcdMembership::Open(std::move(client).value(), "stream");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EtcdMembership& membership = **opened;
  for (int i = 0; i < 15; ++i) {
    const std::string id = "n" + std::to_string(100 + i);
    ASSERT_TRUE(Register("stream", MakeMember(id, uint16_t(7100 + i), uint64_t(i + 1))).ok());
    ASSERT_TRUE(WaitFor([&] { return membership.Members().size() == size_t(i + 1); })) << id;
  }
  for (int i = 0; i < 15; ++i) {
    ASSERT_TRUE(writer_->Delete(EtcdNodeKey("stream", "n" + std::to_string(100 + i))).ok());
    ASSERT_TRUE(WaitFor([&] { return membership.Members().size() == size_t(14 - i); })) << i;
  }
  EXPECT_EQ(watcher->watch_stats().streams_opened, 1u);
  EXPECT_EQ(proxy.relayed(), 2u);
  EXPECT_TRUE(membership.connected());
}

TEST_F(EtcdMembershipTest, KeepsTheListWhileEtcdIsDownAndCatchesUpAfter) {
  ASSERT_TRUE(Register("c3", MakeMember("a", 7001, 1)).ok());
  ASSERT_TRUE(Register("c3", MakeMember("b", 7002, 2)).ok());
  auto opened = OpenMembership("c3");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EtcdMembership& membership = **opened;
  ASSERT_EQ(Ids(membership), (std::vector<std::string>{"a", "b"}));

  ASSERT_TRUE(etcd_->Stop().ok());
  ASSERT_TRUE(WaitFor([&] { return !membership.connected(); }))
      << "the membership never noticed etcd stopping";
  // Down: the last list is still served.
  EXPECT_EQ(Ids(membership), (std::vector<std::string>{"a", "b"}));

  ASSERT_TRUE(etcd_->Restart().ok());
  // Changes made once etcd is back: one leaves, one joins. Whether the membership reconnects
  // before or after them, it must end up with them.
  ASSERT_TRUE(writer_->Delete(EtcdNodeKey("c3", "a")).ok());
  ASSERT_TRUE(Register("c3", MakeMember("c", 7003, 3)).ok());
  ASSERT_TRUE(WaitFor([&] {
    return Ids(membership) == std::vector<std::string>{"b", "c"};
  })) << "after the restart the membership still lists the old members";
  ASSERT_TRUE(WaitFor([&] { return membership.connected(); }));

  // And it is watching again, not just re-read once.
  ASSERT_TRUE(Register("c3", MakeMember("d", 7004, 4)).ok());
  ASSERT_TRUE(WaitFor([&] { return Ids(membership) == std::vector<std::string>{"b", "c", "d"}; }));
}

TEST_F(EtcdMembershipTest, DestroysPromptlyWhileEtcdIsDown) {
  auto opened = OpenMembership("c4");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_TRUE(etcd_->Stop().ok());
  ASSERT_TRUE(WaitFor([&] { return !(*opened)->connected(); }));
  // The destructor joins the watch thread, which is in its backoff: it must not hang (ctest's
  // timeout bounds this test).
  opened = Status::Aborted("destroyed");
}

}  // namespace
}  // namespace kvport::cluster
