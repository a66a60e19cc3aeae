// SPDX-License-Identifier: Apache-2.0
// The asynchronous calls (Client::MSetAsync and the others, kvport::Pending): many calls in
// flight from one thread, Ready() without blocking and making progress, Wait() giving what the
// blocking call gives, a handle destroyed before Wait, and the same over shared memory and a
// cluster of nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fake_node.h"
#include "kvport/client.h"
#include "kvport/server.h"
#include "protocol/messages.h"
#include "test_node.h"

namespace kvport {
namespace {

using testing::FakeConn;
using testing::FakeFrame;
using testing::FakeNode;
using testing::Latch;
using testing::Pattern;
using testing::ResponseBytes;
using testing::SmallNodeOptions;
using testing::StartNode;

// Polls `ready` until it is true, at most `bound` (a call that never becomes ready fails the
// test instead of hanging it).
template <typename Ready>
bool BecomesReady(Ready ready, std::chrono::milliseconds bound = std::chrono::seconds(20)) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

// An MEXIST's answer: every key exists when `present`, none otherwise.
std::string ExistAnswer(const FakeFrame& request, bool present) {
  protocol::MexistRequest decoded;
  EXPECT_TRUE(
      protocol::DecodeRequest(request.header, request.descriptor, protocol::Limits(), &decoded)
          .ok());
  protocol::MexistResponse response;
  for (size_t i = 0; i < decoded.keys.size(); ++i)
    response.results.push_back(protocol::ExistResult{
        present ? StatusCode::kOk : StatusCode::kNotFound, present ? 1u : 0u});
  return ResponseBytes(request.header.request_id, response);
}

// Reads (and drops) requests until the client closes the connection.
void ReadUntilClosed(FakeConn& conn) {
  FakeFrame request;
  while (conn.Read(&request)) {
  }
}

// TCP (a fake node scripts every answer), one connection: every call shares it.
Status InitOverOneConnection(Client& client, const std::string& address) {
  InitOptions options;
  options.transport_type = 1;
  options.connections = 1;
  return client.Init("async-test", address, options);
}

// The key an MEXIST asked for.
std::string KeyOf(const FakeFrame& request) {
  protocol::MexistRequest decoded;
  if (!protocol::DecodeRequest(request.header, request.descriptor, protocol::Limits(), &decoded)
           .ok() ||
      decoded.keys.size() != 1) {
    return "";
  }
  return std::string(decoded.keys[0]);
}

// One connection, one thread: the node reads all eight requests before it answers any (a
// blocking call would wait forever for its answer), then answers them in reverse order, each
// with a verdict that depends on its key, so an answer handed to the wrong call shows.
TEST(ClientAsyncTest, OneThreadKeepsManyCallsInFlightOnOneConnection) {
  constexpr int kCalls = 8;
  Latch read_all;
  FakeNode node([&](FakeConn& conn, int) {
    if (!conn.Hello()) return;
    std::vector<FakeFrame> requests(kCalls);
    for (FakeFrame& request : requests) {
      if (!conn.Read(&request)) return;
    }
    read_all.Raise();
    std::reverse(requests.begin(), requests.end());
    for (const FakeFrame& request : requests) {
      const std::string key = KeyOf(request);
      if (!conn.Write(ExistAnswer(request, !key.empty() && (key.back() - '0') % 2 == 0))) return;
    }
    ReadUntilClosed(conn);
  });
  Client client;
  ASSERT_TRUE(InitOverOneConnection(client, node.address()).ok());

  std::vector<std::vector<std::string>> keys;
  for (int i = 0; i < kCalls; ++i)
    keys.push_back({"key" + std::to_string(i)});
  std::vector<Pending<BatchResult>> calls;
  for (int i = 0; i < kCalls; ++i)
    calls.push_back(client.MExistAsync(keys[i]));
  ASSERT_TRUE(read_all.WaitFor(1)) << "the calls were not all sent before any was answered";
  for (int i = 0; i < kCalls; ++i) {
    Result<BatchResult> got = calls[i].Wait();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->codes[0], i % 2 == 0 ? KeyCode::kSuccess : KeyCode::kKeyNotExist) << i;
    EXPECT_FALSE(calls[i].valid());
  }
  EXPECT_EQ(node.accepted(), 1);
}

// Ready() is false while the node holds the answer back and turns true, by polling alone, once
// the answer is there; Wait() then returns it at once.
TEST(ClientAsyncTest, ReadyTellsWithoutBlockingAndPollingMakesProgress) {
  Latch got_request, answer;
  FakeNode node([&](FakeConn& conn, int) {
    FakeFrame request;
    if (!conn.Hello() || !conn.Read(&request)) return;
    got_request.Raise();
    if (!answer.WaitFor(1) || !conn.Write(ExistAnswer(request, true))) return;
    ReadUntilClosed(conn);
  });
  Client client;
  ASSERT_TRUE(InitOverOneConnection(client, node.address()).ok());

  const std::vector<std::string> keys = {"k"};
  Pending<BatchResult> call = client.MExistAsync(keys);
  ASSERT_TRUE(got_request.WaitFor(1));
  EXPECT_FALSE(call.Ready());
  EXPECT_FALSE(call.Ready());
  answer.Raise();
  ASSERT_TRUE(BecomesReady([&] { return call.Ready(); }));
  Result<BatchResult> got = call.Wait();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->codes, std::vector<KeyCode>{KeyCode::kSuccess});
}

TEST(ClientAsyncTest, ARefusedCallIsReadyAtOnceWithTheBlockingCallsError) {
  Client before_init;
  const std::vector<std::string> keys = {"k"};
  Pending<BatchResult> early = before_init.MExistAsync(keys);
  EXPECT_TRUE(early.Ready());
  EXPECT_EQ(early.Wait().status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(early.Wait().status().code(), StatusCode::kInvalidArgument);  // already waited

  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(client.Init("async-refused", server->address()).ok());
  IOBuffers one_buffer;
  char byte = 0;
  one_buffer.Append(&byte, 1);
  const std::vector<std::string> two_keys = {"a", "b"};
  Pending<BatchResult> mismatch = client.MSetAsync(two_keys, one_buffer);
  EXPECT_TRUE(mismatch.Ready());
  Result<BatchResult> refused = mismatch.Wait();
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().ToString(), client.MSet(two_keys, one_buffer).status().ToString());
}

// Destroying a handle before Wait waits for the call: the answer lands in the buffer before the
// destructor returns, never after.
TEST(ClientAsyncTest, DestroyingAHandleWaitsForItsCall) {
  const std::vector<char> value = Pattern(9, 4096);
  Latch got_request, destroying;
  FakeNode node([&](FakeConn& conn, int) {
    FakeFrame request;
    if (!conn.Hello() || !conn.Read(&request)) return;
    got_request.Raise();
    if (!destroying.WaitFor(1)) return;
    protocol::MgetResponse response;
    response.results.push_back(
        protocol::MgetResult{StatusCode::kOk, "", value.size(), value.data()});
    if (!conn.Write(ResponseBytes(request.header.request_id, response))) return;
    ReadUntilClosed(conn);
  });
  Client client;
  ASSERT_TRUE(InitOverOneConnection(client, node.address()).ok());

  std::vector<char> buffer(value.size(), '\0');
  IOBuffers buffers;
  buffers.Append(buffer.data(), buffer.size());
  const std::vector<std::string> keys = {"k"};
  {
    Pending<GetResult> call = client.MGetAsync(keys, {}, buffers);
    ASSERT_TRUE(got_request.WaitFor(1));
    destroying.Raise();
  }
  EXPECT_EQ(buffer, value);
}

// A real node: 64 one-key puts in flight from one thread, then 64 gets, each value back where it
// belongs.
TEST(ClientAsyncTest, ManyPutsAndGetsInFlightAgainstARealNode) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(InitOverOneConnection(client, server->address()).ok());

  constexpr int kCalls = 64;
  std::vector<std::vector<std::string>> keys(kCalls);
  std::vector<std::vector<char>> values(kCalls);
  std::vector<IOBuffers> put_buffers(kCalls);
  std::vector<Pending<BatchResult>> puts;
  for (int i = 0; i < kCalls; ++i) {
    keys[i] = {"value" + std::to_string(i)};
    values[i] = Pattern(i, 1000 + i);
    put_buffers[i].Append(values[i].data(), values[i].size());
    puts.push_back(client.MSetAsync(keys[i], put_buffers[i]));
  }
  for (auto& put : puts) {
    Result<BatchResult> stored = put.Wait();
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    EXPECT_EQ(stored->status, BatchCode::kSuccess) << stored->error.ToString();
  }
  std::vector<std::vector<char>> read(kCalls);
  std::vector<IOBuffers> get_buffers(kCalls);
  std::vector<Pending<GetResult>> gets;
  for (int i = 0; i < kCalls; ++i) {
    read[i].assign(2000, '\0');
    get_buffers[i].Append(read[i].data(), read[i].size());
    gets.push_back(client.MGetAsync(keys[i], {}, get_buffers[i]));
  }
  for (int i = kCalls - 1; i >= 0; --i) {  // waited for in the other order
    Result<GetResult> got = gets[i].Wait();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->codes[0], KeyCode::kSuccess) << got->error.ToString();
    ASSERT_EQ(got->value_sizes[0], values[i].size());
    read[i].resize(values[i].size());
    EXPECT_EQ(read[i], values[i]) << i;
  }
}

// Shared memory takes two steps to put (reserve, then commit): polling Ready() alone takes the
// second one, and the value is stored once Ready says so.
TEST(ClientAsyncTest, PollingASharedMemoryPutCommitsIt) {
  ServerOptions node_options = SmallNodeOptions();
  node_options.unix_socket = "auto";
  auto server = StartNode(node_options);
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(client.Init("async-shm", "unix:" + server->unix_socket_path()).ok());
  ASSERT_EQ(client.transport(), "shared memory") << client.transport_reason();

  std::vector<char> value = Pattern(3, 1 << 16);
  IOBuffers values;
  values.Append(value.data(), value.size());
  const std::vector<std::string> keys = {"shm-key"};
  Pending<BatchResult> put = client.MSetAsync(keys, values);
  ASSERT_TRUE(BecomesReady([&] { return put.Ready(); }));
  // Ready: committed by the polling alone, before Wait was called.
  ASSERT_TRUE(BecomesReady([&] { return server->Stats().Get("objects") == 1; }));
  Result<BatchResult> stored = put.Wait();
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->status, BatchCode::kSuccess) << stored->error.ToString();

  std::vector<char> read(value.size());
  IOBuffers buffers;
  buffers.Append(read.data(), read.size());
  Pending<GetResult> get = client.MGetAsync(keys, {}, buffers);
  Result<GetResult> got = get.Wait();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->codes[0], KeyCode::kSuccess);
  EXPECT_EQ(read, value);
}

// A cluster call in flight: every node's part is sent before Wait, and the merged answer is in
// the caller's order, as from the blocking call.
TEST(ClientAsyncTest, AClusterCallIsInFlightOnEveryNodeAtOnce) {
  std::vector<std::unique_ptr<Server>> nodes;
  std::string list;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(StartNode(SmallNodeOptions()));
    ASSERT_NE(nodes.back(), nullptr);
    list += (i > 0 ? ";" : "") + nodes.back()->address();
  }
  InitOptions options;
  options.transport_type = 1;
  Client client;
  ASSERT_TRUE(client.Init("async-cluster", list, options).ok());
  ASSERT_TRUE(client.is_cluster());

  std::vector<std::string> keys;
  std::vector<std::vector<char>> values;
  IOBuffers buffers;
  for (int i = 0; i < 60; ++i) {
    keys.push_back("ck" + std::to_string(i));
    values.push_back(Pattern(100 + i, 512));
  }
  for (auto& v : values)
    buffers.Append(v.data(), v.size());
  Pending<BatchResult> put = client.MSetAsync(keys, buffers);
  Result<BatchResult> stored = put.Wait();
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ(stored->status, BatchCode::kSuccess) << stored->error.ToString();
  for (const auto& node : nodes)
    EXPECT_GT(node->Stats().Get("objects"), 0u);  // the batch spans every node

  std::vector<std::string> probe = keys;
  probe.insert(probe.begin() + 30, "never-written");
  const std::vector<std::string> first_ten(keys.begin(), keys.begin() + 10);
  Pending<BatchResult> exist = client.MExistAsync(probe);
  Pending<BatchResult> meta = client.MExistAsync(first_ten);  // both in flight at once
  Result<BatchResult> some = meta.Wait();
  Result<BatchResult> exists = exist.Wait();
  ASSERT_TRUE(some.ok() && exists.ok());
  EXPECT_EQ(some->codes, std::vector<KeyCode>(10, KeyCode::kSuccess));
  for (size_t i = 0; i < probe.size(); ++i) {
    EXPECT_EQ(exists->codes[i], i == 30 ? KeyCode::kKeyNotExist : KeyCode::kSuccess) << i;
  }
}

}  // namespace
}  // namespace kvport
