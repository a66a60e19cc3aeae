// SPDX-License-Identifier: Apache-2.0
// `kvport serve --disk` as a real process (labelled needs-exec): 512 MiB through 64 MiB of
// memory and read back bytes-equal with the process's memory bounded, and kill -9 in the middle
// of a write storm, twenty times, with every acknowledged key either the right bytes or a miss
// after each restart (docs/store.md, "The disk tier").
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kvport/client.h"
#include "support/cli_run.h"
#include "support/serve_process.h"

namespace kvport::testing {
namespace {

namespace fs = std::filesystem;

// The value stored under `key`: its length and bytes follow from the key alone, so a reader
// knows what is right without keeping the values.
std::vector<char> ValueOf(const std::string& key, size_t base_bytes) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the key seeds the bytes
  for (char c : key)
    h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  std::vector<char> value(base_bytes + (h % 4) * 4096);
  uint64_t x = h | 1;
  for (size_t i = 0; i < value.size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    for (size_t j = 0; j < 8 && i + j < value.size(); ++j)
      value[i + j] = static_cast<char>(x >> (8 * j));
  }
  return value;
}

// Peak resident memory of process `pid` (VmHWM), in bytes; 0 when unreadable.
uint64_t PeakRss(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

class DiskProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kvport-disk-process-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    client_.reset();
    node_.reset();
    fs::remove_all(dir_);
  }

  // Starts `kvport serve` over dir_/disk and connects a client to it.
  void StartNode(const std::string& capacity, const std::string& disk_capacity) {
    client_.reset();
    node_ = std::make_unique<ServeProcess>(
        KVPORT_BINARY,
        std::vector<std::string>{"serve", "--listen", "127.0.0.1:0", "--unix-socket", "",
                                 "--threads", "2", "--capacity", capacity, "--disk",
                                 (dir_ / "disk").string(), "--disk-capacity", disk_capacity},
        dir_ / "err");
    const std::string address = node_->WaitForLine("kvport: serving on ");
    ASSERT_FALSE(address.empty()) << Slurp(dir_ / "err");
    client_ = std::make_unique<Client>();
    InitOptions init;
    init.transport_type = 1;
    ASSERT_TRUE(client_->Init("disk-process", address.substr(0, address.find(' ')), init).ok());
  }

  uint64_t Stat(const char* name) {
    Result<NodeStats> stats = client_->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return stats.ok() ? stats->Get(name) : 0;
  }

  // Waits (at most 60 s: a bound on a broken node, not an expectation) until the node's disk
  // writer has written everything evicted so far.
  void WaitForDiskWriter() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (Stat("disk_pending_bytes") != 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    ASSERT_EQ(Stat("disk_pending_bytes"), 0u);
  }

  // MSET of `keys` with their values; the codes.
  std::vector<KeyCode> Put(const std::vector<std::string>& keys, size_t base_bytes) {
    std::vector<std::vector<char>> values;
    IOBuffers buffers;
    for (const std::string& key : keys)
      values.push_back(ValueOf(key, base_bytes));
    for (std::vector<char>& v : values)
      buffers.Append(v.data(), v.size());
    Result<BatchResult> put = client_->MSet(keys, buffers, SetOptions{"kv"});
    if (!put.ok()) return std::vector<KeyCode>(keys.size(), KeyCode::kUnavailable);
    return put->codes;
  }

  // A get of `key`: kSuccess only with exactly its right bytes (a wrong byte fails the test).
  KeyCode CheckedGet(const std::string& key, size_t base_bytes) {
    const std::vector<char> expected = ValueOf(key, base_bytes);
    std::vector<char> out(expected.size() + 4096);
    IOBuffers buffers;
    buffers.Append(out.data(), out.size());
    Result<GetResult> got = client_->MGet({key}, GetOptions{"kv"}, buffers);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok()) return KeyCode::kUnavailable;
    if (got->codes[0] != KeyCode::kSuccess) return got->codes[0];
    out.resize(got->value_sizes[0]);
    EXPECT_TRUE(out == expected) << key << ": wrong bytes served";
    return KeyCode::kSuccess;
  }

  fs::path dir_;
  std::unique_ptr<ServeProcess> node_;
  std::unique_ptr<Client> client_;
};

TEST_F(DiskProcessTest, HalfAGigabyteThroughSixtyFourMegabytesOfMemory) {
  StartNode("64MiB", "1GiB");
  constexpr int kValues = 512;  // of 1 MiB (and a few KiB): 512 MiB and more
  constexpr size_t kValueBytes = 1 << 20;
  for (int i = 0; i < kValues; i += 16) {
    std::vector<std::string> keys;
    for (int j = i; j < i + 16; ++j)
      keys.push_back("big-" + std::to_string(j));
    for (KeyCode code : Put(keys, kValueBytes))
      ASSERT_EQ(code, KeyCode::kSuccess);
    // The writer's queue holds 64 MiB: a client faster than the disk would have evictions
    // dropped (disk_queue_drops), which this test is not about.
    if (i % 32 == 16) WaitForDiskWriter();
  }
  EXPECT_EQ(Stat("disk_queue_drops"), 0u);
  EXPECT_LE(Stat("used_bytes"), uint64_t{64} << 20);
  const uint64_t on_disk = Stat("disk_objects");
  EXPECT_GE(on_disk, uint64_t{kValues} - 64);  // all but what memory holds
  for (int i = 0; i < kValues; ++i) {
    ASSERT_EQ(CheckedGet("big-" + std::to_string(i), kValueBytes), KeyCode::kSuccess) << i;
    if (i % 32 == 31) WaitForDiskWriter();  // each promotion evicts another object to disk
  }
  EXPECT_GE(Stat("disk_hits"), on_disk);
  const uint64_t peak = PeakRss(node_->pid());
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizers' own memory (shadow, quarantine) is not the node's: reported, not bounded.
  std::printf("peak RSS of the node under a sanitizer: %llu MiB\n",
              static_cast<unsigned long long>(peak >> 20));
#else
  std::printf("peak RSS of the node: %llu MiB\n", static_cast<unsigned long long>(peak >> 20));
  // 64 MiB of arena, at most 64 MiB waiting for the writer, the index, threads and buffers:
  // far below the 512 MiB that went through.
  EXPECT_GT(peak, 0u);
  EXPECT_LT(peak, uint64_t{256} << 20) << "peak RSS " << (peak >> 20) << " MiB";
#endif
  EXPECT_EQ(node_->Terminate(), 0) << Slurp(dir_ / "err");
}

TEST_F(DiskProcessTest, KillNineMidStormNeverServesWrongBytes) {
  constexpr int kRounds = 20;
  constexpr size_t kValueBytes = 96 << 10;
  std::mt19937 random(20261205);
  std::vector<std::string> acknowledged;  // every key a node answered SUCCESS for, all rounds
  uint64_t hits_after_kills = 0;
  std::vector<std::string> acked_last_round;
  for (int round = 0; round < kRounds; ++round) {
    StartNode("8MiB", "64MiB");
    // The keys acknowledged before the last kill, and a sample of the older ones: each a hit
    // with the right bytes, or a miss (all of them are checked at the end).
    std::vector<std::string> checked = acked_last_round;
    for (int i = 0; i < 32 && !acknowledged.empty(); ++i)
      checked.push_back(acknowledged[random() % acknowledged.size()]);
    for (const std::string& key : checked) {
      const KeyCode code = CheckedGet(key, kValueBytes);
      ASSERT_TRUE(code == KeyCode::kSuccess || code == KeyCode::kKeyNotExist)
          << key << ": " << static_cast<int>(code);
      if (code == KeyCode::kSuccess) ++hits_after_kills;
    }
    // The storm: a writer thread puts batches of fresh keys until the node is gone; the kill
    // comes after a random number of acknowledged batches, while the writer is mid-request.
    const int kill_after = std::uniform_int_distribution<int>(20, 80)(random);
    std::atomic<int> batches{0};
    std::vector<std::string> acked_this_round;
    std::thread writer([&] {
      for (int b = 0;; ++b) {
        std::vector<std::string> keys;
        for (int k = 0; k < 4; ++k)
          keys.push_back("r" + std::to_string(round) + "-" + std::to_string(b) + "-" +
                         std::to_string(k));
        const std::vector<KeyCode> codes = Put(keys, kValueBytes);
        bool any = false;
        for (size_t k = 0; k < keys.size(); ++k) {
          if (codes[k] == KeyCode::kSuccess) {
            acked_this_round.push_back(keys[k]);
            any = true;
          }
        }
        if (!any) return;  // the node is gone
        batches.fetch_add(1, std::memory_order_release);
      }
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (batches.load(std::memory_order_acquire) < kill_after &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    node_->Kill();
    writer.join();
    ASSERT_GE(batches.load(), kill_after) << Slurp(dir_ / "err");
    acknowledged.insert(acknowledged.end(), acked_this_round.begin(), acked_this_round.end());
    acked_last_round = std::move(acked_this_round);
  }
  StartNode("8MiB", "64MiB");
  for (const std::string& key : acknowledged) {
    const KeyCode code = CheckedGet(key, kValueBytes);
    ASSERT_TRUE(code == KeyCode::kSuccess || code == KeyCode::kKeyNotExist) << key;
    if (code == KeyCode::kSuccess) ++hits_after_kills;
  }
  std::printf("%zu keys acknowledged in %d rounds; %llu hits with the right bytes after kills\n",
              acknowledged.size(), kRounds, static_cast<unsigned long long>(hits_after_kills));
  // What was evicted and written before a kill comes back: the disk tier survived the kills.
  EXPECT_GT(hits_after_kills, 0u);
  EXPECT_EQ(node_->Terminate(), 0) << Slurp(dir_ / "err");
}

}  // namespace
}  // namespace kvport::testing
