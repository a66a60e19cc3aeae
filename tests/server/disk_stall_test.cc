// SPDX-License-Identifier: Apache-2.0
// A node whose disk stops answering (its writes, or its reads, held at a gate in the disk
// tier's file seam, as on a disk that stalls) keeps serving every call that does not need the
// disk, on the same I/O thread, while the calls that do wait: an overwrite of a key the disk
// holds is answered once its tombstone is durable, a read of a key only the disk holds once it
// is read. One I/O thread, so a call that held its thread would hold the other client too. A
// client that sends change after change without waiting for the answers is read no further
// once it has a bounded number waiting, so the disk tier's queue of tombstones stays bounded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kvport/client.h"
#include "kvport/server.h"
#include "resp_test_client.h"
#include "server/connection_budget.h"
#include "server_fixture.h"
#include "store/write_behind_disk.h"
#include "support/stalling_folder.h"

namespace kvport::testing {
namespace {

constexpr size_t kValueBytes = 1 << 20;

std::vector<char> Value(int seed) {
  std::vector<char> v(kValueBytes);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<char>(seed * 31 + i * 7 + (i >> 10));
  return v;
}

// Polls `condition` for at most 20 s (a bound on a broken node whose calls each time out).
bool Within20s(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

class DiskStallNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "kvport_disk_stall_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    store::SetFolderOpenerForTesting(
        [this](const std::string& dir) -> Result<std::unique_ptr<store::SegmentFolder>> {
          KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<store::SegmentFolder> real,
                                  store::OpenSegmentFolder(dir));
          return std::unique_ptr<store::SegmentFolder>(
              std::make_unique<store::testing::StallingFolder>(std::move(real), &writes_, &reads_));
        });
    ServerOptions options = SmallNodeOptions();  // 8 MiB of memory
    options.threads = 1;
    options.disk_dir = dir_;
    options.disk_capacity = 64 << 20;
    options.namespace_on_disk = {{"mem", false}};
    options.resp_listen = "127.0.0.1:0";
    server_ = StartNode(options);
    ASSERT_NE(server_, nullptr);
    for (auto* client : {&stalled_, &other_}) {
      *client = std::make_unique<Client>();
      InitOptions init;
      init.transport_type = 1;
      // The other client's calls fail (rather than wait) if the I/O thread is held.
      if (client == &other_) init.timeout = std::chrono::seconds(3);
      ASSERT_TRUE((*client)->Init("stall-test", server_->address(), init).ok());
    }
  }
  void TearDown() override {
    writes_.Open();
    reads_.Open();
    stalled_.reset();
    other_.reset();
    server_.reset();
    store::SetFolderOpenerForTesting(nullptr);
    std::filesystem::remove_all(dir_);
  }

  static Status Put(Client& client, const std::string& ns, const std::string& key,
                    const std::vector<char>& value) {
    IOBuffers buffers;
    buffers.Append(const_cast<char*>(value.data()), value.size());
    Result<BatchResult> put = client.MSet({key}, buffers, SetOptions{ns});
    if (!put.ok()) return put.status();
    if (put->codes[0] != KeyCode::kSuccess)
      return Status::Internal("the put of " + key + " failed");
    return Status::Ok();
  }
  // The value of (ns, key), or empty for anything but a hit.
  static std::vector<char> Get(Client& client, const std::string& ns, const std::string& key) {
    std::vector<char> out(kValueBytes);
    IOBuffers buffers;
    buffers.Append(out.data(), out.size());
    Result<GetResult> got = client.MGet({key}, GetOptions{ns}, buffers);
    if (!got.ok() || got->codes[0] != KeyCode::kSuccess) return {};
    out.resize(got->value_sizes[0]);
    return out;
  }
  // Puts eight other values in "ns": what memory held goes to the disk tier.
  void FillMemory(const std::string& prefix) {
    for (int i = 0; i < 8; ++i)
      ASSERT_TRUE(Put(*other_, "ns", prefix + std::to_string(i), Value(100 + i)).ok());
  }
  // Waits until the disk tier's writer has written everything queued (at most 30 s).
  void Drain() {
    ASSERT_TRUE(Within20s([&] { return server_->Stats().Get("disk_pending_bytes") == 0; }));
  }

  std::string dir_;
  store::testing::StallGate writes_;
  store::testing::StallGate reads_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> stalled_;  // its calls need the disk
  std::unique_ptr<Client> other_;    // its calls do not
};

TEST_F(DiskStallNodeTest, AStalledDiskWriteHoldsOnlyTheOverwriteThatNeedsIt) {
  ASSERT_TRUE(Put(*other_, "ns", "K", Value(1)).ok());
  FillMemory("filler");
  Drain();
  writes_.Close();
  FillMemory("more");  // evicted to disk: the writer stalls in the middle of their write
  ASSERT_TRUE(writes_.WaitForACall());

  std::atomic<bool> answered{false};
  Status overwrite;
  std::thread caller([&] {
    overwrite = Put(*stalled_, "ns", "K", Value(2));  // its old version is on disk
    answered = true;
  });
  // Visible at once (a read from the other client finds it) ...
  EXPECT_TRUE(Within20s([&] { return Get(*other_, "ns", "K") == Value(2); }));
  // ... and the I/O thread serves the other client's puts and gets, in a memory-only namespace
  // and of keys the disk does not hold.
  EXPECT_TRUE(Put(*other_, "mem", "M", Value(3)).ok());
  EXPECT_TRUE(Put(*other_, "ns", "fresh", Value(4)).ok());
  EXPECT_EQ(Get(*other_, "mem", "M"), Value(3));
  // The overwrite itself is answered only once it would survive a power loss.
  EXPECT_FALSE(answered.load());
  writes_.Open();
  caller.join();
  EXPECT_TRUE(overwrite.ok()) << overwrite.ToString();
  EXPECT_EQ(Get(*stalled_, "ns", "K"), Value(2));
}

TEST_F(DiskStallNodeTest, AStalledDiskReadHoldsOnlyTheGetThatNeedsIt) {
  ASSERT_TRUE(Put(*other_, "ns", "R", Value(5)).ok());
  FillMemory("filler");
  ASSERT_TRUE(Put(*other_, "mem", "M", Value(6)).ok());  // the most recently used
  Drain();
  reads_.Close();
  std::atomic<bool> answered{false};
  std::vector<char> read;
  std::thread caller([&] {
    read = Get(*stalled_, "ns", "R");  // only the disk holds it
    answered = true;
  });
  ASSERT_TRUE(reads_.WaitForACall());
  EXPECT_EQ(Get(*other_, "mem", "M"), Value(6));
  EXPECT_TRUE(Put(*other_, "mem", "M2", Value(7)).ok());
  EXPECT_FALSE(answered.load());
  reads_.Open();
  caller.join();
  EXPECT_EQ(read, Value(5));
}

TEST_F(DiskStallNodeTest, AStalledDiskReadHoldsOnlyTheRedisGetThatNeedsIt) {
  ASSERT_TRUE(Put(*other_, "ns", "R", Value(8)).ok());
  FillMemory("filler");
  Drain();
  RespTestClient stalled(server_->resp_port());
  RespTestClient other(server_->resp_port());
  for (RespTestClient* redis : {&stalled, &other}) {
    ASSERT_TRUE(redis->connected());
    ASSERT_EQ(redis->Call({"CLIENT", "NAMESPACE", "ns"}), "+OK");
  }
  reads_.Close();
  ASSERT_TRUE(stalled.Send({"GET", "R"}));  // only the disk holds it
  ASSERT_TRUE(reads_.WaitForACall());
  EXPECT_EQ(other.Call({"SET", "S", "small"}), "+OK");
  EXPECT_EQ(other.Call({"EXISTS", "S", "R"}), ":2");
  reads_.Open();
  const std::optional<std::string> read = stalled.ReadBulk();
  ASSERT_TRUE(read.has_value());
  const std::vector<char> expected = Value(8);
  EXPECT_TRUE(*read == std::string(expected.begin(), expected.end()));
}

TEST_F(DiskStallNodeTest, AClientThatDoesNotWaitForItsChangesIsReadNoFurther) {
  constexpr int kKeys = 3 * server::ConnectionBudget::kMaxHeldChanges;
  RespTestClient redis(server_->resp_port());
  ASSERT_TRUE(redis.connected());
  ASSERT_EQ(redis.Call({"CLIENT", "NAMESPACE", "ns"}), "+OK");
  for (int i = 0; i < kKeys; ++i)
    ASSERT_EQ(redis.Call({"SET", "k" + std::to_string(i), "old" + std::to_string(i)}), "+OK");
  FillMemory("filler");  // the small keys go to the disk
  Drain();
  ASSERT_GE(server_->Stats().Get("disk_objects"), static_cast<uint64_t>(kKeys));
  writes_.Close();
  FillMemory("more");  // the writer stalls in the middle of their write
  ASSERT_TRUE(writes_.WaitForACall());

  // Every overwrite ends a version the disk holds, so each waits for a tombstone; they all go
  // at once, and the client reads no answer.
  std::string pipeline;
  for (int i = 0; i < kKeys; ++i)
    pipeline += RespTestClient::Encode({"SET", "k" + std::to_string(i), "new" + std::to_string(i)});
  ASSERT_TRUE(redis.SendRaw(pipeline));
  ASSERT_TRUE(Within20s([&] { return server_->Stats().Get("paused_connections") == 1; }));
  const auto held = static_cast<uint64_t>(server::ConnectionBudget::kMaxHeldChanges);
  EXPECT_EQ(server_->Stats().Get("changes_waiting_for_disk"), held);
  EXPECT_EQ(server_->Stats().Get("disk_pending_tombstones"), held);
  // The other client is served meanwhile.
  EXPECT_TRUE(Put(*other_, "mem", "M", Value(9)).ok());

  writes_.Open();
  for (int i = 0; i < kKeys; ++i)
    ASSERT_EQ(redis.Read(), "+OK") << "answer " << i;
  EXPECT_EQ(server_->Stats().Get("changes_waiting_for_disk"), 0u);
  EXPECT_EQ(server_->Stats().Get("disk_pending_tombstones"), 0u);
  for (int i : {0, kKeys / 2, kKeys - 1}) {
    ASSERT_TRUE(redis.Send({"GET", "k" + std::to_string(i)}));
    EXPECT_EQ(redis.ReadBulk(), "new" + std::to_string(i));
  }
}

}  // namespace
}  // namespace kvport::testing
