// SPDX-License-Identifier: Apache-2.0
// EtcdClient's watch as one long-lived stream with progress notifications, against a real etcd
// that sends them every 100 ms (--experimental-watch-progress-notify-interval), through a
// TcpProxy that counts the connections the watch opens.
#include <gtest/gtest.h>

#include <string>

#include "cluster/etcd_client.h"
#include "etcd_process.h"
#include "etcd_test_util.h"
#include "tcp_proxy.h"
#include "watch_recorder.h"

namespace kvport::cluster {
namespace {

using kvport::testing::EtcdProcess;
using kvport::testing::EtcdProcessOptions;
using kvport::testing::TcpProxy;
using kvport::testing::WaitFor;
using kvport::testing::WatchRecorder;
using namespace std::chrono_literals;

constexpr auto kRequestTimeout = 3000ms;

class EtcdWatchStreamTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EtcdProcessOptions options;
    options.progress_notify_interval = "100ms";
    auto started = EtcdProcess::Start(options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    etcd_ = std::move(started).value().release();
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(etcd_, nullptr);
    auto opened = EtcdClient::Open({etcd_->endpoint()}, kRequestTimeout);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    writer_ = std::move(opened).value();
  }

  static inline EtcdProcess* etcd_ = nullptr;
  std::unique_ptr<EtcdClient> writer_;  // puts, straight to etcd
};

// Many changes, and quiet time far longer than the stream would be reopened after without
// progress notifications, all on the one connection the watch opened: nothing is reopened on a
// timer, and every change arrives while the stream stays open.
TEST_F(EtcdWatchStreamTest, OneStreamCarriesEveryEventAndProgress) {
  TcpProxy proxy(etcd_->port());
  auto opened = EtcdClient::Open({proxy.endpoint()}, kRequestTimeout);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EtcdClient& watcher = **opened;
  const std::string prefix = "ws/one/";
  auto start = writer_->RangePrefix(prefix);
  ASSERT_TRUE(start.ok()) << start.status().ToString();

  WatchRecorder watch;
  // 2 s without a message would mean a dead stream; etcd's progress every 100 ms keeps it alive.
  watch.Start(watcher, prefix, start->revision + 1, 2000ms);
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(writer_->Put(prefix + std::to_string(i), "v").ok());
    ASSERT_TRUE(WaitFor([&] { return watch.count() >= size_t(i + 1); })) << i;
  }
  // Quiet for at least 40 progress intervals (4 s): twice the silence bound.
  const uint64_t progress = watcher.watch_stats().progress_notifications;
  ASSERT_TRUE(
      WaitFor([&] { return watcher.watch_stats().progress_notifications >= progress + 40; }));
  ASSERT_TRUE(writer_->Put(prefix + "last", "v").ok());
  ASSERT_TRUE(WaitFor([&] { return watch.count() >= 41; }));

  EXPECT_EQ(proxy.relayed(), 1u);  // the watch's one connection
  const EtcdWatchStats stats = watcher.watch_stats();
  EXPECT_EQ(stats.streams_opened, 1u);
  EXPECT_EQ(stats.silent_reopens, 0u);
  EXPECT_TRUE(watch.Stop().ok());
  const auto events = watch.events();
  ASSERT_EQ(events.size(), 41u);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(events[size_t(i)].kv.key, prefix + std::to_string(i));
  }
  EXPECT_EQ(events[40].kv.key, prefix + "last");
}

// A stream whose peer stops sending without closing (the proxy freezes it: TCP keepalive would
// still be answered) is taken as dead once no progress notification came for max_silence, and
// reopened from the revision after the last one seen: the change made meanwhile arrives once.
TEST_F(EtcdWatchStreamTest, ASilentStreamIsReopenedFromTheLastRevision) {
  TcpProxy proxy(etcd_->port());
  auto opened = EtcdClient::Open({proxy.endpoint()}, kRequestTimeout);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EtcdClient& watcher = **opened;
  const std::string prefix = "ws/silent/";
  auto start = writer_->RangePrefix(prefix);
  ASSERT_TRUE(start.ok());

  WatchRecorder watch;
  watch.Start(watcher, prefix, start->revision + 1, 1000ms);
  ASSERT_TRUE(writer_->Put(prefix + "before", "1").ok());
  ASSERT_TRUE(WaitFor([&] { return watch.count() >= 1; }));
  // Progress came after the event: a reopen starts after the progress revision.
  const uint64_t progress = watcher.watch_stats().progress_notifications;
  ASSERT_TRUE(WaitFor([&] { return watcher.watch_stats().progress_notifications > progress; }));

  proxy.Freeze();
  ASSERT_TRUE(writer_->Put(prefix + "during", "2").ok());
  ASSERT_TRUE(WaitFor([&] { return watch.count() >= 2; }));
  EXPECT_GE(watcher.watch_stats().silent_reopens, 1u);
  EXPECT_EQ(proxy.relayed(), 2u);  // the frozen stream, then the reopened one
  ASSERT_TRUE(writer_->Put(prefix + "after", "3").ok());
  ASSERT_TRUE(WaitFor([&] { return watch.count() >= 3; }));
  EXPECT_TRUE(watch.Stop().ok());
  const auto events = watch.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kv.key, prefix + "before");
  EXPECT_EQ(events[1].kv.key, prefix + "during");
  EXPECT_EQ(events[2].kv.key, prefix + "after");
}

}  // namespace
}  // namespace kvport::cluster
