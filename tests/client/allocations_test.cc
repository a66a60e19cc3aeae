// SPDX-License-Identifier: Apache-2.0
// Heap allocations per call on the TCP hot path, counted by a replaced global operator new (the
// whole process: this client and the in-process node answering it). What is asserted: once the
// connection is warm, a get or a probe of stored keys allocates nothing but the lists of the
// result it returns, for one key as for many: no call state, frame, ticket, decoded request,
// reply, pin or queued segment is allocated per call or per key. Not asserted: puts, which
// allocate per stored key (the index entry, its key and the object's record, as a store must).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kvport/client.h"
#include "kvport/server.h"
#include "support/allocation_counter.h"

namespace kvport {
namespace {

class AllocationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.capacity_bytes = uint64_t{64} << 20;
    options.threads = 1;
    options.unix_socket = "";
    Result<std::unique_ptr<Server>> started = Server::Start(options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    node_ = std::move(started).value();
    InitOptions init;
    init.transport_type = 1;  // TCP
    init.connections = 1;
    ASSERT_TRUE(client_.Init("allocations", node_->address(), init).ok());
  }

  // Stores `n` keys of 4 KiB (with a short meta each) and returns them.
  std::vector<std::string> Store(const std::string& prefix, size_t n) {
    std::vector<std::string> keys;
    IOBuffers values;
    values_.emplace_back(n * 4096, 'v');
    for (size_t i = 0; i < n; ++i) {
      keys.push_back(prefix + std::to_string(i));
      values.Append(values_.back().data() + i * 4096, 4096);
    }
    Result<BatchResult> put = client_.MSet(keys, values, {}, std::vector<std::string>(n, "meta"));
    EXPECT_TRUE(put.ok() && put->status == BatchCode::kSuccess);
    return keys;
  }

  // The fewest allocations one call made, over rounds of calls (the minimum leaves out the
  // node's own occasional work, such as its sweeps, that lands inside a round).
  template <typename Call>
  uint64_t FewestPerCall(Call call) {
    for (int warm = 0; warm < 20; ++warm)
      call();
    uint64_t fewest = UINT64_MAX;
    for (int round = 0; round < 5; ++round) {
      constexpr int kCalls = 20;
      const uint64_t before = testing::Allocations();
      for (int i = 0; i < kCalls; ++i)
        call();
      fewest = std::min(fewest, (testing::Allocations() - before) / kCalls);
    }
    return fewest;
  }

  std::unique_ptr<Server> node_;
  Client client_;
  std::vector<std::string> values_;
};

TEST_F(AllocationsTest, AWarmGetAllocatesOnlyItsResultForOneKeyOrSixtyFour) {
  const std::vector<std::string> one = Store("a-get-key-long-enough-for-the-heap-one-", 1);
  const std::vector<std::string> many = Store("a-get-key-long-enough-for-the-heap-many-", 64);
  std::vector<char> into(64 * 4096);
  IOBuffers one_buffer, many_buffers;
  one_buffer.Append(into.data(), 4096);
  for (size_t i = 0; i < 64; ++i)
    many_buffers.Append(into.data() + i * 4096, 4096);
  auto get = [&](const std::vector<std::string>& keys, const IOBuffers& buffers) {
    Result<GetResult> got = client_.MGet(keys, {}, buffers);
    ASSERT_TRUE(got.ok() && got->status == BatchCode::kSuccess);
  };
  const uint64_t for_one = FewestPerCall([&] { get(one, one_buffer); });
  const uint64_t for_many = FewestPerCall([&] { get(many, many_buffers); });
  // The result's three lists (codes, value sizes, metas) are all a warm get allocates, in the
  // client and in the node together; the counter counts (they are on the heap).
  EXPECT_EQ(for_one, 3u);
  EXPECT_EQ(for_many, 3u) << "a 64-key get allocates per key";
}

TEST_F(AllocationsTest, AWarmProbeAllocatesOnlyItsResultForOneKeyOrMany) {
  // Keys longer than a short string's inline buffer, as real keys are (LMCache's are ~100
  // bytes): a lookup that built a heap key per search would allocate per key.
  const std::vector<std::string> one = Store("a-key-long-enough-for-the-heap-one-", 1);
  const std::vector<std::string> many = Store("a-key-long-enough-for-the-heap-many-", 256);
  auto exist = [&](const std::vector<std::string>& keys) {
    Result<BatchResult> found = client_.MExist(keys);
    ASSERT_TRUE(found.ok() && found->status == BatchCode::kSuccess);
  };
  const uint64_t for_one = FewestPerCall([&] { exist(one); });
  const uint64_t for_many = FewestPerCall([&] { exist(many); });
  EXPECT_EQ(for_one, 1u);  // the result's codes
  EXPECT_EQ(for_many, 1u) << "a 256-key MExist allocates per key";
}

TEST_F(AllocationsTest, MissesAllocateNothingPerKey) {
  // A probe and a delete of keys that are not there: the node answers each miss without an
  // allocation (a miss's Status carries no message), and the client describes only the first.
  std::vector<std::string> one = {"a-missing-key-long-enough-for-the-heap"}, many;
  for (int i = 0; i < 256; ++i)
    many.push_back("a-missing-key-long-enough-for-the-heap-" + std::to_string(i));
  auto exist = [&](const std::vector<std::string>& keys) {
    Result<BatchResult> found = client_.MExist(keys);
    ASSERT_TRUE(found.ok() && found->status == BatchCode::kFailed);
  };
  auto del = [&](const std::vector<std::string>& keys) {
    Result<BatchResult> deleted = client_.MDel(keys);
    ASSERT_TRUE(deleted.ok());
  };
  EXPECT_EQ(FewestPerCall([&] { exist(many); }), FewestPerCall([&] { exist(one); }));
  EXPECT_EQ(FewestPerCall([&] { del(many); }), FewestPerCall([&] { del(one); }));
}

TEST(StatusAllocationsTest, AnErrorWithoutAMessageAllocatesNothing) {
  const uint64_t before = testing::Allocations();
  Status miss(StatusCode::kNotFound, std::string());
  Status copy = miss;
  Status moved = std::move(copy);
  EXPECT_EQ(testing::Allocations() - before, 0u);
  EXPECT_EQ(moved.code(), StatusCode::kNotFound);
  EXPECT_TRUE(copy.ok());  // NOLINT(bugprone-use-after-move): a moved-from Status is OK
  EXPECT_EQ(moved.ToString(), "NotFound");
  EXPECT_EQ(Status::NotFound("gone").WithContext("MGet").ToString(), "NotFound: MGet: gone");
}

}  // namespace
}  // namespace kvport
