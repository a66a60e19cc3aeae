// SPDX-License-Identifier: Apache-2.0
// EtcdClient against a real etcd started by the test (etcd_process.h).
#include "cluster/etcd_client.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "etcd_process.h"
#include "etcd_test_util.h"
#include "tcp_proxy.h"
#include "watch_recorder.h"

namespace kvport::cluster {
namespace {

using kvport::testing::DeadEndpoint;
using kvport::testing::EtcdProcess;
using kvport::testing::TcpProxy;
using kvport::testing::WaitFor;
using kvport::testing::WatchRecorder;
using namespace std::chrono_literals;

constexpr auto kRequestTimeout = 3000ms;

// One etcd for the suite: tests use keys of their own, so they do not see each other.
class EtcdClientTest : public kvport::testing::SharedEtcdTest {
 protected:
  void SetUp() override {
    SharedEtcdTest::SetUp();
    if (HasFatalFailure()) return;
    auto opened = EtcdClient::Open({etcd_->endpoint()}, kRequestTimeout);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    client_ = std::move(opened).value();
  }

  std::unique_ptr<EtcdClient> client_;
};

TEST(EtcdClientOpen, RefusesMalformedEndpoints) {
  EXPECT_EQ(EtcdClient::Open({}, 1s).status().code(), StatusCode::kInvalidArgument);
  for (const char* bad : {"", "nohost", ":2379", "h:0", "h:99999"}) {
    auto opened = EtcdClient::Open({"127.0.0.1:2379", bad}, 1s);
    ASSERT_FALSE(opened.ok()) << bad;
    EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(opened.status().message().find("'" + std::string(bad) + "'"), std::string::npos)
        << opened.status().ToString();
  }
  auto ok = EtcdClient::Open({"127.0.0.1:2379", "http://10.0.0.1:22379"}, 1s);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->Describe(), "127.0.0.1:2379,10.0.0.1:22379");
}

TEST(EtcdKeys, Layout) {
  EXPECT_EQ(EtcdNodesPrefix("c1"), "/kvport/clusters/c1/nodes/");
  EXPECT_EQ(EtcdNodeKey("c1", "node-a"), "/kvport/clusters/c1/nodes/node-a");
}

TEST_F(EtcdClientTest, PutRangeDelete) {
  // The prefix ends in '/': "t/prd0" sorts right after the prefix's range ('/' + 1 == '0') and
  // must not be in it.
  const std::string prefix = "t/prd/";
  ASSERT_TRUE(client_->Put("t/prd0", "outside").ok());
  const std::string binary_value("\x00\xff\x01 bytes", 9);
  ASSERT_TRUE(client_->Put(prefix + "b", "two").ok());
  ASSERT_TRUE(client_->Put(prefix + "a", "one").ok());
  ASSERT_TRUE(client_->Put(prefix + "c\xff", binary_value).ok());

  auto range = client_->RangePrefix(prefix);
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  ASSERT_EQ(range->kvs.size(), 3u);
  EXPECT_EQ(range->kvs[0].key, prefix + "a");
  EXPECT_EQ(range->kvs[0].value, "one");
  EXPECT_EQ(range->kvs[1].key, prefix + "b");
  EXPECT_EQ(range->kvs[2].key, prefix + "c\xff");
  EXPECT_EQ(range->kvs[2].value, binary_value);
  EXPECT_EQ(range->kvs[0].lease, 0);
  EXPECT_GT(range->kvs[2].mod_revision, range->kvs[0].mod_revision);
  EXPECT_GE(range->revision, range->kvs[2].mod_revision);

  ASSERT_TRUE(client_->Delete(prefix + "a").ok());
  // Deleting what is not there is not an error (a node deregistering twice).
  ASSERT_TRUE(client_->Delete(prefix + "a").ok());
  range = client_->RangePrefix(prefix);
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  ASSERT_EQ(range->kvs.size(), 2u);
  EXPECT_EQ(range->kvs[0].key, prefix + "b");

  auto empty = client_->RangePrefix("t/nothing-here/");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->kvs.empty());
  EXPECT_GT(empty->revision, 0);
}

TEST_F(EtcdClientTest, LeaseGrantKeepAliveRevoke) {
  auto lease = client_->GrantLease(30s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_NE(*lease, 0);
  auto ttl = client_->TimeToLive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status().ToString();
  EXPECT_EQ(ttl->granted_ttl_seconds, 30);
  EXPECT_GT(ttl->ttl_seconds, 0);
  EXPECT_LE(ttl->ttl_seconds, 30);

  const std::string key = "t/lease/node";
  ASSERT_TRUE(client_->Put(key, "v", *lease).ok());
  auto range = client_->RangePrefix(key);
  ASSERT_TRUE(range.ok());
  ASSERT_EQ(range->kvs.size(), 1u);
  EXPECT_EQ(range->kvs[0].lease, *lease);

  auto renewed = client_->KeepAlive(*lease);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_GT(*renewed, 0);
  EXPECT_LE(*renewed, 30);

  ASSERT_TRUE(client_->RevokeLease(*lease).ok());
  range = client_->RangePrefix(key);
  ASSERT_TRUE(range.ok());
  EXPECT_TRUE(range->kvs.empty()) << "the key outlived its revoked lease";
  ttl = client_->TimeToLive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status().ToString();
  EXPECT_EQ(ttl->ttl_seconds, -1);
  EXPECT_EQ(client_->KeepAlive(*lease).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->RevokeLease(*lease).code(), StatusCode::kNotFound);
  // A put under a lease etcd does not have fails instead of writing an immortal key.
  EXPECT_EQ(client_->Put(key, "v", *lease).code(), StatusCode::kNotFound);
}

TEST_F(EtcdClientTest, LapsedLeaseIsGone) {
  auto lease = client_->GrantLease(1s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  const std::string key = "t/lapse/node";
  ASSERT_TRUE(client_->Put(key, "v", *lease).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto ttl = client_->TimeToLive(*lease);
    return ttl.ok() && ttl->ttl_seconds == -1;
  })) << "a 1 s lease never lapsed";
  EXPECT_EQ(client_->KeepAlive(*lease).status().code(), StatusCode::kNotFound);
  // etcd deletes the lease's keys as it expires it.
  ASSERT_TRUE(WaitFor([&] {
    auto range = client_->RangePrefix(key);
    return range.ok() && range->kvs.empty();
  }));
}

TEST_F(EtcdClientTest, WatchSeesPutsAndDeletesInOrder) {
  const std::string prefix = "t/watch/";
  auto start = client_->RangePrefix(prefix);
  ASSERT_TRUE(start.ok());
  WatchRecorder live;
  live.Start(*client_, prefix, start->revision + 1);

  ASSERT_TRUE(client_->Put(prefix + "a", "1").ok());
  ASSERT_TRUE(client_->Put("t/watchother", "not mine").ok());
  ASSERT_TRUE(client_->Put(prefix + "b", "2").ok());
  ASSERT_TRUE(client_->Delete(prefix + "a").ok());
  ASSERT_TRUE(client_->Put(prefix + "a", "3").ok());
  ASSERT_TRUE(WaitFor([&] { return live.count() >= 4; })) << live.count() << " events";
  EXPECT_TRUE(live.Stop().ok());

  auto check = [&](const std::vector<EtcdEvent>& events) {
    ASSERT_EQ(events.size(), 4u);
    EXPECT_EQ(events[0].type, EtcdEvent::Type::kPut);
    EXPECT_EQ(events[0].kv.key, prefix + "a");
    EXPECT_EQ(events[0].kv.value, "1");
    EXPECT_EQ(events[1].type, EtcdEvent::Type::kPut);
    EXPECT_EQ(events[1].kv.key, prefix + "b");
    EXPECT_EQ(events[2].type, EtcdEvent::Type::kDelete);
    EXPECT_EQ(events[2].kv.key, prefix + "a");
    EXPECT_EQ(events[3].type, EtcdEvent::Type::kPut);
    EXPECT_EQ(events[3].kv.value, "3");
    for (size_t i = 1; i < events.size(); ++i) {
      EXPECT_GT(events[i].kv.mod_revision, events[i - 1].kv.mod_revision);
    }
  };
  check(live.events());

  // The same history, replayed by a watch started after it from the revision before it.
  WatchRecorder replay;
  replay.Start(*client_, prefix, start->revision + 1);
  ASSERT_TRUE(WaitFor([&] { return replay.count() >= 4; }));
  EXPECT_TRUE(replay.Stop().ok());
  check(replay.events());
}

// How many watch streams etcd has started (its grpc_server_started_total for Watch); -1 when
// the metric is missing.
int64_t WatchStreamsServed(const std::string& endpoint) {
  httplib::Client http(endpoint.substr(0, endpoint.rfind(':')),
                       std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
  auto page = http.Get("/metrics");
  if (!page || page->status != 200) return -1;
  const std::string& body = page->body;
  size_t line = 0;
  while (line < body.size()) {
    size_t end = body.find('\n', line);
    if (end == std::string::npos) end = body.size();
    std::string_view text(body.data() + line, end - line);
    if (text.starts_with("grpc_server_started_total{") &&
        text.find("grpc_method=\"Watch\"") != std::string_view::npos) {
      return std::stoll(std::string(text.substr(text.rfind(' ') + 1)));
    }
    line = end + 1;
  }
  return -1;
}

TEST_F(EtcdClientTest, WatchReopensASilentStreamFromTheLastRevision) {
  auto WatchStreamsServed = [] { return kvport::cluster::WatchStreamsServed(etcd_->endpoint()); };
  // This etcd sends progress notifications every 10 minutes: with a max_silence of 20 ms the
  // stream is taken as dead and reopened again and again while quiet, and a change after
  // several reopens is still seen, once.
  const std::string prefix = "t/quiet/";
  auto start = client_->RangePrefix(prefix);
  ASSERT_TRUE(start.ok());
  WatchRecorder watch;
  watch.Start(*client_, prefix, start->revision + 1, 20ms);
  ASSERT_TRUE(client_->Put(prefix + "x", "1").ok());
  ASSERT_TRUE(WaitFor([&] { return watch.count() >= 1; }));
  // Let the watch go through several reopen cycles: etcd counts the watch streams it served.
  const int64_t streams = WatchStreamsServed();
  ASSERT_GE(streams, 0) << "etcd's /metrics has no watch stream counter";
  ASSERT_TRUE(client_->Put("t/quietother", "not mine").ok());
  ASSERT_TRUE(WaitFor([&] { return WatchStreamsServed() >= streams + 3; }));
  ASSERT_TRUE(client_->Put(prefix + "y", "2").ok());
  ASSERT_TRUE(WaitFor([&] { return watch.count() >= 2; }));
  EXPECT_TRUE(watch.Stop().ok());
  auto events = watch.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kv.key, prefix + "x");
  EXPECT_EQ(events[1].kv.key, prefix + "y");
}

TEST_F(EtcdClientTest, WatchStopIsHonoured) {
  auto start = client_->RangePrefix("t/stop/");
  ASSERT_TRUE(start.ok());
  // Stopped while the stream is open after an event; Stop() bounds the wait and fails the test
  // if the watch never returns.
  WatchRecorder busy;
  busy.Start(*client_, "t/stop/", start->revision + 1, 50ms);
  ASSERT_TRUE(client_->Put("t/stop/k", "v").ok());
  ASSERT_TRUE(WaitFor([&] { return busy.count() >= 1; }));
  Status stopped = busy.Stop();
  EXPECT_TRUE(stopped.ok()) << stopped.ToString();

  // Stopped while etcd has sent nothing but the creation ("from now": revision 0).
  WatchRecorder quiet;
  quiet.Start(*client_, "t/stop-quiet/", 0, 50ms);
  stopped = quiet.Stop();
  EXPECT_TRUE(stopped.ok()) << stopped.ToString();
  EXPECT_EQ(quiet.count(), 0u);
}

// A watch with a silence bound far beyond the recorder's 20 s bound still returns at once
// when canceled: what lets a client with a quiet watch shut down without waiting.
TEST_F(EtcdClientTest, CancelWatchEndsAQuietWatchAtOnce) {
  auto own = EtcdClient::Open({etcd_->endpoint()}, kRequestTimeout);
  ASSERT_TRUE(own.ok());
  auto start = client_->RangePrefix("t/cancel/");
  ASSERT_TRUE(start.ok());
  WatchRecorder quiet;
  quiet.Start(**own, "t/cancel/", start->revision + 1, 600s);
  ASSERT_TRUE(client_->Put("t/cancel/k", "v").ok());
  ASSERT_TRUE(WaitFor([&] { return quiet.count() >= 1; }));  // the stream is open
  (*own)->CancelWatch();
  Status stopped = quiet.Stop();
  EXPECT_TRUE(stopped.ok()) << stopped.ToString();
  // A watch started after the cancel returns at once as well.
  WatchRecorder after;
  after.Start(**own, "t/cancel/", 0, 600s);
  EXPECT_TRUE(after.Stop().ok());
}

TEST_F(EtcdClientTest, WatchAfterCompactionIsNotFound) {
  const std::string prefix = "t/compact/";
  ASSERT_TRUE(client_->Put(prefix + "k", "1").ok());
  auto first = client_->RangePrefix(prefix);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(client_->Put(prefix + "k", "2").ok());
  auto now = client_->RangePrefix(prefix);
  ASSERT_TRUE(now.ok());

  // Compaction is not part of EtcdClient (kvport never compacts): call the gateway directly.
  const std::string& endpoint = etcd_->endpoint();
  httplib::Client http(endpoint.substr(0, endpoint.rfind(':')),
                       std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
  auto compacted =
      http.Post("/v3/kv/compaction", "{\"revision\":\"" + std::to_string(now->revision) + "\"}",
                "application/json");
  ASSERT_TRUE(compacted) << httplib::to_string(compacted.error());
  ASSERT_EQ(compacted->status, 200) << compacted->body;

  WatchRecorder watch;
  watch.Start(*client_, prefix, first->revision);
  Status ended = watch.Wait();
  EXPECT_EQ(ended.code(), StatusCode::kNotFound) << ended.ToString();
  EXPECT_NE(ended.message().find("compacted"), std::string::npos) << ended.ToString();
}

TEST_F(EtcdClientTest, FailsOverFromADeadEndpoint) {
  const std::string dead = DeadEndpoint();
  auto opened = EtcdClient::Open({dead, etcd_->endpoint()}, kRequestTimeout);
  ASSERT_TRUE(opened.ok());
  EtcdClient& client = **opened;
  ASSERT_TRUE(client.Put("t/failover/k", "v").ok());
  auto range = client.RangePrefix("t/failover/");
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  ASSERT_EQ(range->kvs.size(), 1u);
  auto lease = client.GrantLease(10s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_TRUE(client.KeepAlive(*lease).ok());
  EXPECT_TRUE(client.RevokeLease(*lease).ok());

  // The watch fails over too.
  WatchRecorder watch;
  watch.Start(client, "t/failover/", range->revision + 1);
  ASSERT_TRUE(client.Put("t/failover/k2", "v").ok());
  ASSERT_TRUE(WaitFor([&] { return watch.count() >= 1; }));
  EXPECT_TRUE(watch.Stop().ok());
}

// Unary calls (lease renewals every few seconds above all) share one kept-alive connection per
// endpoint instead of opening one each; a connection that breaks is replaced at the next call.
TEST_F(EtcdClientTest, UnaryCallsShareOneKeptAliveConnection) {
  TcpProxy proxy(etcd_->port());
  auto opened = EtcdClient::Open({proxy.endpoint()}, kRequestTimeout);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EtcdClient& client = **opened;
  Result<int64_t> lease = client.GrantLease(30s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  for (int i = 0; i < 20; ++i) {
    const std::string key = "kept/" + std::to_string(i);
    ASSERT_TRUE(client.Put(key, "v", *lease).ok());
    ASSERT_TRUE(client.KeepAlive(*lease).ok());
    Result<cluster::EtcdRange> range = client.RangePrefix("kept/");
    ASSERT_TRUE(range.ok()) << range.status().ToString();
    EXPECT_EQ(range->kvs.size(), static_cast<size_t>(i + 1));
  }
  EXPECT_EQ(client.KeepAlive(0x7eadbeef).status().code(), StatusCode::kNotFound);  // an error
  EXPECT_EQ(proxy.relayed(), 1u);  // 62 calls, one connection

  proxy.Cut();  // the kept connection is closed under the client
  EXPECT_EQ(client.KeepAlive(*lease).status().code(), StatusCode::kUnavailable);
  proxy.Heal();
  EXPECT_TRUE(client.KeepAlive(*lease).ok());
  EXPECT_TRUE(client.RevokeLease(*lease).ok());
  EXPECT_EQ(proxy.relayed(), 2u);
}

TEST_F(EtcdClientTest, ErrorsAreTypedNotUnavailable) {
  // etcd's own refusals are passed through as such, not mistaken for etcd being down.
  EXPECT_EQ(client_->KeepAlive(0x7eadbeef).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->RevokeLease(0x7eadbeef).code(), StatusCode::kNotFound);
}

// Something posing as etcd that answers without end: the client keeps at most 64 MiB of one
// answer or one watch message, and refuses the rest.
TEST(EtcdClientHostile, AnOversizedAnswerOrWatchMessageIsRefused) {
  httplib::Server fake;
  const std::string huge(65u << 20, 'x');  // no newline: one endless message
  fake.Post("/v3/kv/range", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(huge, "application/json");
  });
  fake.Post("/v3/watch", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(huge, "application/json");
  });
  const int port = fake.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { fake.listen_after_bind(); });
  ASSERT_TRUE(WaitFor([&] { return fake.is_running(); }));

  auto client = EtcdClient::Open({"127.0.0.1:" + std::to_string(port)}, 10s);
  ASSERT_TRUE(client.ok());
  Result<cluster::EtcdRange> range = (*client)->RangePrefix("p/");
  EXPECT_EQ(range.status().code(), StatusCode::kUnavailable) << range.status().ToString();
  EXPECT_NE(range.status().message().find("more than 64 MiB"), std::string::npos)
      << range.status().ToString();

  std::atomic<bool> stop{false};
  Status watched = (*client)->Watch(
      "p/", 1, [](const std::vector<EtcdEvent>&) {}, stop, 10s);
  EXPECT_EQ(watched.code(), StatusCode::kTooLarge) << watched.ToString();

  fake.stop();
  serving.join();
}

TEST(EtcdClientDown, UnavailableNamingTheEndpoints) {
  auto etcd = EtcdProcess::Start();
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  const std::string dead = DeadEndpoint();
  auto opened = EtcdClient::Open({(*etcd)->endpoint(), dead}, 2000ms);
  ASSERT_TRUE(opened.ok());
  EtcdClient& client = **opened;
  ASSERT_TRUE(client.Put("t/down/k", "v").ok());
  ASSERT_TRUE((*etcd)->Stop().ok());

  Status put = client.Put("t/down/k", "v");
  EXPECT_EQ(put.code(), StatusCode::kUnavailable) << put.ToString();
  EXPECT_NE(put.message().find((*etcd)->endpoint()), std::string::npos) << put.ToString();
  EXPECT_NE(put.message().find(dead), std::string::npos) << put.ToString();
  EXPECT_EQ(client.RangePrefix("t/down/").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(client.GrantLease(5s).status().code(), StatusCode::kUnavailable);

  std::atomic<bool> stop{false};
  Status watched = client.Watch(
      "t/down/", 1, [](const std::vector<EtcdEvent>&) {}, stop, 100ms);
  EXPECT_EQ(watched.code(), StatusCode::kUnavailable) << watched.ToString();

  // Back on the same port with the same data.
  ASSERT_TRUE((*etcd)->Restart().ok());
  auto range = client.RangePrefix("t/down/");
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  ASSERT_EQ(range->kvs.size(), 1u);
}

TEST(EtcdClientDown, WatchReturnsUnavailableWhenEtcdStopsMidStream) {
  auto etcd = EtcdProcess::Start();
  ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
  auto opened = EtcdClient::Open({(*etcd)->endpoint()}, 2000ms);
  ASSERT_TRUE(opened.ok());
  WatchRecorder watch;
  watch.Start(**opened, "t/mid/", 1, 100ms);
  ASSERT_TRUE((*opened)->Put("t/mid/k", "v").ok());
  ASSERT_TRUE(WaitFor([&] { return watch.count() >= 1; }));
  ASSERT_TRUE((*etcd)->Stop().ok());
  Status ended = watch.Wait();
  EXPECT_EQ(ended.code(), StatusCode::kUnavailable) << ended.ToString();
}

}  // namespace
}  // namespace kvport::cluster
