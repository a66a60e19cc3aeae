// SPDX-License-Identifier: Apache-2.0
// kvport::Client against a real in-process node on an ephemeral loopback port.
#include "kvport/client.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_node.h"

namespace kvport {
namespace {

using testing::Pattern;
using testing::SmallNodeOptions;
using testing::StartNode;

class ClientTest : public ::testing::Test {
 protected:
  void StartAll(const ServerOptions& node_options, InitOptions client_options = {}) {
    server_ = StartNode(node_options);
    ASSERT_NE(server_, nullptr);
    Status init = client_.Init("client-test", server_->address(), client_options);
    ASSERT_TRUE(init.ok()) << init.ToString();
  }
  void SetUp() override {}

  std::unique_ptr<Server> server_;
  Client client_;
};

TEST_F(ClientTest, RoundTripWithMetasSizesAndExistence) {
  StartAll(SmallNodeOptions());
  const std::vector<std::string> keys = {"model@1@0@abc@half", "empty-value", "big"};
  const std::vector<std::vector<char>> values = {Pattern(1, 4096), {}, Pattern(3, 3 << 20)};
  const std::vector<std::string> metas = {std::string("\x01\x00\x00\x00meta", 8), "", "m3"};
  IOBuffers put;
  for (const auto& v : values)
    put.Append(v.data(), v.size());
  SetOptions set;
  set.ns = "ns1";
  Result<BatchResult> stored = client_.MSet(keys, put, set, metas);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->status, BatchCode::kSuccess);
  EXPECT_EQ(stored->codes, std::vector<KeyCode>(3, KeyCode::kSuccess));
  EXPECT_TRUE(stored->error.ok());

  // Meta-only first, the way the connector sizes its buffers.
  GetOptions get;
  get.ns = "ns1";
  Result<GetResult> sized = client_.MGetMeta(keys, get);
  ASSERT_TRUE(sized.ok()) << sized.status().ToString();
  EXPECT_EQ(sized->status, BatchCode::kSuccess);
  EXPECT_EQ(sized->metas, metas);
  EXPECT_EQ(sized->value_sizes, (std::vector<uint64_t>{4096, 0, 3 << 20}));

  std::vector<std::vector<char>> out;
  IOBuffers buffers;
  for (uint64_t size : sized->value_sizes)
    out.emplace_back(size + 7, '\x5a');
  for (auto& o : out)
    buffers.Append(o.data(), o.size());
  Result<GetResult> got = client_.MGet(keys, get, buffers);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, BatchCode::kSuccess);
  EXPECT_EQ(got->metas, metas);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(got->value_sizes[i], values[i].size()) << keys[i];
    EXPECT_TRUE(std::equal(values[i].begin(), values[i].end(), out[i].begin())) << keys[i];
    // Bytes past the value are untouched.
    EXPECT_EQ(out[i][values[i].size()], '\x5a') << keys[i];
  }

  // Namespaces are separate: the same keys in the default namespace do not exist.
  Result<BatchResult> elsewhere = client_.MExist(keys);
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status().ToString();
  EXPECT_EQ(elsewhere->status, BatchCode::kFailed);
  EXPECT_EQ(elsewhere->codes, std::vector<KeyCode>(3, KeyCode::kKeyNotExist));

  ExistOptions exist;
  exist.ns = "ns1";
  Result<BatchResult> present = client_.MExist({keys[0], "never-written"}, exist);
  ASSERT_TRUE(present.ok());
  EXPECT_EQ(present->status, BatchCode::kPartialFailed);
  EXPECT_EQ(present->codes, (std::vector<KeyCode>{KeyCode::kSuccess, KeyCode::kKeyNotExist}));
  EXPECT_EQ(present->error.code(), StatusCode::kNotFound);
  EXPECT_NE(present->error.message().find("never-written"), std::string::npos)
      << present->error.message();

  DelOptions del;
  del.ns = "ns1";
  Result<BatchResult> deleted = client_.MDel({keys[0], "never-written"}, del);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->codes, (std::vector<KeyCode>{KeyCode::kSuccess, KeyCode::kKeyNotExist}));
  Result<BatchResult> after = client_.MExist(keys, exist);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->codes,
            (std::vector<KeyCode>{KeyCode::kKeyNotExist, KeyCode::kSuccess, KeyCode::kSuccess}));
}

TEST_F(ClientTest, MgetOfNeverWrittenKeysIsFailedWithKeyNotExistPerKey) {
  StartAll(SmallNodeOptions());
  std::vector<char> a(64), b(64);
  IOBuffers buffers;
  buffers.Append(a.data(), a.size());
  buffers.Append(b.data(), b.size());
  Result<GetResult> got = client_.MGet({"nope-1", "nope-2"}, GetOptions{}, buffers);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, BatchCode::kFailed);
  EXPECT_EQ(got->codes, std::vector<KeyCode>(2, KeyCode::kKeyNotExist));
  EXPECT_EQ(got->value_sizes, std::vector<uint64_t>(2, 0));
}

TEST_F(ClientTest, BufferTooSmallIsAPerKeyErrorThatLeavesTheBufferUntouched) {
  StartAll(SmallNodeOptions());
  const std::vector<char> big = Pattern(7, 1000);
  const std::vector<char> small = Pattern(8, 10);
  IOBuffers put;
  put.Append(big.data(), big.size());
  put.Append(small.data(), small.size());
  ASSERT_EQ(client_.MSet({"big", "small"}, put)->status, BatchCode::kSuccess);

  std::vector<char> short_buffer(999, '\x11');
  std::vector<char> fine(10, '\x22');
  IOBuffers buffers;
  buffers.Append(short_buffer.data(), short_buffer.size());
  buffers.Append(fine.data(), fine.size());
  Result<GetResult> got = client_.MGet({"big", "small"}, GetOptions{}, buffers);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, BatchCode::kPartialFailed);
  EXPECT_EQ(got->codes, (std::vector<KeyCode>{KeyCode::kBufferTooSmall, KeyCode::kSuccess}));
  EXPECT_EQ(got->value_sizes, (std::vector<uint64_t>{1000, 10}));
  EXPECT_EQ(short_buffer, std::vector<char>(999, '\x11'));
  EXPECT_EQ(fine, small);

  // The reported size is enough to retry.
  std::vector<char> retry(got->value_sizes[0]);
  IOBuffers again;
  again.Append(retry.data(), retry.size());
  Result<GetResult> second = client_.MGet({"big"}, GetOptions{}, again);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->status, BatchCode::kSuccess);
  EXPECT_EQ(retry, big);
}

TEST_F(ClientTest, CapacityExhaustionGivesTruePerKeyStatuses) {
  // 1 MiB node; one MSET of six 256 KiB values (only some fit), one value larger than the node.
  StartAll(SmallNodeOptions(uint64_t{1} << 20));
  std::vector<std::string> keys;
  std::vector<std::vector<char>> values;
  for (int i = 0; i < 6; ++i) {
    keys.push_back("chunk-" + std::to_string(i));
    values.push_back(Pattern(100 + i, 256 << 10));
  }
  keys.push_back("too-large");
  values.push_back(Pattern(200, 2 << 20));
  IOBuffers put;
  for (const auto& v : values)
    put.Append(v.data(), v.size());
  Result<BatchResult> stored = client_.MSet(keys, put);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->status, BatchCode::kPartialFailed);
  EXPECT_EQ(stored->codes.back(), KeyCode::kTooLarge);
  size_t ok = 0, no_space = 0;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    const KeyCode code = stored->codes[i];
    EXPECT_TRUE(code == KeyCode::kSuccess || code == KeyCode::kNoSpace) << KeyCodeName(code);
    ok += code == KeyCode::kSuccess;
    no_space += code == KeyCode::kNoSpace;
  }
  EXPECT_GT(ok, 0u);
  EXPECT_GT(no_space, 0u);
  EXPECT_FALSE(stored->error.ok());

  // Per-key codes are the authority: exactly the keys reported stored read back, intact (one
  // at a time: reading them all at once would pin more than the node's max_pinned_bytes).
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<char> out(2 << 20);
    IOBuffers buffer;
    buffer.Append(out.data(), out.size());
    Result<GetResult> got = client_.MGet({keys[i]}, GetOptions{}, buffer);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    if (stored->codes[i] == KeyCode::kSuccess) {
      ASSERT_EQ(got->codes[0], KeyCode::kSuccess) << keys[i];
      EXPECT_EQ(0, std::memcmp(out.data(), values[i].data(), values[i].size())) << keys[i];
    } else {
      EXPECT_EQ(got->codes[0], KeyCode::kKeyNotExist) << keys[i];
    }
  }
}

TEST_F(ClientTest, LocallyInvalidKeysFailAloneAndArgumentMismatchesFailTheCall) {
  StartAll(SmallNodeOptions());
  const std::vector<char> v = Pattern(9, 16);
  IOBuffers put;
  put.Append(v.data(), v.size());
  put.Append(v.data(), v.size());
  Result<BatchResult> stored = client_.MSet({"", "fine"}, put);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->codes, (std::vector<KeyCode>{KeyCode::kInvalidArgument, KeyCode::kSuccess}));
  EXPECT_EQ(stored->status, BatchCode::kPartialFailed);

  Result<BatchResult> mismatch = client_.MSet({"a"}, put);
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  SetOptions bad_ns;
  bad_ns.ns = std::string(300, 'n');
  // A namespace over the node's limit fails the whole call, naming the limit.
  Result<BatchResult> too_long = client_.MSet({"a", "b"}, put, bad_ns);
  EXPECT_EQ(too_long.status().code(), StatusCode::kTooLarge);
  EXPECT_NE(too_long.status().message().find("max_namespace_bytes"), std::string::npos)
      << too_long.status().message();
  const std::string long_meta(8192, 'm');
  Result<BatchResult> meta =
      client_.MSet({"a", "b"}, put, SetOptions{}, std::vector<std::string>{"", long_meta});
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->codes, (std::vector<KeyCode>{KeyCode::kSuccess, KeyCode::kTooLarge}));
}

TEST_F(ClientTest, CallsBeforeInitAndASecondInitAreRejected) {
  Client fresh;
  IOBuffers none;
  EXPECT_EQ(fresh.MSet({}, none).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fresh.MExist({"k"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fresh.Ping().code(), StatusCode::kInvalidArgument);
  StartAll(SmallNodeOptions());
  EXPECT_EQ(client_.Init("again", server_->address()).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(client_.Ping().ok());
}

TEST_F(ClientTest, InitFailsClearlyWithoutANodeOrWithABadEndpoint) {
  Client c;
  Status bad = c.Init("t", "redis://127.0.0.1:1");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("eic://"), std::string::npos) << bad.message();

  // A port nobody listens on: take one from a node, then stop it.
  auto node = StartNode(SmallNodeOptions());
  ASSERT_NE(node, nullptr);
  const std::string address = node->address();
  node->Stop();
  node.reset();
  Client d;
  Status refused = d.Init("t", "eic://" + address);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
  EXPECT_NE(refused.message().find(address), std::string::npos) << refused.message();
}

TEST_F(ClientTest, InitTakesAOneNodeEicListAndRefusesANodeListedTwice) {
  StartAll(SmallNodeOptions());
  Client one;
  Status s = one.Init("t", "eic://" + server_->address() + ";");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(one.endpoint(), server_->address());
  EXPECT_TRUE(one.Ping().ok());
  Client two;
  s = two.Init("t", server_->address() + ";" + server_->address());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("listed twice"), std::string::npos) << s.ToString();
  EXPECT_EQ(two.Ping().code(), StatusCode::kInvalidArgument);  // not connected to either node
}

// What LMCache's EIC connector needs: it puts and gets in its namespace but probes and deletes
// without naming one.
TEST_F(ClientTest, AnyNamespaceFindsReadsAndDeletesKeysOfEveryNamespace) {
  StartAll(SmallNodeOptions());
  const std::vector<std::string> keys = {"chunk-0", "chunk-1"};
  const std::vector<std::vector<char>> values = {Pattern(21, 5000), Pattern(22, 70)};
  const std::vector<std::string> metas = {"meta-0", "meta-1"};
  IOBuffers put;
  for (const auto& v : values)
    put.Append(v.data(), v.size());
  SetOptions set;
  set.ns = "x";
  ASSERT_TRUE(client_.MSet(keys, put, set, metas).ok());
  const std::vector<std::string> probe = {"chunk-0", "chunk-1", "never"};

  // ns "" without any_namespace is exact: the default namespace holds nothing.
  Result<BatchResult> exact = client_.MExist(probe, ExistOptions{});
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(exact->codes, std::vector<KeyCode>(3, KeyCode::kKeyNotExist));
  Result<GetResult> exact_meta = client_.MGetMeta(keys, GetOptions{});
  ASSERT_TRUE(exact_meta.ok());
  EXPECT_EQ(exact_meta->codes, std::vector<KeyCode>(2, KeyCode::kKeyNotExist));

  ExistOptions any_exist;
  any_exist.any_namespace = true;
  Result<BatchResult> found = client_.MExist(probe, any_exist);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->codes,
            (std::vector<KeyCode>{KeyCode::kSuccess, KeyCode::kSuccess, KeyCode::kKeyNotExist}));
  EXPECT_EQ(found->status, BatchCode::kPartialFailed);
  EXPECT_NE(found->error.message().find("(any namespace)"), std::string::npos)
      << found->error.message();

  GetOptions any_get;
  any_get.any_namespace = true;
  Result<GetResult> sized = client_.MGetMeta(keys, any_get);
  ASSERT_TRUE(sized.ok()) << sized.status().ToString();
  EXPECT_EQ(sized->status, BatchCode::kSuccess);
  EXPECT_EQ(sized->value_sizes, (std::vector<uint64_t>{5000, 70}));
  EXPECT_EQ(sized->metas, metas);
  std::vector<std::vector<char>> out = {std::vector<char>(5000), std::vector<char>(70)};
  IOBuffers buffers;
  for (auto& o : out)
    buffers.Append(o.data(), o.size());
  Result<GetResult> got = client_.MGet(keys, any_get, buffers);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, BatchCode::kSuccess);
  EXPECT_EQ(out, values);
  EXPECT_EQ(got->metas, metas);

  // The default namespace's copy is the first match.
  const std::vector<char> in_default = Pattern(23, 5000);
  IOBuffers put_default;
  put_default.Append(in_default.data(), in_default.size());
  ASSERT_TRUE(client_.MSet({"chunk-0"}, put_default, SetOptions{}, {"default-meta"}).ok());
  got = client_.MGet(keys, any_get, buffers);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(out[0], in_default);
  EXPECT_EQ(got->metas[0], "default-meta");
  EXPECT_EQ(out[1], values[1]);

  // An explicit "" stays exact for deletes too: only the default namespace's copy goes.
  Result<BatchResult> del_exact = client_.MDel({"chunk-0"}, DelOptions{});
  ASSERT_TRUE(del_exact.ok());
  EXPECT_EQ(del_exact->codes, std::vector<KeyCode>{KeyCode::kSuccess});
  ExistOptions in_x;
  in_x.ns = "x";
  EXPECT_EQ(client_.MExist({"chunk-0"}, in_x)->codes, std::vector<KeyCode>{KeyCode::kSuccess});

  // any_namespace deletes every namespace's copy.
  IOBuffers put_y;
  put_y.Append(values[1].data(), values[1].size());
  SetOptions in_y;
  in_y.ns = "y";
  ASSERT_TRUE(client_.MSet({"chunk-1"}, put_y, in_y).ok());
  DelOptions any_del;
  any_del.any_namespace = true;
  Result<BatchResult> deleted = client_.MDel(probe, any_del);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(deleted->codes,
            (std::vector<KeyCode>{KeyCode::kSuccess, KeyCode::kSuccess, KeyCode::kKeyNotExist}));
  for (const char* ns : {"", "x", "y"}) {
    ExistOptions exact_ns;
    exact_ns.ns = ns;
    Result<BatchResult> gone = client_.MExist(keys, exact_ns);
    ASSERT_TRUE(gone.ok());
    EXPECT_EQ(gone->codes, std::vector<KeyCode>(2, KeyCode::kKeyNotExist)) << ns;
  }
  EXPECT_EQ(server_->Stats().Get("objects"), 0u);
  deleted = client_.MDel(keys, any_del);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->codes, std::vector<KeyCode>(2, KeyCode::kKeyNotExist));
}

TEST_F(ClientTest, AnyNamespaceWithANamespaceIsRejectedBeforeAnythingIsSent) {
  StartAll(SmallNodeOptions());
  const uint64_t requests_before = server_->Stats().Get("op_mexist") +
                                   server_->Stats().Get("op_mget") +
                                   server_->Stats().Get("op_mdel");
  ExistOptions exist;
  exist.ns = "x";
  exist.any_namespace = true;
  Result<BatchResult> r = client_.MExist({"k"}, exist);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("any_namespace"), std::string::npos) << r.status().ToString();
  GetOptions get;
  get.ns = "x";
  get.any_namespace = true;
  EXPECT_EQ(client_.MGetMeta({"k"}, get).status().code(), StatusCode::kInvalidArgument);
  std::vector<char> buffer(4);
  IOBuffers buffers;
  buffers.Append(buffer.data(), buffer.size());
  EXPECT_EQ(client_.MGet({"k"}, get, buffers).status().code(), StatusCode::kInvalidArgument);
  DelOptions del;
  del.ns = "x";
  del.any_namespace = true;
  EXPECT_EQ(client_.MDel({"k"}, del).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client_.MDel({}, del).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(server_->Stats().Get("op_mexist") + server_->Stats().Get("op_mget") +
                server_->Stats().Get("op_mdel"),
            requests_before);
}

TEST_F(ClientTest, StatsAndListReportWhatWasStored) {
  StartAll(SmallNodeOptions());
  const std::vector<char> v = Pattern(10, 100);
  IOBuffers put;
  for (int i = 0; i < 3; ++i)
    put.Append(v.data(), v.size());
  SetOptions set;
  set.ns = "listed";
  ASSERT_EQ(client_.MSet({"k1", "k2", "k3"}, put, set)->status, BatchCode::kSuccess);

  Result<NodeStats> stats = client_.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->Get("objects"), 3u);
  EXPECT_EQ(stats->Get("capacity_bytes"), server_->Stats().Get("capacity_bytes"));
  bool found = false;
  for (const auto& ns : stats->namespaces) {
    if (ns.name == "listed") {
      found = true;
      EXPECT_EQ(ns.objects, 3u);
    }
  }
  EXPECT_TRUE(found);

  std::vector<std::string> listed;
  uint64_t cursor = 0;
  do {
    Result<KeyPage> page = client_.List("listed", cursor, 2);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    listed.insert(listed.end(), page->keys.begin(), page->keys.end());
    cursor = page->next_cursor;
  } while (cursor != 0);
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, (std::vector<std::string>{"k1", "k2", "k3"}));
}

TEST_F(ClientTest, BatchesLargerThanTheNodeLimitsAreSplitIntoFrames) {
  ServerOptions node = SmallNodeOptions();
  node.max_batch_keys = 16;
  StartAll(node);
  std::vector<std::string> keys;
  std::vector<std::vector<char>> values;
  for (int i = 0; i < 100; ++i) {
    keys.push_back("split-" + std::to_string(i));
    values.push_back(Pattern(300 + i, 100 + i));
  }
  IOBuffers put;
  for (const auto& v : values)
    put.Append(v.data(), v.size());
  Result<BatchResult> stored = client_.MSet(keys, put);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->status, BatchCode::kSuccess);
  std::vector<std::vector<char>> out(keys.size(), std::vector<char>(256));
  IOBuffers buffers;
  for (auto& o : out)
    buffers.Append(o.data(), o.size());
  Result<GetResult> got = client_.MGet(keys, GetOptions{}, buffers);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status, BatchCode::kSuccess);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(got->value_sizes[i], values[i].size());
    EXPECT_EQ(0, std::memcmp(out[i].data(), values[i].data(), values[i].size())) << keys[i];
  }
}

TEST_F(ClientTest, EightThreadsShareOneClient) {
  InitOptions options;
  options.connections = 2;  // fewer connections than threads: calls are pipelined
  StartAll(SmallNodeOptions(), options);
  constexpr int kThreads = 8;
  constexpr int kRounds = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        std::vector<std::string> keys;
        std::vector<std::vector<char>> values;
        IOBuffers put;
        for (int k = 0; k < 4; ++k) {
          keys.push_back("t" + std::to_string(t) + "-r" + std::to_string(r) + "-k" +
                         std::to_string(k));
          values.push_back(Pattern(t * 1000 + r * 10 + k, 1000 + 4096 * k + t));
        }
        for (const auto& v : values)
          put.Append(v.data(), v.size());
        const std::string meta = keys[0];
        std::vector<std::string> metas(keys.size(), meta);
        Result<BatchResult> stored = client_.MSet(keys, put, SetOptions{}, metas);
        if (!stored.ok() || stored->status != BatchCode::kSuccess) {
          ++failures;
          continue;
        }
        std::vector<std::vector<char>> out(keys.size(), std::vector<char>(20000));
        IOBuffers buffers;
        for (auto& o : out)
          buffers.Append(o.data(), o.size());
        Result<GetResult> got = client_.MGet(keys, GetOptions{}, buffers);
        if (!got.ok() || got->status != BatchCode::kSuccess) {
          ++failures;
          continue;
        }
        for (size_t k = 0; k < keys.size(); ++k) {
          if (got->value_sizes[k] != values[k].size() || got->metas[k] != meta ||
              std::memcmp(out[k].data(), values[k].data(), values[k].size()) != 0) {
            ++failures;
          }
        }
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(server_->Stats().Get("objects"), uint64_t{kThreads * kRounds * 4});
}

// Threads of this process now: the entries of /proc/self/task.
size_t ThreadsOfThisProcess() {
  size_t threads = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
    ++threads;
  return threads;
}

// Every connection of the process is watched by one thread (the socket watcher), however many
// clients, nodes and connections there are: three clients of eight connections each, to two
// nodes, add at most that one thread (a thread per connection added 24), and calls from many
// threads still answer on all of them.
TEST(ClientThreadsTest, EveryConnectionOfTheProcessIsWatchedByOneThread) {
  std::unique_ptr<Server> node_a = StartNode(SmallNodeOptions());
  std::unique_ptr<Server> node_b = StartNode(SmallNodeOptions());
  ASSERT_NE(node_a, nullptr);
  ASSERT_NE(node_b, nullptr);
  const size_t before = ThreadsOfThisProcess();

  constexpr int kClients = 3;
  constexpr int kConnections = 8;
  InitOptions options;
  options.connections = kConnections;
  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(std::make_unique<Client>());
    Server& node = c % 2 == 0 ? *node_a : *node_b;
    ASSERT_TRUE(clients.back()->Init("threads-" + std::to_string(c), node.address(), options).ok());
    // Round robin over the pool: every slot connects.
    for (int i = 0; i < 2 * kConnections; ++i)
      ASSERT_TRUE(clients.back()->MExist({"nothing"}).ok());
  }
  EXPECT_EQ(node_a->Stats().Get("connections") + node_b->Stats().Get("connections"),
            uint64_t{kClients * kConnections});
  EXPECT_LE(ThreadsOfThisProcess(), before + 1);

  // Calls from many threads on every client: each takes its connection's reader role from the
  // watcher or from another caller, and gives it back.
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      Client& client = *clients[t % kClients];
      const std::vector<char> value = Pattern(t, 3000 + t);
      for (int r = 0; r < 20; ++r) {
        const std::string key = "w" + std::to_string(t) + "-" + std::to_string(r);
        IOBuffers put;
        put.Append(value.data(), value.size());
        Result<BatchResult> stored = client.MSet({key}, put);
        std::vector<char> out(value.size());
        IOBuffers get;
        get.Append(out.data(), out.size());
        Result<GetResult> got = client.MGet({key}, GetOptions{}, get);
        if (!stored.ok() || !got.ok() || got->status != BatchCode::kSuccess || out != value) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& th : threads)
    th.join();
  EXPECT_EQ(failures.load(), 0);
  // (The threads are not counted again here: a joined thread may stay listed in /proc a while,
  // under qemu-user in particular.)
}

TEST_F(ClientTest, NodeRestartMidRunFailsUnavailableThenRecoversOnTheSameClient) {
  InitOptions options;
  options.connections = 2;
  options.timeout = std::chrono::seconds(5);
  options.reconnect_backoff_min = std::chrono::milliseconds(5);
  options.reconnect_backoff_max = std::chrono::milliseconds(50);
  StartAll(SmallNodeOptions(), options);
  const uint16_t port = server_->port();
  const std::vector<char> v = Pattern(42, 8192);

  // A writer keeps running through the restart; every call either succeeds or is Unavailable.
  std::atomic<bool> stop{false};
  std::atomic<int> ok_calls{0};
  std::atomic<int> unavailable_calls{0};
  std::vector<std::string> unexpected;
  std::mutex unexpected_mu;
  std::thread writer([&] {
    for (int i = 0; !stop.load(); ++i) {
      IOBuffers put;
      put.Append(v.data(), v.size());
      Result<BatchResult> r = client_.MSet({"run-" + std::to_string(i % 64)}, put);
      if (r.ok() && r->status == BatchCode::kSuccess) {
        ++ok_calls;
      } else if (!r.ok() && r.status().code() == StatusCode::kUnavailable) {
        ++unavailable_calls;
      } else {
        std::lock_guard lock(unexpected_mu);
        unexpected.push_back(r.ok() ? r->error.ToString() : r.status().ToString());
      }
    }
  });
  auto wait_until = [](auto condition) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!condition() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    return condition();
  };
  ASSERT_TRUE(wait_until([&] { return ok_calls.load() >= 10; }));

  server_->Stop();
  // While the node is down, calls fail fast with a clear Unavailable.
  Result<BatchResult> down = client_.MExist({"run-0"});
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable) << down.status().ToString();
  EXPECT_NE(down.status().message().find(std::to_string(port)), std::string::npos)
      << down.status().message();
  ASSERT_TRUE(wait_until([&] { return unavailable_calls.load() >= 3; }));

  // A new node on the same port: the same client picks it up.
  ServerOptions again = SmallNodeOptions();
  again.listen = "127.0.0.1:" + std::to_string(port);
  server_ = StartNode(again);
  ASSERT_NE(server_, nullptr) << "could not bind the same port again";
  const int ok_before = ok_calls.load();
  ASSERT_TRUE(wait_until([&] { return ok_calls.load() >= ok_before + 10; }));
  stop = true;
  writer.join();
  EXPECT_TRUE(unexpected.empty()) << unexpected.front();

  // The new node is empty except for what was written after the restart.
  Result<BatchResult> exists = client_.MExist({"run-0", "written-before-only"});
  ASSERT_TRUE(exists.ok()) << exists.status().ToString();
  EXPECT_EQ(exists->codes[1], KeyCode::kKeyNotExist);
  EXPECT_TRUE(client_.Ping().ok());
}

// Voluntary context switches of the calling thread so far: each time it slept (in poll, on a
// lock) rather than being preempted.
long VoluntarySwitches() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

// InitOptions::busy_poll: a caller that polls for its answer long enough (here far longer than
// any answer takes) is never put to sleep waiting for it, and its calls answer as usual.
TEST(ClientBusyPollTest, ACallerThatBusyPollsIsNotPutToSleepWaitingForItsAnswer) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  InitOptions options;
  options.transport_type = 1;
  options.connections = 1;
  options.busy_poll = std::chrono::milliseconds(500);
  Client client;
  ASSERT_TRUE(client.Init("busy-poll", server->address(), options).ok());
  std::vector<char> value = Pattern(5, 1000);
  IOBuffers values;
  values.Append(value.data(), value.size());
  const std::vector<std::string> keys = {"polled"};
  ASSERT_TRUE(client.MSet(keys, values).ok());
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(client.MExist(keys).ok());  // the connection and the node warmed up

  constexpr int kCalls = 200;
  const long before = VoluntarySwitches();
  for (int i = 0; i < kCalls; ++i) {
    Result<BatchResult> got = client.MExist(keys);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->codes[0], KeyCode::kSuccess);
  }
  // Without busy polling every call sleeps in poll() until its answer arrives (about kCalls
  // switches); a few may still come from a lock the connection's reader thread held.
  EXPECT_LT(VoluntarySwitches() - before, kCalls / 10);

  InitOptions too_long = options;
  too_long.busy_poll = std::chrono::seconds(2);
  Client refused;
  EXPECT_EQ(refused.Init("busy-poll", server->address(), too_long).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvport
