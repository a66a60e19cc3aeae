// SPDX-License-Identifier: Apache-2.0
// NodeRegistration's state machine against a scripted etcd (no etcd process): what it writes,
// how it rides out an outage, and what a lapsed lease makes it do.
#include "cluster/node_registration.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include "etcd_test_util.h"

namespace kvport::cluster {
namespace {

using kvport::testing::WaitFor;
using namespace std::chrono_literals;

// An in-memory etcd: leases and keys attached to them; `down` makes every call Unavailable.
// Leases never run out by themselves: a test lapses one with Expire().
class FakeEtcd final : public EtcdClient {
 public:
  struct State {
    std::mutex mu;
    bool down = false;
    bool grants_down = false;  // only GrantLease fails (etcd answers renewals)
    int64_t next_lease = 100;
    std::set<int64_t> leases;
    std::map<std::string, EtcdKeyValue> keys;
    int keepalives = 0;  // renewals etcd answered
    int attempts = 0;    // renewals tried, answered or not
    int revokes = 0;
    int grants = 0;  // lease grants tried
  };
  explicit FakeEtcd(std::shared_ptr<State> state) : state_(std::move(state)) {}

  Result<int64_t> GrantLease(std::chrono::seconds) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    ++state_->grants;
    if (state_->down || state_->grants_down) return Down();
    state_->leases.insert(state_->next_lease);
    return state_->next_lease++;
  }
  Result<int64_t> KeepAlive(int64_t lease) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    ++state_->attempts;
    if (state_->down) return Down();
    ++state_->keepalives;
    if (state_->leases.count(lease) == 0) return Status::NotFound("lease not found");
    return int64_t{1};
  }
  Status RevokeLease(int64_t lease) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->down) return Down();
    ++state_->revokes;
    DropLeaseLocked(lease);
    return Status::Ok();
  }
  Result<EtcdLeaseTtl> TimeToLive(int64_t) override { return EtcdLeaseTtl{}; }
  Status Put(std::string_view key, std::string_view value, int64_t lease) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->down) return Down();
    if (lease != 0 && state_->leases.count(lease) == 0) return Status::NotFound("no lease");
    state_->keys[std::string(key)] = EtcdKeyValue{std::string(key), std::string(value), lease, 0};
    return Status::Ok();
  }
  Status Delete(std::string_view) override { return Status::Ok(); }
  Result<EtcdRange> RangePrefix(std::string_view) override { return EtcdRange{}; }
  Status Watch(std::string_view, int64_t, const std::function<void(const std::vector<EtcdEvent>&)>&,
               const std::atomic<bool>&, std::chrono::milliseconds) override {
    return Status::NotSupported("fake");
  }
  void CancelWatch() override {}  // Watch returns at once
  std::string Describe() const override { return "fake:2379"; }

  static void Expire(State& state, int64_t lease) {
    std::lock_guard<std::mutex> lock(state.mu);
    DropLeaseLocked(state, lease);
  }

 private:
  static Status Down() { return Status::Unavailable("etcd fake:2379: connection refused"); }
  void DropLeaseLocked(int64_t lease) { DropLeaseLocked(*state_, lease); }
  static void DropLeaseLocked(State& state, int64_t lease) {
    state.leases.erase(lease);
    for (auto it = state.keys.begin(); it != state.keys.end();) {
      it = it->second.lease == lease ? state.keys.erase(it) : std::next(it);
    }
  }
  std::shared_ptr<State> state_;
};

Member Record() {
  Member m;
  m.id = "node-a";
  m.address = "127.0.0.1:7470";
  m.capacity_bytes = 1 << 20;
  m.protocol_version = 4;
  m.transports = {"tcp"};
  return m;
}

class NodeRegistrationTest : public ::testing::Test {
 protected:
  Result<std::unique_ptr<NodeRegistration>> Start() {
    RegistrationOptions options;
    options.cluster = "c1";
    options.lease_ttl = 1s;
    options.on_new_epoch = [this](uint64_t epoch) {
      std::lock_guard<std::mutex> lock(mu_);
      new_epochs_.push_back(epoch);
    };
    return NodeRegistration::Start(std::make_unique<FakeEtcd>(state_), Record(), options);
  }
  // The record stored now under the node's key, if any.
  std::optional<EtcdKeyValue> Stored() {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->keys.find(EtcdNodeKey("c1", "node-a"));
    if (it == state_->keys.end()) return std::nullopt;
    return it->second;
  }
  size_t NewEpochCalls() {
    std::lock_guard<std::mutex> lock(mu_);
    return new_epochs_.size();
  }
  void SetDown(bool down) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->down = down;
  }
  int KeepAlives() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->keepalives;
  }
  int Attempts() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->attempts;
  }

  std::shared_ptr<FakeEtcd::State> state_ = std::make_shared<FakeEtcd::State>();
  std::mutex mu_;
  std::vector<uint64_t> new_epochs_;
};

TEST_F(NodeRegistrationTest, WritesItsRecordWithANewEpochAndRevokesOnStop) {
  auto r = Start();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::optional<EtcdKeyValue> kv = Stored();
  ASSERT_TRUE(kv.has_value());
  EXPECT_NE(kv->lease, 0);
  Result<Member> m = DecodeMember(kv->value);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->id, "node-a");
  EXPECT_NE(m->epoch, 0u);
  EXPECT_EQ(m->epoch, (*r)->epoch());
  EXPECT_GT(m->started_unix_ms, 0);
  EXPECT_TRUE((*r)->registered());
  EXPECT_EQ((*r)->key(), "/kvport/clusters/c1/nodes/node-a");

  // It renews.
  const int before = KeepAlives();
  EXPECT_TRUE(WaitFor([&] { return KeepAlives() > before; }));

  (*r)->Stop();
  EXPECT_FALSE(Stored().has_value());
  EXPECT_FALSE((*r)->registered());
  (*r)->Stop();  // idempotent
}

TEST_F(NodeRegistrationTest, EveryStartTakesAnotherEpoch) {
  auto first = Start();
  ASSERT_TRUE(first.ok());
  const uint64_t epoch = (*first)->epoch();
  (*first)->Stop();
  auto second = Start();
  ASSERT_TRUE(second.ok());
  EXPECT_NE((*second)->epoch(), epoch);
  EXPECT_NE((*second)->epoch(), 0u);
}

TEST_F(NodeRegistrationTest, UnreachableAtStartIsUnavailableNamingEtcdAndTheCluster) {
  SetDown(true);
  auto r = Start();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("fake:2379"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("'c1'"), std::string::npos) << r.status().ToString();
}

TEST_F(NodeRegistrationTest, RefusesBadOptions) {
  RegistrationOptions options;
  options.cluster = "";
  EXPECT_EQ(NodeRegistration::Start(std::make_unique<FakeEtcd>(state_), Record(), options)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  options.cluster = "c1";
  options.lease_ttl = 0s;
  EXPECT_EQ(NodeRegistration::Start(std::make_unique<FakeEtcd>(state_), Record(), options)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

TEST_F(NodeRegistrationTest, AnOutageWithTheLeaseKeptChangesNothing) {
  auto r = Start();
  ASSERT_TRUE(r.ok());
  const uint64_t epoch = (*r)->epoch();
  const int64_t lease = Stored()->lease;
  SetDown(true);
  // Renewals fail meanwhile (it keeps trying); the node stays registered as far as it knows.
  const int tried = Attempts();
  ASSERT_TRUE(WaitFor([&] { return Attempts() > tried + 1; }));
  EXPECT_TRUE((*r)->registered());
  EXPECT_EQ((*r)->epoch(), epoch);
  const int answered = KeepAlives();
  SetDown(false);
  EXPECT_TRUE(WaitFor([&] { return KeepAlives() > answered; }));
  EXPECT_EQ((*r)->epoch(), epoch);
  EXPECT_EQ(Stored()->lease, lease);
  EXPECT_TRUE((*r)->registered());
  EXPECT_EQ((*r)->reregistrations(), 0u);
  EXPECT_EQ(NewEpochCalls(), 0u);
}

TEST_F(NodeRegistrationTest, ALapsedLeaseMeansANewEpochTheCallbackAndANewRecord) {
  auto r = Start();
  ASSERT_TRUE(r.ok());
  const uint64_t old_epoch = (*r)->epoch();
  const int64_t old_lease = Stored()->lease;
  FakeEtcd::Expire(*state_, old_lease);
  ASSERT_TRUE(WaitFor([&] { return (*r)->reregistrations() == 1; }));
  std::optional<EtcdKeyValue> kv = Stored();
  ASSERT_TRUE(kv.has_value());
  EXPECT_NE(kv->lease, old_lease);
  Result<Member> m = DecodeMember(kv->value);
  ASSERT_TRUE(m.ok());
  EXPECT_NE(m->epoch, old_epoch);
  EXPECT_NE(m->epoch, 0u);
  EXPECT_EQ(m->epoch, (*r)->epoch());
  EXPECT_TRUE((*r)->registered());
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSERT_EQ(new_epochs_.size(), 1u);
    EXPECT_EQ(new_epochs_[0], m->epoch);  // the store was dropped for the epoch registered
  }
}

TEST_F(NodeRegistrationTest, ALapseWhileEtcdIsDownRegistersAgainWhenItReturns) {
  auto r = Start();
  ASSERT_TRUE(r.ok());
  const uint64_t old_epoch = (*r)->epoch();
  SetDown(true);
  FakeEtcd::Expire(*state_, Stored()->lease);  // lapsed while the node could not tell
  const int tried = Attempts();
  ASSERT_TRUE(WaitFor([&] { return Attempts() > tried + 1; }));
  EXPECT_EQ((*r)->epoch(), old_epoch);  // it cannot know yet: nothing changes
  EXPECT_EQ(NewEpochCalls(), 0u);
  SetDown(false);
  ASSERT_TRUE(WaitFor([&] { return (*r)->reregistrations() == 1; }));
  ASSERT_TRUE(Stored().has_value());
  EXPECT_NE((*r)->epoch(), old_epoch);
  EXPECT_EQ(NewEpochCalls(), 1u);
}

// A lapse is one new epoch, however many attempts registering again takes: the owner's
// callback runs once, and every attempt registers that epoch. Before: each failed attempt took
// (and announced) another epoch, so a node dropped its store before every retry.
TEST_F(NodeRegistrationTest, ALapseTakesOneEpochHoweverManyAttemptsRegisteringTakes) {
  auto r = Start();
  ASSERT_TRUE(r.ok());
  const uint64_t old_epoch = (*r)->epoch();
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->grants_down = true;
  }
  FakeEtcd::Expire(*state_, Stored()->lease);
  auto grants = [&] {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->grants;
  };
  const int before = grants();
  ASSERT_TRUE(WaitFor([&] { return grants() >= before + 3; }));  // three failed attempts
  EXPECT_EQ(NewEpochCalls(), 1u);
  const uint64_t lapse_epoch = (*r)->epoch();
  EXPECT_NE(lapse_epoch, old_epoch);
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->grants_down = false;
  }
  ASSERT_TRUE(WaitFor([&] { return (*r)->reregistrations() == 1; }));
  EXPECT_EQ(NewEpochCalls(), 1u);
  EXPECT_EQ((*r)->epoch(), lapse_epoch);
  Result<Member> m = DecodeMember(Stored()->value);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->epoch, lapse_epoch);
}

}  // namespace
}  // namespace kvport::cluster
