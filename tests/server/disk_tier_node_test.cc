// SPDX-License-Identifier: Apache-2.0
// A node with a disk tier (ServerOptions::disk_dir): objects evicted from its 8 MiB of memory
// are written to disk and read back on a miss, exists sees both tiers, deletes and overwrites
// reach the disk, and a restarted node finds what was on disk (never a wrong byte).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kvport/client.h"
#include "kvport/server.h"
#include "resp_test_client.h"
#include "server/node_id_file.h"
#include "server_fixture.h"

namespace kvport::testing {
namespace {

std::vector<char> Value(int seed, size_t n) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>(seed * 31 + i * 7 + (i >> 10));
  return v;
}

class DiskTierNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "kvport_disk_node_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // (Re)starts the node over the same folder, on a new port, with a client of its own;
  // `adjust` changes its options first.
  void Start(const std::function<void(ServerOptions&)>& adjust = {}) {
    client_.reset();
    if (server_ != nullptr) server_->Stop();
    server_.reset();
    ServerOptions options = SmallNodeOptions();  // 8 MiB of memory
    options.disk_dir = dir_;
    options.disk_capacity = 64 << 20;
    if (adjust) adjust(options);
    server_ = StartNode(options);
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<Client>();
    InitOptions init;
    init.transport_type = 1;
    ASSERT_TRUE(client_->Init("disk-test", server_->address(), init).ok());
  }

  void Put(const std::string& key, const std::vector<char>& value) {
    IOBuffers buffers;
    buffers.Append(const_cast<char*>(value.data()), value.size());
    Result<BatchResult> put = client_->MSet({key}, buffers, SetOptions{"ns"});
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    ASSERT_EQ(put->codes[0], KeyCode::kSuccess) << key;
  }

  // The value under `key`, or the key's code when it is not a hit.
  std::pair<KeyCode, std::vector<char>> Get(const std::string& key, size_t capacity = 1 << 20) {
    std::vector<char> out(capacity);
    IOBuffers buffers;
    buffers.Append(out.data(), out.size());
    Result<GetResult> got = client_->MGet({key}, GetOptions{"ns"}, buffers);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok()) return {KeyCode::kUnavailable, {}};
    out.resize(got->codes[0] == KeyCode::kSuccess ? got->value_sizes[0] : 0);
    return {got->codes[0], std::move(out)};
  }

  uint64_t Stat(const char* name) { return server_->Stats().Get(name); }
  // disk_writes once the disk tier's writer has written everything queued (it writes on a
  // thread of its own: right after a put, its evictions may still be on their way). Waits at
  // most 30 s: a bound on a broken node, not an expectation.
  uint64_t DiskWritesWhenIdle() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (Stat("disk_pending_bytes") != 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    return Stat("disk_writes");
  }

  std::string dir_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(DiskTierNodeTest, WhatMemoryEvictsIsReadBackFromDisk) {
  Start();
  // 32 MiB of values into 8 MiB of memory.
  for (int i = 0; i < 32; ++i)
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  EXPECT_LE(Stat("used_bytes"), uint64_t{8} << 20);
  EXPECT_GT(Stat("evictions"), 0u);
  for (int i = 0; i < 32; ++i) {
    auto [code, value] = Get("k" + std::to_string(i));
    ASSERT_EQ(code, KeyCode::kSuccess) << i;
    EXPECT_EQ(value, Value(i, 1 << 20)) << i;
  }
  EXPECT_GT(Stat("disk_hits"), 0u);
  Result<BatchResult> exists = client_->MExist({"k0", "k31", "nothing"}, ExistOptions{"ns"});
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(exists->codes,
            (std::vector<KeyCode>{KeyCode::kSuccess, KeyCode::kSuccess, KeyCode::kKeyNotExist}));
}

TEST_F(DiskTierNodeTest, DeletesAndOverwritesReachTheDisk) {
  Start();
  Put("old", Value(1, 1 << 20));
  Put("gone", Value(2, 1 << 20));
  for (int i = 0; i < 16; ++i)  // both out of memory
    Put("fill" + std::to_string(i), Value(100 + i, 1 << 20));
  Put("old", Value(3, 300 << 10));  // the new value, in memory
  Result<BatchResult> deleted = client_->MDel({"gone"}, DelOptions{"ns"});
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->codes[0], KeyCode::kSuccess);  // it was on disk only
  for (int i = 16; i < 32; ++i)                     // the new value out of memory too
    Put("fill" + std::to_string(i), Value(100 + i, 1 << 20));
  EXPECT_EQ(Get("old").second, Value(3, 300 << 10));
  EXPECT_EQ(Get("gone").first, KeyCode::kKeyNotExist);
  Start();  // and after a restart
  EXPECT_EQ(Get("gone").first, KeyCode::kKeyNotExist);
  auto [code, value] = Get("old");
  if (code == KeyCode::kSuccess) {
    EXPECT_EQ(value, Value(3, 300 << 10));
  }
}

TEST_F(DiskTierNodeTest, ARestartedNodeFindsWhatWasOnDisk) {
  auto no_stop_flush = [](ServerOptions& o) { o.disk_stop_flush = std::chrono::seconds(0); };
  Start(no_stop_flush);
  for (int i = 0; i < 24; ++i)
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  Start(no_stop_flush);  // Stop writes what the disk tier still had queued; memory is gone
  EXPECT_GT(Stat("disk_restored"), 0u);
  int hits = 0;
  for (int i = 0; i < 24; ++i) {
    auto [code, value] = Get("k" + std::to_string(i));
    if (code != KeyCode::kSuccess) {
      EXPECT_EQ(code, KeyCode::kKeyNotExist) << i;
      continue;
    }
    EXPECT_EQ(value, Value(i, 1 << 20)) << i;  // a hit is never wrong bytes
    ++hits;
  }
  // Everything but what was still in memory at the stop (at most 8 MiB of it).
  EXPECT_GE(hits, 16);
  EXPECT_LT(hits, 24);
  EXPECT_EQ(Get("k0").second, Value(0, 1 << 20));  // evicted first, on disk for sure
}

TEST_F(DiskTierNodeTest, AnyNamespaceCallsSeeTheDiskToo) {
  Start();
  for (int i = 0; i < 24; ++i)  // k0.. out of memory, on disk
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  ASSERT_EQ(Get("k0").first, KeyCode::kSuccess);  // on disk, read back and in memory again
  for (int i = 24; i < 40; ++i)                   // out of memory again
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  // What LMCache's EIC connector does through `eic` without a namespace: probe, read, delete
  // in any namespace.
  ExistOptions any_exist;
  any_exist.any_namespace = true;
  Result<BatchResult> exists = client_->MExist({"k0", "k1", "nothing"}, any_exist);
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(exists->codes,
            (std::vector<KeyCode>{KeyCode::kSuccess, KeyCode::kSuccess, KeyCode::kKeyNotExist}));
  std::vector<char> out(1 << 20);
  IOBuffers buffers;
  buffers.Append(out.data(), out.size());
  GetOptions any_get;
  any_get.any_namespace = true;
  Result<GetResult> got = client_->MGet({"k1"}, any_get, buffers);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->codes[0], KeyCode::kSuccess);
  EXPECT_EQ(out, Value(1, 1 << 20));
  DelOptions any_del;
  any_del.any_namespace = true;
  Result<BatchResult> deleted = client_->MDel({"k2", "k0"}, any_del);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->codes, (std::vector<KeyCode>{KeyCode::kSuccess, KeyCode::kSuccess}));
  for (int restart = 0; restart < 2; ++restart) {
    EXPECT_EQ(Get("k2").first, KeyCode::kKeyNotExist);
    EXPECT_EQ(Get("k0").first, KeyCode::kKeyNotExist);
    EXPECT_EQ(Get("k3").second, Value(3, 1 << 20));
    Start();
  }
}

TEST_F(DiskTierNodeTest, ABatchedGetReadsItsDiskObjectsTogether) {
  Start();
  for (int i = 0; i < 24; ++i)  // k0..k15 out of memory
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  // On disk, not in the writer's queue (whose objects a get copies, one by one).
  DiskWritesWhenIdle();
  // Two batches of four (the node pins at most 4 MiB at once: max_pinned_bytes).
  for (const int first : {0, 4}) {
    constexpr int batch = 4;
    std::vector<std::string> keys;
    std::vector<std::vector<char>> out(batch, std::vector<char>(1 << 20));
    IOBuffers buffers;
    for (int i = 0; i < batch; ++i) {
      keys.push_back("k" + std::to_string(first + i));
      buffers.Append(out[i].data(), out[i].size());
    }
    const uint64_t before = Stat("disk_batch_reads");
    Result<GetResult> got = client_->MGet(keys, GetOptions{"ns"}, buffers);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (int i = 0; i < batch; ++i) {
      ASSERT_EQ(got->codes[i], KeyCode::kSuccess) << keys[i];
      EXPECT_EQ(out[i], Value(first + i, 1 << 20)) << keys[i];
    }
    EXPECT_GE(Stat("disk_batch_reads"), before + 2) << "read together, not one by one";
  }
}

TEST_F(DiskTierNodeTest, AnObjectReadBackFromDiskIsNotWrittenAgainWhenEvicted) {
  Start();
  for (int i = 0; i < 24; ++i)
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  for (int i = 0; i < 24; ++i)  // every object goes through memory and out again
    ASSERT_EQ(Get("k" + std::to_string(i)).second, Value(i, 1 << 20)) << i;
  const uint64_t writes = DiskWritesWhenIdle();
  const uint64_t hits = Stat("disk_hits");
  for (int i = 0; i < 24; ++i)  // again: each eviction now is of an object the disk holds
    ASSERT_EQ(Get("k" + std::to_string(i)).second, Value(i, 1 << 20)) << i;
  EXPECT_GT(Stat("disk_hits"), hits);
  EXPECT_EQ(DiskWritesWhenIdle(), writes);
}

TEST_F(DiskTierNodeTest, ExpiryAndFlushOverTheRedisProtocolReachTheDisk) {
  Start([](ServerOptions& o) { o.resp_listen = "127.0.0.1:0"; });
  for (int i = 0; i < 24; ++i)  // k0.. out of memory, on disk
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  RespTestClient redis(server_->resp_port());
  ASSERT_TRUE(redis.connected());
  ASSERT_EQ(redis.Call({"CLIENT", "NAMESPACE", "ns"}), "+OK");
  EXPECT_EQ(redis.Call({"TTL", "k0"}), ":-1");  // on disk, no expiry
  EXPECT_EQ(redis.Call({"EXPIRE", "k0", "1000"}), ":1");
  for (int i = 24; i < 40; ++i)  // k0 out of memory again: written with its new expiry
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  // The new expiry travelled with it (not the old "none"): up to 1000 s, less only by the time
  // this test took, however slow the machine (a sanitizer build under load took over 2 s).
  const std::string ttl = redis.Call({"TTL", "k0"});
  ASSERT_TRUE(ttl.size() > 1 && ttl[0] == ':') << ttl;
  const long left = std::stol(ttl.substr(1));
  EXPECT_GT(left, 900) << ttl;
  EXPECT_LE(left, 1000) << ttl;
  EXPECT_EQ(redis.Call({"FLUSHDB"}), "+OK");
  EXPECT_EQ(Get("k1").first, KeyCode::kKeyNotExist);  // it was on disk only
  EXPECT_EQ(Stat("disk_objects"), 0u);
  Start();
  EXPECT_EQ(Get("k1").first, KeyCode::kKeyNotExist);
}

// A folded LMCache pair (docs/resp.md) goes to disk as one object and comes back as one, also
// when its metadata arrives after its data left memory, and across a restart.
TEST_F(DiskTierNodeTest, AFoldedRedisPairTravelsThroughTheDiskWhole) {
  auto resp = [](ServerOptions& o) {
    o.resp_listen = "127.0.0.1:0";
    o.resp_fold_namespaces = {"ns"};  // the namespace's setting folds its pairs
  };
  Start(resp);
  auto connect = [&] {
    auto redis = std::make_unique<RespTestClient>(server_->resp_port());
    EXPECT_TRUE(redis->connected());
    EXPECT_EQ(redis->Call({"CLIENT", "NAMESPACE", "ns"}), "+OK");
    return redis;
  };
  auto redis = connect();
  auto text = [](const std::vector<char>& v) { return std::string(v.begin(), v.end()); };
  ASSERT_EQ(redis->Call({"SET", "akv_bytes", text(Value(1, 1 << 20))}), "+OK");
  ASSERT_EQ(redis->Call({"SET", "ametadata", "meta-a"}), "+OK");
  ASSERT_EQ(redis->Call({"SET", "bkv_bytes", text(Value(2, 1 << 20))}), "+OK");
  for (int i = 0; i < 24; ++i)  // a and b out of memory, on disk
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  // b's metadata arrives with b on disk only: b comes back, takes it, and its disk copy (without
  // it) goes.
  DiskWritesWhenIdle();
  ASSERT_GT(Stat("disk_objects"), 0u);
  ASSERT_EQ(redis->Call({"SET", "bmetadata", "meta-b"}), "+OK");
  for (int i = 24; i < 48; ++i)  // b out of memory again: written with its metadata
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  for (int restart = 0; restart < 2; ++restart) {
    EXPECT_EQ(redis->Call({"EXISTS", "ametadata", "bmetadata"}), ":2");
    EXPECT_EQ(redis->Call({"GET", "ametadata"}), "$meta-a");
    EXPECT_EQ(redis->Call({"GET", "bmetadata"}), "$meta-b");
    EXPECT_EQ(Get("bkv_bytes").second, Value(2, 1 << 20));
    Start(resp);
    redis = connect();
  }
}

// After a restart over the disk folder every object is on disk only: SCAN, the binary LIST and
// DBSIZE see them as GET does, a key read back into memory (then in both tiers) is listed and
// counted once, and a listing's pages follow one cursor rule over both tiers.
TEST_F(DiskTierNodeTest, ListingsAndCountsSeeTheDiskAfterARestart) {
  auto resp = [](ServerOptions& o) { o.resp_listen = "127.0.0.1:0"; };
  Start(resp);
  for (int i = 0; i < 24; ++i)
    Put("k" + std::to_string(100 + i), Value(i, 256 << 10));
  Start(resp);  // a clean stop writes what memory held: everything is on disk now
  RespTestClient redis(server_->resp_port());
  ASSERT_EQ(redis.Call({"CLIENT", "NAMESPACE", "ns"}), "+OK");
  auto scan_all = [&] {
    std::vector<std::string> keys;
    std::string cursor = "0";
    for (int pages = 0; pages < 100; ++pages) {
      const std::string reply = redis.Call({"SCAN", cursor, "COUNT", "5"});
      EXPECT_EQ(reply.substr(0, 4), "*2[$") << reply;
      cursor = reply.substr(4, reply.find(' ') - 4);
      for (size_t at = reply.find("$k"); at != std::string::npos; at = reply.find("$k", at + 1))
        keys.push_back(reply.substr(at + 1, 4));
      if (cursor == "0") break;
    }
    return keys;
  };
  auto list_all = [&] {
    std::vector<std::string> keys;
    uint64_t cursor = 0;
    do {
      Result<KeyPage> page = client_->List("ns", cursor, 7);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      keys.insert(keys.end(), page->keys.begin(), page->keys.end());
      cursor = page->next_cursor;
    } while (cursor != 0);
    return keys;
  };
  std::vector<std::string> all;
  for (int i = 0; i < 24; ++i)
    all.push_back("k" + std::to_string(100 + i));
  EXPECT_EQ(redis.Call({"DBSIZE"}), ":24");
  EXPECT_EQ(scan_all(), all);  // ascending, each once
  EXPECT_EQ(list_all(), all);
  // Read back into memory (the disk keeps its copy): still one key each.
  for (int i = 0; i < 24; i += 3)
    EXPECT_EQ(Get("k" + std::to_string(100 + i)).second, Value(i, 256 << 10));
  EXPECT_EQ(redis.Call({"DBSIZE"}), ":24");
  EXPECT_EQ(scan_all(), all);
  EXPECT_EQ(list_all(), all);
  // A delete reaches both tiers, and the counts.
  EXPECT_EQ(redis.Call({"DEL", "k100", "k101"}), ":2");
  all.erase(all.begin(), all.begin() + 2);
  EXPECT_EQ(redis.Call({"DBSIZE"}), ":22");
  EXPECT_EQ(scan_all(), all);
  EXPECT_EQ(list_all(), all);
}

TEST_F(DiskTierNodeTest, CompactionFreesAMostlyDeadSegmentAndKeepsItsLiveObjects) {
  Start();                      // 64 MiB of disk: segments of 16 MiB
  for (int i = 0; i < 48; ++i)  // k0..k15 fill the first segment (evicted first)
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  DiskWritesWhenIdle();  // k0..k15 on disk, not in the writer's queue (where a delete drops them)
  Result<BatchResult> deleted = client_->MDel(
      {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11"}, DelOptions{"ns"});
  ASSERT_TRUE(deleted.ok());
  Put("wake", Value(99, 1 << 20));  // a write: the writer then looks for a segment to compact
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Stat("disk_compacted_segments") == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  ASSERT_GE(Stat("disk_compacted_segments"), 1u);
  EXPECT_GT(Stat("disk_compacted_bytes"), 0u);
  EXPECT_GT(Stat("disk_index_bytes"), 0u);
  for (int restart = 0; restart < 2; ++restart) {
    for (int i = 0; i < 12; ++i)
      EXPECT_EQ(Get("k" + std::to_string(i)).first, KeyCode::kKeyNotExist) << i;
    for (int i = 12; i < 16; ++i) {
      auto [code, value] = Get("k" + std::to_string(i));
      ASSERT_EQ(code, KeyCode::kSuccess) << i;
      EXPECT_EQ(value, Value(i, 1 << 20)) << i;
    }
    Start();
  }
}

TEST_F(DiskTierNodeTest, TheDiskIndexTakesAtMostHalfOfMaxIndexBytes) {
  Start([](ServerOptions& o) { o.max_index_bytes = 64 << 10; });
  // 100 MiB through 8 MiB of memory: ~1500 evicted objects, whose index entries would take
  // about 100 KiB.
  for (int i = 0; i < 1600; ++i)
    Put("k" + std::to_string(i), Value(i, 64 << 10));
  EXPECT_GT(DiskWritesWhenIdle(), 0u);
  EXPECT_GT(Stat("disk_index_drops"), 0u);
  // Half of 64 KiB, and what the write that crossed it added: the entries of one batch of
  // evicted objects, and the index's tables grown for them (a rehash doubles the buckets).
  EXPECT_LE(Stat("disk_index_bytes"), uint64_t{(32 + 8) << 10});
  EXPECT_EQ(Get("k1599").second, Value(1599, 64 << 10));  // the store still takes writes
}

TEST_F(DiskTierNodeTest, ACleanStopWritesWhatMemoryHoldsToDisk) {
  Start();                     // disk_stop_flush: 30 s by default
  for (int i = 0; i < 4; ++i)  // 4 MiB: all in memory, nothing evicted
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  ASSERT_EQ(Stat("disk_writes"), 0u);
  Start();
  EXPECT_EQ(Stat("disk_restored"), 4u);
  for (int i = 0; i < 4; ++i) {
    auto [code, value] = Get("k" + std::to_string(i));
    ASSERT_EQ(code, KeyCode::kSuccess) << i;
    EXPECT_EQ(value, Value(i, 1 << 20)) << i;
  }
  // Without the flush, what only memory held is gone at a restart.
  Start([](ServerOptions& o) { o.disk_stop_flush = std::chrono::seconds(0); });
  Put("only-in-memory", Value(9, 1 << 20));
  Start();
  EXPECT_EQ(Get("only-in-memory").first, KeyCode::kKeyNotExist);
}

TEST_F(DiskTierNodeTest, AMemoryNamespaceKeepsItsObjectsOffTheDisk) {
  Start([](ServerOptions& o) { o.namespace_on_disk = {{"*", false}, {"other", true}}; });
  for (int i = 0; i < 24; ++i)  // "ns" falls under "*": memory only
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  EXPECT_GT(Stat("evictions"), 0u);
  EXPECT_EQ(DiskWritesWhenIdle(), 0u);
  EXPECT_EQ(Stat("disk_objects"), 0u);
  EXPECT_EQ(Get("k0").first, KeyCode::kKeyNotExist);  // evicted, and dropped
  Start([](ServerOptions& o) { o.namespace_on_disk = {{"*", false}, {"ns", true}}; });
  for (int i = 0; i < 24; ++i)
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  EXPECT_GT(DiskWritesWhenIdle(), 0u);
  EXPECT_EQ(Get("k0").second, Value(0, 1 << 20));
}

TEST_F(DiskTierNodeTest, WithRestoreOffARestartStartsEmpty) {
  Start();
  for (int i = 0; i < 24; ++i)
    Put("k" + std::to_string(i), Value(i, 1 << 20));
  Start([](ServerOptions& o) { o.disk_restore = false; });
  EXPECT_EQ(Stat("disk_restored"), 0u);
  EXPECT_EQ(Stat("disk_objects"), 0u);
  EXPECT_EQ(Get("k0").first, KeyCode::kKeyNotExist);
  EXPECT_EQ(Get("k23").first, KeyCode::kKeyNotExist);
}

TEST_F(DiskTierNodeTest, ACapacityBeyondTheFilesystemIsRefused) {
  ServerOptions options = SmallNodeOptions();
  options.disk_dir = dir_;
  options.disk_capacity = uint64_t{1} << 60;  // an exabyte
  Result<std::unique_ptr<Server>> refused = Server::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("does not fit"), std::string::npos)
      << refused.status().ToString();
}

TEST_F(DiskTierNodeTest, TheNodeIdIsKeptInTheFolder) {
  std::filesystem::create_directories(dir_);
  EXPECT_EQ(server::KeepNodeId(dir_, "10.0.0.5:7470", false).value(), "10.0.0.5:7470");
  // Restarted on another address: still the first name.
  EXPECT_EQ(server::KeepNodeId(dir_, "10.0.0.9:7470", false).value(), "10.0.0.5:7470");
  // A name the config gives wins, and is kept from then on.
  EXPECT_EQ(server::KeepNodeId(dir_, "cache-7", true).value(), "cache-7");
  EXPECT_EQ(server::KeepNodeId(dir_, "10.0.0.9:7470", false).value(), "cache-7");
  // A link planted at the temporary name is replaced, never written through.
  const std::string target = dir_ + "/planted-target";
  ASSERT_TRUE(std::ofstream(target) << "keep\n");
  std::filesystem::create_symlink(target, dir_ + "/node-id.new");
  EXPECT_EQ(server::KeepNodeId(dir_, "cache-8", true).value(), "cache-8");
  std::ifstream planted(target);
  std::string line;
  std::getline(planted, line);
  EXPECT_EQ(line, "keep");
}

TEST_F(DiskTierNodeTest, ABadDiskFolderStopsTheStartWithTheReason) {
  ServerOptions options = SmallNodeOptions();
  options.disk_dir = "/proc/kvport-no-such-folder";
  Result<std::unique_ptr<Server>> refused = Server::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("the disk tier"), std::string::npos)
      << refused.status().ToString();
  options.disk_dir = ::testing::TempDir();
  options.disk_capacity = 4096;
  refused = Server::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("below the least"), std::string::npos)
      << refused.status().ToString();
}

}  // namespace
}  // namespace kvport::testing
