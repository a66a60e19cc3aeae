// SPDX-License-Identifier: Apache-2.0
// Placement and the cluster client against real in-process nodes on loopback: static lists
// through Client::Init, and membership changes through a membership the test edits (the etcd
// membership is tested against a real etcd in tests/cluster).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/cluster_client.h"
#include "cluster/membership.h"
#include "cluster/placement.h"
#include "fake_node.h"
#include "kvport/client.h"
#include "kvport/server.h"
#include "test_node.h"

namespace kvport {
namespace {

using testing::Pattern;
using testing::SmallNodeOptions;
using testing::StartNode;

cluster::Member MemberOf(std::string id, uint64_t capacity) {
  cluster::Member m;
  m.address = id + ":1";
  m.id = std::move(id);
  m.capacity_bytes = capacity;
  m.epoch = 1;
  return m;
}

std::string KeyName(int i) {
  return "chunk-" + std::to_string(i);
}

// The first choice of every key among `members`.
std::vector<uint32_t> FirstChoices(const std::vector<cluster::Member>& members, int keys) {
  cluster::Placement placement(members);
  std::vector<uint32_t> first(keys);
  std::vector<uint32_t> order;
  for (int i = 0; i < keys; ++i) {
    placement.Rank(KeyName(i), &order);
    first[i] = order[0];
  }
  return first;
}

// RankFirst (a call's first candidates, among the live nodes) is Rank's order with the
// ineligible members left out, cut after the first few: for equal and unequal weights, clusters
// below and above the 32 scores Rank keeps on the stack, and every mask shape.
TEST(PlacementTest, RankFirstIsRanksOrderAmongTheEligible) {
  for (const size_t nodes : {1u, 2u, 3u, 7u, 32u, 45u}) {
    for (const bool weighted : {false, true}) {
      std::vector<cluster::Member> members;
      for (size_t n = 0; n < nodes; ++n)
        members.push_back(MemberOf("node-" + std::to_string(n), weighted ? (n % 4 + 1) << 30 : 0));
      cluster::Placement placement(members);
      std::vector<uint32_t> order;
      for (int k = 0; k < 300; ++k) {
        const std::string key = KeyName(k);
        placement.Rank(key, &order);
        // Eligible: all, then a pattern that drops some (never all) members.
        for (int pattern = 0; pattern < 3; ++pattern) {
          std::vector<uint8_t> eligible(nodes, 1);
          if (pattern > 0) {
            for (size_t n = 0; n < nodes; ++n)
              eligible[n] = (n + k + pattern) % (pattern + 1) == 0 ? 1 : 0;
            eligible[k % nodes] = 1;
          }
          std::vector<uint32_t> expected;
          for (uint32_t n : order)
            if (eligible[n] != 0) expected.push_back(n);
          for (size_t want = 1; want <= std::min<size_t>(expected.size(), 3); ++want) {
            std::vector<uint32_t> first(want);
            placement.RankFirst(cluster::Placement::KeyHash(key), eligible, first);
            ASSERT_EQ(first, std::vector<uint32_t>(expected.begin(), expected.begin() + want))
                << nodes << " nodes, weighted " << weighted << ", key " << key << ", pattern "
                << pattern;
          }
        }
      }
    }
  }
}

TEST(PlacementTest, SharesFollowCapacityWeights) {
  const std::vector<cluster::Member> members = {MemberOf("a", 1 << 30), MemberOf("b", 2u << 30),
                                                MemberOf("c", 1 << 30)};
  constexpr int kKeys = 40'000;
  std::vector<int> count(3);
  for (uint32_t node : FirstChoices(members, kKeys))
    ++count[node];
  // Expected 1/4, 1/2, 1/4; the binomial's standard deviation at 40k keys is 0.0025.
  EXPECT_NEAR(count[0] / double(kKeys), 0.25, 0.015);
  EXPECT_NEAR(count[1] / double(kKeys), 0.50, 0.015);
  EXPECT_NEAR(count[2] / double(kKeys), 0.25, 0.015);

  // A member of unknown capacity (a static list) makes every member weigh the same.
  std::vector<cluster::Member> unknown = members;
  unknown[1].capacity_bytes = 0;
  std::fill(count.begin(), count.end(), 0);
  for (uint32_t node : FirstChoices(unknown, kKeys))
    ++count[node];
  for (int c : count)
    EXPECT_NEAR(c / double(kKeys), 1.0 / 3, 0.015);
}

TEST(PlacementTest, AJoiningNodeTakesOnlyItsShareAndALeavingOneOnlyItsOwn) {
  const std::vector<cluster::Member> three = {MemberOf("a", 1 << 30), MemberOf("b", 1 << 30),
                                              MemberOf("c", 1 << 30)};
  std::vector<cluster::Member> four = three;
  four.push_back(MemberOf("d", 1 << 30));
  constexpr int kKeys = 40'000;
  const std::vector<uint32_t> before = FirstChoices(three, kKeys);
  const std::vector<uint32_t> after = FirstChoices(four, kKeys);
  int moved = 0;
  for (int i = 0; i < kKeys; ++i) {
    if (before[i] == after[i]) continue;
    ++moved;
    EXPECT_EQ(after[i], 3u) << "key " << i << " moved between old nodes";
  }
  EXPECT_NEAR(moved / double(kKeys), 0.25, 0.015);  // d's share of four equal nodes

  // Without b, only b's keys move (indexes shift: a=0, c=1).
  const std::vector<cluster::Member> without_b = {three[0], three[2]};
  const std::vector<uint32_t> left = FirstChoices(without_b, kKeys);
  for (int i = 0; i < kKeys; ++i) {
    if (before[i] != 1) {
      EXPECT_EQ(left[i], before[i] == 0 ? 0u : 1u) << i;
    }
  }
  // The order does not depend on how the list is sorted.
  std::vector<cluster::Member> reversed(three.rbegin(), three.rend());
  const std::vector<uint32_t> reversed_first = FirstChoices(reversed, 1000);
  for (int i = 0; i < 1000; ++i)
    EXPECT_EQ(reversed[reversed_first[i]].id, three[before[i]].id);
}

// Three nodes and the helpers the tests below share.
class ClusterClientTest : public ::testing::Test {
 protected:
  void StartNodes(int n) {
    for (int i = 0; i < n; ++i) {
      nodes_.push_back(StartNode(SmallNodeOptions()));
      ASSERT_NE(nodes_.back(), nullptr);
    }
  }
  std::string List() const {
    std::string list;
    for (const auto& node : nodes_)
      list += (list.empty() ? "" : ";") + node->address();
    return list;
  }
  // Indexes (into nodes_) of the key's nodes, first choice first.
  std::vector<size_t> NodesOf(const std::string& key) const {
    std::vector<std::string> addresses;
    for (const auto& node : nodes_)
      addresses.push_back(node->address());
    cluster::StaticMembership membership(addresses);
    const std::vector<cluster::Member> members = membership.Members();
    cluster::Placement placement(members);
    std::vector<uint32_t> order;
    placement.Rank(key, &order);
    std::vector<size_t> nodes;
    for (uint32_t member : order) {
      for (size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i]->address() == members[member].address) nodes.push_back(i);
      }
    }
    return nodes;
  }
  size_t FirstNodeOf(const std::string& key) const { return NodesOf(key)[0]; }
  uint64_t ObjectsOn(size_t node) {
    Client one;
    EXPECT_TRUE(one.Init("count", nodes_[node]->address()).ok());
    Result<NodeStats> stats = one.Stats();
    return stats.ok() ? stats->Get("objects") : 0;
  }

  // Writes keys [from, from + n) with values Pattern(i, 1000 + i).
  void Write(Client& client, int from, int n) {
    std::vector<std::string> keys;
    std::vector<std::vector<char>> values;
    IOBuffers buffers;
    for (int i = from; i < from + n; ++i) {
      keys.push_back(KeyName(i));
      values.push_back(Pattern(i, 1000 + i));
    }
    for (auto& v : values)
      buffers.Append(v.data(), v.size());
    Result<BatchResult> put = client.MSet(keys, buffers);
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    ASSERT_EQ(put->status, BatchCode::kSuccess) << put->error.ToString();
  }
  // Reads keys [from, from + n): per key, whether it was a hit with the right bytes (a hit with
  // wrong bytes fails the test).
  std::vector<bool> Read(Client& client, int from, int n) {
    std::vector<std::string> keys;
    std::vector<std::vector<char>> space(n, std::vector<char>(4096));
    IOBuffers buffers;
    for (int i = from; i < from + n; ++i)
      keys.push_back(KeyName(i));
    for (auto& s : space)
      buffers.Append(s.data(), s.size());
    Result<GetResult> got = client.MGet(keys, {}, buffers);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    std::vector<bool> hits(n, false);
    if (!got.ok()) return hits;
    for (int k = 0; k < n; ++k) {
      if (got->codes[k] == KeyCode::kSuccess) {
        const std::vector<char> want = Pattern(from + k, 1000 + from + k);
        EXPECT_EQ(got->value_sizes[k], want.size());
        EXPECT_TRUE(std::equal(want.begin(), want.end(), space[k].begin())) << keys[k];
        hits[k] = true;
      } else {
        EXPECT_EQ(got->codes[k], KeyCode::kKeyNotExist) << keys[k] << ": " << got->error.ToString();
      }
    }
    return hits;
  }

  std::vector<std::unique_ptr<Server>> nodes_;
};

TEST_F(ClusterClientTest, ABatchSpanningEveryNodeComesBackPerKeyInOrder) {
  StartNodes(3);
  Client client;
  ASSERT_TRUE(client.Init("t", "eic://" + List() + "/").ok());
  EXPECT_EQ(client.endpoint(), List());
  Write(client, 0, 120);
  uint64_t total = 0;
  for (size_t n = 0; n < 3; ++n) {
    const uint64_t objects = ObjectsOn(n);
    EXPECT_GT(objects, 0u) << "node " << n << " got no key of 120";
    total += objects;
  }
  EXPECT_EQ(total, 120u);  // one copy of each key

  // Hits and misses interleaved, in one call: keys 100..139, of which 120.. were never written.
  const std::vector<bool> hits = Read(client, 100, 40);
  for (int k = 0; k < 40; ++k)
    EXPECT_EQ(hits[k], k < 20) << k;

  std::vector<std::string> probe = {KeyName(5), KeyName(500), KeyName(7)};
  Result<BatchResult> exist = client.MExist(probe);
  ASSERT_TRUE(exist.ok());
  EXPECT_EQ(exist->codes,
            (std::vector<KeyCode>{KeyCode::kSuccess, KeyCode::kKeyNotExist, KeyCode::kSuccess}));
  EXPECT_EQ(exist->status, BatchCode::kPartialFailed);
  Result<BatchResult> del = client.MDel(probe);
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(del->codes, exist->codes);
  exist = client.MExist(probe);
  ASSERT_TRUE(exist.ok());
  EXPECT_EQ(exist->status, BatchCode::kFailed);

  // Metas travel with their values, and the meta-only read finds them on the right node.
  std::vector<std::string> keys = {"m1", "m2", "m3", "m4"};
  std::vector<std::string> metas = {"one", "two", "", "four"};
  std::vector<char> value = Pattern(9, 64);
  IOBuffers values;
  for (size_t i = 0; i < keys.size(); ++i)
    values.Append(value.data(), value.size());
  ASSERT_TRUE(client.MSet(keys, values, {}, metas).ok());
  Result<GetResult> meta = client.MGetMeta(keys);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->metas, metas);
  EXPECT_EQ(meta->value_sizes, (std::vector<uint64_t>(4, 64)));
}

TEST_F(ClusterClientTest, ADeadNodesKeysAreMissesAndWritesGoOn) {
  StartNodes(3);
  Client client;
  InitOptions options;
  options.connect_timeout = std::chrono::milliseconds(500);
  ASSERT_TRUE(client.Init("t", List(), options).ok());
  Write(client, 0, 150);
  const size_t dead = 1;
  nodes_[dead]->Stop();

  const std::vector<bool> hits = Read(client, 0, 150);
  int lost = 0;
  for (int i = 0; i < 150; ++i) {
    const bool on_dead = FirstNodeOf(KeyName(i)) == dead;
    EXPECT_EQ(hits[i], !on_dead) << KeyName(i);
    lost += on_dead ? 1 : 0;
  }
  EXPECT_GT(lost, 0);
  EXPECT_LT(lost, 150);
  // Writes keep succeeding: the dead node's keys go to their next node, and read back from it.
  Write(client, 1000, 150);
  const std::vector<bool> after = Read(client, 1000, 150);
  EXPECT_EQ(std::count(after.begin(), after.end(), true), 150);
  // Ping names the node that does not answer.
  Status ping = client.Ping();
  EXPECT_EQ(ping.code(), StatusCode::kUnavailable);
  EXPECT_NE(ping.message().find(nodes_[dead]->address()), std::string::npos) << ping.ToString();
}

// Two of four nodes die unseen: the first write after it still places every key, the keys
// whose first two choices were both dead on their third (a rank past what the call worked out
// at its start), and each key lands on its first live node in rendezvous order.
TEST_F(ClusterClientTest, AWriteFailsOverPastEveryDeadChoiceInRendezvousOrder) {
  StartNodes(4);
  Client client;
  InitOptions options;
  options.connect_timeout = std::chrono::milliseconds(500);
  ASSERT_TRUE(client.Init("t", List(), options).ok());
  Write(client, 0, 40);  // every node connected and answering
  const size_t objects_before[] = {ObjectsOn(2), ObjectsOn(3)};
  nodes_[0]->Stop();
  nodes_[1]->Stop();

  Write(client, 1000, 150);
  int third_choice = 0;
  std::vector<int> expected(4, 0);
  for (int i = 1000; i < 1150; ++i) {
    const std::vector<size_t> order = NodesOf(KeyName(i));
    const size_t first_live = order[0] > 1 ? order[0] : order[1] > 1 ? order[1] : order[2];
    third_choice += order[0] <= 1 && order[1] <= 1 ? 1 : 0;
    ++expected[first_live];
  }
  EXPECT_GT(third_choice, 0);  // the path this test is for was taken
  EXPECT_EQ(ObjectsOn(2) - objects_before[0], static_cast<uint64_t>(expected[2]));
  EXPECT_EQ(ObjectsOn(3) - objects_before[1], static_cast<uint64_t>(expected[3]));
  const std::vector<bool> hits = Read(client, 1000, 150);
  EXPECT_EQ(std::count(hits.begin(), hits.end(), true), 150);
}

TEST_F(ClusterClientTest, WithTwoReplicasEveryKeyOutlivesOneNode) {
  StartNodes(3);
  Client client;
  ASSERT_TRUE(client.Init("t", List() + "?replicas=2").ok());
  Write(client, 0, 150);
  EXPECT_EQ(ObjectsOn(0) + ObjectsOn(1) + ObjectsOn(2), 300u);  // two copies of each
  nodes_[0]->Stop();
  const std::vector<bool> hits = Read(client, 0, 150);
  EXPECT_EQ(std::count(hits.begin(), hits.end(), true), 150);
  std::vector<std::string> keys;
  for (int i = 0; i < 150; ++i)
    keys.push_back(KeyName(i));
  Result<BatchResult> exist = client.MExist(keys);
  ASSERT_TRUE(exist.ok());
  EXPECT_EQ(exist->status, BatchCode::kSuccess) << exist->error.ToString();
  // A delete reaches every copy the client can: with one replica gone, the keys whose copies
  // included it cannot be known deleted, and say so.
  Result<BatchResult> del = client.MDel(keys);
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(ObjectsOn(1) + ObjectsOn(2), 0u);
}

TEST_F(ClusterClientTest, AWriteQuorumThatCannotBeMetFailsTheKeyButKeepsTheCopy) {
  StartNodes(2);
  Client client;
  ASSERT_TRUE(client.Init("t", List() + "?replicas=2&write_quorum=2").ok());
  Write(client, 0, 20);
  nodes_[1]->Stop();
  std::vector<char> value = Pattern(1, 100);
  IOBuffers buffers;
  buffers.Append(value.data(), value.size());
  Result<BatchResult> put = client.MSet({"q"}, buffers);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->codes[0], KeyCode::kUnavailable);
  EXPECT_NE(put->error.message().find("write quorum"), std::string::npos) << put->error.ToString();
  Result<BatchResult> exist = client.MExist({"q"});
  ASSERT_TRUE(exist.ok());
  EXPECT_EQ(exist->codes[0], KeyCode::kSuccess);  // the copy that was stored is served
}

TEST_F(ClusterClientTest, StatsSumTheNodesAndListVisitsEachOnce) {
  StartNodes(3);
  Client client;
  ASSERT_TRUE(client.Init("t", List()).ok());
  Write(client, 0, 100);
  Result<NodeStats> stats = client.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->Get("objects"), 100u);
  EXPECT_EQ(stats->Get("capacity_bytes"), 3 * (uint64_t{64} << 20));
  Result<std::vector<NodeReport>> reports = client.StatsPerNode();
  ASSERT_TRUE(reports.ok());
  ASSERT_EQ(reports->size(), 3u);
  uint64_t sum = 0;
  for (const NodeReport& report : *reports) {
    EXPECT_TRUE(report.status.ok());
    EXPECT_EQ(report.id, report.address);
    sum += report.stats.Get("objects");
  }
  EXPECT_EQ(sum, 100u);

  std::multiset<std::string> listed;
  uint64_t cursor = 0;
  int pages = 0;
  do {
    Result<KeyPage> page = client.List("", cursor, 7);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    listed.insert(page->keys.begin(), page->keys.end());
    cursor = page->next_cursor;
    ASSERT_LT(++pages, 100);
  } while (cursor != 0);
  EXPECT_EQ(listed.size(), 100u);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(listed.count(KeyName(i)), 1u) << i;
  EXPECT_EQ(client.List("", 12345).status().code(), StatusCode::kInvalidArgument);

  nodes_[2]->Stop();
  reports = client.StatsPerNode();
  ASSERT_TRUE(reports.ok());
  EXPECT_EQ(std::count_if(reports->begin(), reports->end(),
                          [](const NodeReport& r) { return !r.status.ok(); }),
            1);
  stats = client.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->Get("capacity_bytes"), 2 * (uint64_t{64} << 20));
}

TEST_F(ClusterClientTest, InitNeedsOneNodeThatAnswers) {
  StartNodes(2);
  const std::string dead = nodes_[1]->address();
  nodes_[1]->Stop();
  InitOptions options;
  options.connect_timeout = std::chrono::milliseconds(500);
  Client some;
  EXPECT_TRUE(some.Init("t", List(), options).ok());
  nodes_[0]->Stop();
  Client none;
  Status s = none.Init("t", List(), options);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("no node answers"), std::string::npos) << s.ToString();
}

// A membership the test edits, as etcd's watch would.
class EditableMembership final : public cluster::Membership {
 public:
  void Set(std::vector<cluster::Member> members) {
    std::sort(members.begin(), members.end(),
              [](const auto& a, const auto& b) { return a.id < b.id; });
    std::lock_guard<std::mutex> lock(mu_);
    members_ = std::move(members);
    generation_.fetch_add(1);
  }
  std::vector<cluster::Member> Members() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return members_;
  }
  uint64_t generation() const override { return generation_.load(); }
  std::string Describe() const override { return "test membership"; }

 private:
  mutable std::mutex mu_;
  std::vector<cluster::Member> members_;
  std::atomic<uint64_t> generation_{1};
};

cluster::Member NodeMember(const std::string& id, const Server& node, uint64_t epoch) {
  cluster::Member m;
  m.id = id;
  m.address = node.address();
  m.epoch = epoch;
  m.capacity_bytes = uint64_t{64} << 20;
  return m;
}

TEST_F(ClusterClientTest, JoinsLeavesAndNewEpochsTakeEffectAtTheNextCall) {
  StartNodes(3);
  auto owned = std::make_unique<EditableMembership>();
  EditableMembership* membership = owned.get();
  membership->Set({NodeMember("n0", *nodes_[0], 1), NodeMember("n1", *nodes_[1], 1)});
  client::DeviceStaging devices;
  client::ValueChecksums checksums(/*enabled=*/true, {});
  Result<TransportChoice> tcp = ResolveTransport(1, TransportEnvironment{});
  ASSERT_TRUE(tcp.ok());
  InitOptions init;
  init.connect_timeout = std::chrono::milliseconds(500);
  client::ClusterClient cluster("t", std::move(owned), init, *tcp, {}, &devices, &checksums, {});
  ASSERT_TRUE(cluster.Connect().ok());
  auto put = [&](int from, int n) {
    std::vector<std::string> keys;
    std::vector<char> value = Pattern(1, 256);
    IOBuffers values;
    for (int i = from; i < from + n; ++i) {
      keys.push_back(KeyName(i));
      values.Append(value.data(), value.size());
    }
    Result<BatchResult> r = cluster.StartMSet(keys, values, {}, {})->Finish();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, BatchCode::kSuccess) << r->error.ToString();
  };
  auto exist = [&](int from, int n) {
    std::vector<std::string> keys;
    for (int i = from; i < from + n; ++i)
      keys.push_back(KeyName(i));
    Result<BatchResult> r = cluster.StartMExist(keys, {})->Finish();
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->codes : std::vector<KeyCode>();
  };
  put(0, 100);
  EXPECT_EQ(ObjectsOn(2), 0u);

  // n2 joins: new keys reach it; old keys whose placement moved to it read as misses.
  membership->Set({NodeMember("n0", *nodes_[0], 1), NodeMember("n1", *nodes_[1], 1),
                   NodeMember("n2", *nodes_[2], 1)});
  put(1000, 100);
  EXPECT_GT(ObjectsOn(2), 0u);
  const std::vector<KeyCode> old_keys = exist(0, 100);
  const int moved =
      static_cast<int>(std::count(old_keys.begin(), old_keys.end(), KeyCode::kKeyNotExist));
  EXPECT_GT(moved, 0);
  EXPECT_LT(moved, 60);  // about a third

  // n1 leaves: its keys are misses, the others still hits.
  const uint64_t on_n1 = ObjectsOn(1);
  membership->Set({NodeMember("n0", *nodes_[0], 1), NodeMember("n2", *nodes_[2], 1)});
  const std::vector<KeyCode> after_leave = exist(1000, 100);
  const int hits =
      static_cast<int>(std::count(after_leave.begin(), after_leave.end(), KeyCode::kSuccess));
  EXPECT_GT(hits, 0);
  EXPECT_LT(hits, 100);
  EXPECT_EQ(ObjectsOn(1), on_n1);  // nothing was sent to the node that left

  // n2 restarts (a new, empty node with a new epoch, at another address): the client drops its
  // old connections and uses the new node.
  const uint64_t on_n2 = ObjectsOn(2);
  ASSERT_GT(on_n2, 0u);
  nodes_[2]->Stop();
  nodes_[2] = StartNode(SmallNodeOptions());
  membership->Set({NodeMember("n0", *nodes_[0], 1), NodeMember("n2", *nodes_[2], 2)});
  const std::vector<KeyCode> after_restart = exist(1000, 100);
  // Only n0's copies are left: exactly the keys n0 itself holds are hits.
  Client n0;
  ASSERT_TRUE(n0.Init("n0", nodes_[0]->address()).ok());
  std::vector<std::string> keys;
  for (int i = 1000; i < 1100; ++i)
    keys.push_back(KeyName(i));
  Result<BatchResult> on_n0 = n0.MExist(keys);
  ASSERT_TRUE(on_n0.ok());
  EXPECT_EQ(after_restart, on_n0->codes);
  EXPECT_LT(std::count(after_restart.begin(), after_restart.end(), KeyCode::kSuccess), hits);
  put(2000, 50);
  EXPECT_GT(ObjectsOn(2), 0u);
}

// A node that must be connected to (it failed at Init) and answers its connect slowly: the call
// connecting to it waits for it, and a call made meanwhile does not wait behind that connect (its
// key on that node is a miss, with the reason) and returns first.
TEST(ClusterClientConnectTest, ACallDoesNotWaitForAnotherCallsConnect) {
  auto real = StartNode(SmallNodeOptions());
  ASSERT_NE(real, nullptr);
  testing::Latch connecting, release;
  testing::FakeNode slow([&](testing::FakeConn& conn, int index) {
    if (index == 0) return;  // refused at Init: the client must connect again later
    connecting.Raise();
    if (!release.WaitFor(1) || !conn.Hello()) return;
    testing::FakeFrame request;
    while (conn.Read(&request)) {
      protocol::MexistRequest decoded;
      if (!protocol::DecodeRequest(request.header, request.descriptor, protocol::Limits(), &decoded)
               .ok()) {
        return;
      }
      protocol::MexistResponse answer;
      answer.results.assign(decoded.keys.size(), protocol::ExistResult{StatusCode::kNotFound, 0});
      if (!conn.Write(testing::ResponseBytes(request.header.request_id, answer))) return;
    }
  });
  // A key whose first node is the slow one.
  const cluster::StaticMembership list({real->address(), slow.address()});
  const std::vector<cluster::Member> members = list.Members();
  cluster::Placement placement(members);
  std::vector<uint32_t> order;
  std::vector<std::string> key;
  for (int i = 0; key.empty(); ++i) {
    placement.Rank(KeyName(i), &order);
    if (members[order[0]].address == slow.address()) key.push_back(KeyName(i));
  }

  InitOptions init;
  init.transport_type = 1;
  init.connect_timeout = std::chrono::seconds(20);
  Client client;
  ASSERT_TRUE(client.Init("connect-test", real->address() + ";" + slow.address(), init).ok());
  // Calls until one is connecting to the slow node (the first open failed and backs off 200 ms).
  std::atomic<bool> stop{false};
  std::thread connector([&] {
    while (!stop.load() && connecting.count() == 0)
      (void)client.MExist(key);
  });
  ASSERT_TRUE(connecting.WaitFor(1));
  // Must not wait for `release`: waiting behind the connect would end only at connect_timeout,
  // with the connect's failure as the reason instead.
  Result<BatchResult> meanwhile = client.MExist(key);
  release.Raise();
  stop = true;
  connector.join();
  ASSERT_TRUE(meanwhile.ok()) << meanwhile.status().ToString();
  EXPECT_EQ(meanwhile->codes, std::vector<KeyCode>{KeyCode::kKeyNotExist});
  EXPECT_NE(meanwhile->error.message().find("connecting"), std::string::npos)
      << meanwhile->error.ToString();
}

}  // namespace
}  // namespace kvport
