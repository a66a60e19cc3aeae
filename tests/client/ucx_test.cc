// SPDX-License-Identifier: Apache-2.0
// The UCX transport against a real node offering UCX (kvport serve --ucx): choosing it for
// eic_trans_type 2, moving values into and out of the node's arena as UCX messages (and not
// through the session's socket), per-key outcomes as over TCP, a failed transfer failing its key
// alone and the next one reconnecting, a restarted node. UCX runs over its tcp transport and over
// its shared-memory ones (UCX_TLS, set before the workers are made); skipped where this process has
// no usable UCX.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <vector>

#include "client/arena_transport.h"
#include "client/connection_pool.h"
#include "client/ucx_arena.h"
#include "fake_node.h"
#include "kvport/client.h"
#include "kvport/device.h"
#include "kvport/server.h"
#include "kvport/ucx.h"
#include "test_node.h"

namespace kvport {
namespace {

using client::Deadline;
using testing::Buffers;
using testing::Pattern;
using testing::SmallNodeOptions;
using testing::SocketBytes;
using testing::StartNode;

ServerOptions UcxNodeOptions() {
  ServerOptions options = SmallNodeOptions();
  options.ucx = true;
  return options;
}

// Each test runs over UCX's tcp, and over its shared-memory transports (with tcp beside them:
// kvport's endpoints need a transport that detects a dead peer, which UCX 1.13's shared-memory
// ones do not). UCX_TLS is set before the node's and the client's workers are made.
constexpr const char* kUcxTcp = "tcp";
constexpr const char* kUcxSharedMemory = "posix,sysv,cma,self,tcp";

class UcxTransportTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ::setenv("UCX_TLS", GetParam(), 1);
    if (!ProcessUcxRuntime().usable()) {
      GTEST_SKIP() << "no usable UCX here: " << ProcessUcxRuntime().reason();
    }
  }
  void TearDown() override { ::unsetenv("UCX_TLS"); }

  // A client asking for RDMA (eic_trans_type 2).
  static Status InitRdma(Client& client, const std::string& address, int connections = 2) {
    InitOptions options;
    options.transport_type = 2;
    options.connections = connections;
    return client.Init("ucx-test", address, options);
  }
};

TEST_P(UcxTransportTest, UcxMovesValuesNotThroughTheSocket) {
  auto server = StartNode(UcxNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(InitRdma(client, server->address()).ok());
  ASSERT_EQ(client.transport(), "UCX") << client.transport_reason();
  EXPECT_NE(client.transport_reason().find("values over UCX"), std::string::npos)
      << client.transport_reason();

  std::vector<std::string> keys = {"big", "mid", "empty"};
  std::vector<std::vector<char>> values = {Pattern(1, 4 << 20), Pattern(2, 1 << 20), {}};
  const uint64_t before = SocketBytes(*server);
  Result<BatchResult> put = client.MSet(keys, Buffers(values), {}, {"m-big", "", "m-empty"});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  ASSERT_EQ(put->status, BatchCode::kSuccess) << put->error.ToString();

  std::vector<std::vector<char>> out = {std::vector<char>(4 << 20), std::vector<char>(1 << 20),
                                        std::vector<char>(8)};
  Result<GetResult> got = client.MGet(keys, {}, Buffers(out));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->status, BatchCode::kSuccess) << got->error.ToString();
  EXPECT_EQ(out[0], values[0]);
  EXPECT_EQ(out[1], values[1]);
  EXPECT_EQ(got->value_sizes, (std::vector<uint64_t>{4 << 20, 1 << 20, 0}));
  EXPECT_EQ(got->metas, (std::vector<std::string>{"m-big", "", "m-empty"}));
  // The session's socket carried control frames only: 10 MiB of values moved through UCX.
  EXPECT_LT(SocketBytes(*server) - before, 4096u);

  // A TCP client reads what UCX wrote, and the UCX client what TCP wrote.
  Client tcp;
  InitOptions tcp_options;
  tcp_options.transport_type = 1;
  ASSERT_TRUE(tcp.Init("ucx-tcp", server->address(), tcp_options).ok());
  std::vector<std::vector<char>> via_tcp = {std::vector<char>(1 << 20)};
  ASSERT_EQ(tcp.MGet({"mid"}, {}, Buffers(via_tcp))->status, BatchCode::kSuccess);
  EXPECT_EQ(via_tcp[0], values[1]);
  std::vector<std::vector<char>> tcp_value = {Pattern(3, 300 << 10)};
  ASSERT_EQ(tcp.MSet({"from-tcp"}, Buffers(tcp_value))->status, BatchCode::kSuccess);
  std::vector<std::vector<char>> back = {std::vector<char>(300 << 10)};
  ASSERT_EQ(client.MGet({"from-tcp"}, {}, Buffers(back))->status, BatchCode::kSuccess);
  EXPECT_EQ(back[0], tcp_value[0]);
}

TEST_P(UcxTransportTest, PerKeyOutcomesMatchTcp) {
  auto server = StartNode(UcxNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(InitRdma(client, server->address()).ok());
  ASSERT_EQ(client.transport(), "UCX") << client.transport_reason();
  std::vector<std::vector<char>> values = {Pattern(3, 64 << 10)};
  ASSERT_EQ(client.MSet({"k"}, Buffers(values), SetOptions{"ns"})->status, BatchCode::kSuccess);

  // A miss, a buffer too small (untouched), a hit.
  std::vector<std::vector<char>> out = {std::vector<char>(16), std::vector<char>(100, 'x'),
                                        std::vector<char>(64 << 10)};
  Result<GetResult> got = client.MGet({"absent", "k", "k"}, GetOptions{"ns"}, Buffers(out));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->codes, (std::vector<KeyCode>{KeyCode::kKeyNotExist, KeyCode::kBufferTooSmall,
                                              KeyCode::kSuccess}));
  EXPECT_EQ(got->value_sizes[1], uint64_t{64} << 10);
  EXPECT_EQ(out[1], std::vector<char>(100, 'x'));
  EXPECT_EQ(out[2], values[0]);

  // A put the node cannot take (larger than the whole node) fails that key alone.
  std::vector<std::vector<char>> mixed = {Pattern(4, 128 << 10), std::vector<char>(65 << 20)};
  Result<BatchResult> put = client.MSet({"fits", "too-big"}, Buffers(mixed), SetOptions{"ns"});
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(put->codes[0], KeyCode::kSuccess);
  EXPECT_NE(put->codes[1], KeyCode::kSuccess);

  Result<BatchResult> del = client.MDel({"k"}, DelOptions{"ns"});
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(del->codes[0], KeyCode::kSuccess);
  Result<BatchResult> exists = client.MExist({"k", "fits"}, ExistOptions{"ns"});
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(exists->codes, (std::vector<KeyCode>{KeyCode::kKeyNotExist, KeyCode::kSuccess}));
  EXPECT_EQ(server->Stats().Get("reserved_bytes"), 0u);  // nothing left reserved
}

TEST_P(UcxTransportTest, ABatchLargerThanOneFrameIsSplitOverTheSessions) {
  ServerOptions options = UcxNodeOptions();
  options.max_batch_keys = 8;  // 40 keys: 5 frames over the pool's sessions, each attached
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(InitRdma(client, server->address(), 3).ok());
  ASSERT_EQ(client.transport(), "UCX") << client.transport_reason();
  std::vector<std::string> keys;
  std::vector<std::vector<char>> values;
  for (int i = 0; i < 40; ++i) {
    keys.push_back("key-" + std::to_string(i));
    values.push_back(Pattern(100 + i, (16 << 10) + i));
  }
  ASSERT_EQ(client.MSet(keys, Buffers(values))->status, BatchCode::kSuccess);
  std::vector<std::vector<char>> out;
  for (int i = 0; i < 40; ++i)
    out.emplace_back((16 << 10) + i);
  Result<GetResult> got = client.MGet(keys, {}, Buffers(out));
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->status, BatchCode::kSuccess) << got->error.ToString();
  EXPECT_EQ(out, values);
}

// LMCache's default, eic_trans_type 3, on a host with a usable CUDA runtime (the fake one): the
// device buffers are staged through pinned host memory, which then go over UCX.
TEST_P(UcxTransportTest, GpuDirectStagesDeviceBuffersAndMovesThemOverUcx) {
  auto server = StartNode(UcxNodeOptions());
  ASSERT_NE(server, nullptr);
  auto cuda = OpenCudaRuntime(KVPORT_FAKE_CUDART);
  ASSERT_TRUE(cuda->usable()) << cuda->reason();
  Client client;
  InitOptions options;
  options.transport_type = 3;
  options.cuda_runtime_library = KVPORT_FAKE_CUDART;
  ASSERT_TRUE(client.Init("ucx-gdr", server->address(), options).ok());
  ASSERT_EQ(client.transport(), "UCX") << client.transport_reason();
  EXPECT_NE(client.transport_reason().find("device buffers are staged"), std::string::npos)
      << client.transport_reason();

  const std::vector<char> value = Pattern(11, 1 << 20);
  Result<void*> in = cuda->AllocDevice(value.size());
  Result<void*> out = cuda->AllocDevice(value.size());
  ASSERT_TRUE(in.ok() && out.ok());
  ASSERT_TRUE(cuda->CopyToDevice(*in, value.data(), value.size()).ok());
  IOBuffers put;
  put.Append(*in, value.size(), true);
  IOBuffers get;
  get.Append(*out, value.size(), true);
  ASSERT_TRUE(client.RegisterMemory(put, MemoryInfo{RuntimeKind::kCuda, 0}).ok());
  ASSERT_TRUE(client.RegisterMemory(get, MemoryInfo{RuntimeKind::kCuda, 0}).ok());
  const uint64_t before = SocketBytes(*server);
  Result<BatchResult> stored = client.MSet({"layer-0"}, put);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ(stored->status, BatchCode::kSuccess) << stored->error.ToString();
  Result<GetResult> loaded = client.MGet({"layer-0"}, {}, get);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->status, BatchCode::kSuccess) << loaded->error.ToString();
  EXPECT_LT(SocketBytes(*server) - before, 4096u);  // the bytes went over UCX
  std::vector<char> back(value.size());
  ASSERT_TRUE(cuda->CopyToHost(back.data(), *out, back.size()).ok());
  EXPECT_EQ(back, value);
  EXPECT_TRUE(cuda->FreeDevice(*in).ok());
  EXPECT_TRUE(cuda->FreeDevice(*out).ok());
}

TEST_P(UcxTransportTest, ANodeWithoutUcxIsServedOverTcpWithTheReason) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(InitRdma(client, server->address()).ok());
  EXPECT_EQ(client.transport(), "TCP");
  EXPECT_NE(client.transport_reason().find("offers no UCX"), std::string::npos)
      << client.transport_reason();
  std::vector<std::vector<char>> values = {Pattern(5, 1 << 20)};
  ASSERT_EQ(client.MSet({"k"}, Buffers(values))->status, BatchCode::kSuccess);

  // eic_trans_type 1 keeps TCP with a node that does offer UCX.
  auto with_ucx = StartNode(UcxNodeOptions());
  ASSERT_NE(with_ucx, nullptr);
  Client tcp;
  InitOptions options;
  options.transport_type = 1;
  ASSERT_TRUE(tcp.Init("ucx-tcp", with_ucx->address(), options).ok());
  EXPECT_EQ(tcp.transport(), "TCP");
}

TEST_P(UcxTransportTest, ARestartedNodeIsAttachedAgain) {
  ServerOptions options = UcxNodeOptions();
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  options.listen = server->address();  // the same port after the restart
  Client client;
  ASSERT_TRUE(InitRdma(client, server->address()).ok());
  ASSERT_EQ(client.transport(), "UCX") << client.transport_reason();
  std::vector<std::vector<char>> values = {Pattern(6, 256 << 10)};
  ASSERT_EQ(client.MSet({"before"}, Buffers(values))->status, BatchCode::kSuccess);

  server->Stop();
  server.reset();
  server = StartNode(options);  // another worker, another arena
  ASSERT_NE(server, nullptr);
  // Calls on sessions of the old node fail Unavailable; the pool reconnects (after its backoff)
  // and each new session attaches the new worker.
  std::vector<std::vector<char>> out = {std::vector<char>(256 << 10)};
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool round_trip = false;
  while (!round_trip && std::chrono::steady_clock::now() < give_up) {
    Result<BatchResult> put = client.MSet({"after"}, Buffers(values));
    if (!put.ok() || put->status != BatchCode::kSuccess) continue;
    Result<GetResult> got = client.MGet({"after"}, {}, Buffers(out));
    round_trip = got.ok() && got->status == BatchCode::kSuccess;
  }
  ASSERT_TRUE(round_trip);
  EXPECT_EQ(out[0], values[0]);
  EXPECT_EQ(client.MExist({"before"})->codes[0], KeyCode::kKeyNotExist);  // a fresh node
}

// An ArenaAccess that loses chosen values as a lost transfer does (Unavailable), passing the
// rest to the real UCX access.
class LosingAccess final : public client::ArenaAccess {
 public:
  explicit LosingAccess(client::UcxArena* real) : real_(real) {}
  std::string_view name() const override { return "UCX (losing)"; }
  bool lends() const override { return false; }
  client::MemoryProtection protection() const override { return real_->protection(); }
  void Write(client::Connection& conn, std::span<client::ArenaMove> moves,
             Deadline deadline) override {
    real_->Write(conn, moves, deadline);
    Lose(moves, &writes_, lose_write, "the write was lost");
  }
  void Read(client::Connection& conn, std::span<client::ArenaMove> moves,
            Deadline deadline) override {
    real_->Read(conn, moves, deadline);
    Lose(moves, &reads_, lose_read, "the read was lost");
  }
  Result<const uint8_t*> Lend(client::Connection& conn, uint64_t offset, uint64_t bytes) override {
    return real_->Lend(conn, offset, bytes);
  }
  Result<bool> LeasesHeld(client::Connection& conn, Deadline deadline) override {
    return real_->LeasesHeld(conn, deadline);
  }
  int lose_write = -1;  // which value (counting every one this access moved) to lose
  int lose_read = -1;

 private:
  static void Lose(std::span<client::ArenaMove> moves, int* count, int lose, const char* why) {
    for (client::ArenaMove& move : moves) {
      if ((*count)++ == lose) move.status = Status::Unavailable(why);
    }
  }
  client::UcxArena* real_;
  int writes_ = 0;
  int reads_ = 0;
};

// One read of [offset, offset + bytes) through `arena`, its outcome.
Status ReadOne(client::UcxArena& arena, client::Connection& conn, uint64_t offset, void* to,
               uint64_t bytes, Deadline deadline) {
  client::ArenaMove move{offset, bytes, to, 0, Status::Ok()};
  arena.Read(conn, std::span<client::ArenaMove>(&move, 1), deadline);
  return move.status;
}

TEST_P(UcxTransportTest, ALostTransferFailsItsKeyAloneAndTheNextOneReconnects) {
  auto server = StartNode(UcxNodeOptions());
  ASSERT_NE(server, nullptr);
  Result<std::unique_ptr<client::UcxArena>> opened = client::UcxArena::Open(ProcessUcxRuntime());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<client::UcxArena> ucx = std::move(opened).value();
  client::PoolOptions pool_options;
  pool_options.connections = 1;
  client::UcxArena* arena = ucx.get();
  pool_options.attach = [arena](client::Connection& conn, Deadline deadline) {
    return arena->Attach(conn, deadline);
  };
  Result<client::Endpoint> endpoint = client::ParseEndpoint(server->address());
  ASSERT_TRUE(endpoint.ok());
  auto pool = std::make_unique<client::ConnectionPool>(endpoint->nodes[0], pool_options);
  const Deadline deadline = MonotonicClock::now() + std::chrono::seconds(30);
  Result<std::shared_ptr<client::Connection>> conn = pool->ConnectFirst(deadline);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto losing = std::make_unique<LosingAccess>(arena);
  LosingAccess* faults = losing.get();
  client::ArenaTransport transport(std::move(losing), std::move(pool));

  // Three 64 KiB values, the second one's write lost: it alone fails, the others are stored.
  std::vector<std::vector<char>> values = {Pattern(7, 64 << 10), Pattern(8, 64 << 10),
                                           Pattern(9, 64 << 10)};
  std::vector<protocol::MsetItem> items;
  const std::vector<std::string> keys = {"a", "b", "c"};
  for (size_t k = 0; k < keys.size(); ++k)
    items.push_back({keys[k], "", values[k].size(), values[k].data()});
  const std::vector<client::FrameSlice> slices = {{0, 3}};
  client::PutBatch put;
  put.items = items;
  put.slices = slices;
  faults->lose_write = 1;
  std::unique_ptr<client::TransportCall> call;
  transport.StartPut(put, deadline, &call);
  std::span<client::FrameResult> stored = call->Finish(deadline);
  ASSERT_EQ(stored.size(), 1u);
  ASSERT_TRUE(stored[0].status.ok()) << stored[0].status.ToString();
  EXPECT_EQ(stored[0].codes,
            (std::vector<StatusCode>{StatusCode::kOk, StatusCode::kUnavailable, StatusCode::kOk}));
  EXPECT_EQ(server->Stats().Get("reserved_bytes"), 0u);  // the lost one's extent was aborted

  // A get whose first read is lost: that key alone fails; "b" was never stored.
  std::vector<std::vector<char>> out(3, std::vector<char>(64 << 10));
  std::vector<protocol::MgetKey> get_keys;
  std::vector<char*> destinations;
  for (size_t k = 0; k < keys.size(); ++k) {
    get_keys.push_back({keys[k], out[k].size()});
    destinations.push_back(out[k].data());
  }
  client::GetBatch get;
  get.keys = get_keys;
  get.destinations = destinations;
  get.slices = slices;
  faults->lose_read = 0;
  transport.StartGet(get, deadline, nullptr, &call);
  std::span<client::FrameResult> read = call->Finish(deadline);
  ASSERT_TRUE(read[0].status.ok()) << read[0].status.ToString();
  EXPECT_EQ(read[0].codes, (std::vector<StatusCode>{StatusCode::kUnavailable, StatusCode::kNotFound,
                                                    StatusCode::kOk}));
  EXPECT_EQ(out[2], values[2]);

  // A real failure: a read past its deadline closes the lane's endpoint; the next transfer
  // connects a fresh one, which the node admits under the session's key.
  EXPECT_EQ(transport.capabilities().memory_protection, client::MemoryProtection::kNodeChecked);
  EXPECT_EQ(arena->endpoints_connected(), 1u);
  std::vector<char> late(64 << 10);
  Status lost = ReadOne(*arena, **conn, 0, late.data(), late.size(), MonotonicClock::now());
  if (lost.ok()) GTEST_SKIP() << "the read finished before its deadline could pass";
  EXPECT_TRUE(lost.code() == StatusCode::kTimeout || lost.code() == StatusCode::kUnavailable)
      << lost.ToString();
  transport.StartGet(get, deadline, nullptr, &call);
  read = call->Finish(deadline);
  ASSERT_TRUE(read[0].status.ok()) << read[0].status.ToString();
  EXPECT_EQ(read[0].codes[0], StatusCode::kOk);
  EXPECT_EQ(out[0], values[0]);
  EXPECT_EQ(arena->endpoints_connected(), 2u);

  // A range outside the arena is the node's fault and never reaches UCX.
  Status outside = ReadOne(*arena, **conn, uint64_t{1} << 40, late.data(), 1, deadline);
  EXPECT_EQ(outside.code(), StatusCode::kCorruption) << outside.ToString();
}

// The network devices UCX's tcp transport lists here ("lo", "eth0"...).
std::vector<std::string> TcpDevices() {
  std::vector<std::string> devices;
  for (const UcxResource& r : ProcessUcxRuntime().info().resources) {
    if (r.transport == "tcp") devices.push_back(r.device);
  }
  return devices;
}

// Multi-rail (ucx_devices): two lanes, each its own worker and endpoint limited to one device,
// a call's values striped over both, every value intact.
TEST_P(UcxTransportTest, TwoLanesStripeACallOverBoth) {
  const std::vector<std::string> tcp = TcpDevices();
  ASSERT_FALSE(tcp.empty());
  // The node listens on loopback, and its UCX only there: both lanes on "lo" (two workers, two
  // endpoints per session, still two lanes).
  ASSERT_NE(std::find(tcp.begin(), tcp.end(), "lo"), tcp.end());
  const std::vector<std::string> lanes = {"lo", "lo"};
  auto server = StartNode(UcxNodeOptions());
  ASSERT_NE(server, nullptr);

  Client client;
  InitOptions options;
  options.transport_type = 2;
  options.ucx_devices = lanes;
  ASSERT_TRUE(client.Init("ucx-lanes", server->address(), options).ok());
  ASSERT_EQ(client.transport(), "UCX") << client.transport_reason();
  EXPECT_NE(client.transport_reason().find("on 2 lanes"), std::string::npos)
      << client.transport_reason();
  std::vector<std::vector<char>> values = {Pattern(21, (3 << 20) + 17), Pattern(22, 100),
                                           Pattern(23, 2 << 20)};
  ASSERT_EQ(client.MSet({"a", "b", "c"}, Buffers(values))->status, BatchCode::kSuccess);
  std::vector<std::vector<char>> out = {std::vector<char>((3 << 20) + 17), std::vector<char>(100),
                                        std::vector<char>(2 << 20)};
  Result<GetResult> got = client.MGet({"a", "b", "c"}, {}, Buffers(out));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->status, BatchCode::kSuccess) << got->error.ToString();
  EXPECT_EQ(out, values);

  // The lanes' own counts: both carried stripes of the same call.
  Result<std::unique_ptr<client::UcxArena>> arena =
      client::UcxArena::Open(ProcessUcxRuntime(), lanes);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  ASSERT_EQ((*arena)->lanes(), 2u);
  client::UcxArena* raw = arena->get();
  client::PoolOptions pool_options;
  pool_options.connections = 1;
  pool_options.attach = [raw](client::Connection& conn, Deadline deadline) {
    return raw->Attach(conn, deadline);
  };
  Result<client::Endpoint> endpoint = client::ParseEndpoint(server->address());
  ASSERT_TRUE(endpoint.ok());
  client::ArenaTransport transport(
      std::move(arena).value(),
      std::make_unique<client::ConnectionPool>(endpoint->nodes[0], pool_options));
  const Deadline deadline = MonotonicClock::now() + std::chrono::seconds(30);
  std::vector<protocol::MgetKey> keys = {{"a", out[0].size()}};
  std::vector<char*> destinations = {out[0].data()};
  const std::vector<client::FrameSlice> slices = {{0, 1}};
  client::GetBatch get;
  get.keys = keys;
  get.destinations = destinations;
  get.slices = slices;
  std::fill(out[0].begin(), out[0].end(), 0);
  std::unique_ptr<client::TransportCall> call;
  transport.StartGet(get, deadline, nullptr, &call);
  std::span<client::FrameResult> read = call->Finish(deadline);
  ASSERT_TRUE(read[0].status.ok()) << read[0].status.ToString();
  EXPECT_EQ(read[0].codes[0], StatusCode::kOk);
  EXPECT_EQ(out[0], values[0]);
  const std::vector<uint64_t> moved = raw->lane_bytes();
  ASSERT_EQ(moved.size(), 2u);
  EXPECT_EQ(moved[0], uint64_t{2} << 20);  // stripes 0 and 2 of the 3 MiB + 17 value
  EXPECT_EQ(moved[1], (uint64_t{1} << 20) + 17);
}

// A node that answers UCX_ATTACH with garbage, or with a UCX port where nothing listens: the
// attach fails with a clear error, the process lives, and a plain TCP session still connects.
TEST(UcxArenaTest, AGarbageAttachAnswerFailsTheAttachCleanly) {
  ::setenv("UCX_TLS", "tcp", 1);
  if (!ProcessUcxRuntime().usable()) {
    ::unsetenv("UCX_TLS");
    GTEST_SKIP() << "no usable UCX here: " << ProcessUcxRuntime().reason();
  }
  // A port nobody listens on: bound, then closed.
  uint16_t nowhere = 0;
  ::close(testing::ListenOnLoopback(&nowhere));
  testing::FakeNode node([nowhere](testing::FakeConn& conn, int index) {
    if (!conn.Hello()) return;
    testing::FakeFrame request;
    if (index < 2) {
      if (!conn.Read(&request) || request.header.opcode != protocol::Opcode::kUcxAttach) return;
      protocol::UcxAttachResponse answer;
      const std::string key(protocol::kUcxSessionKeyBytes, 'k');
      answer.ucx_port = nowhere;
      answer.session_key = key;
      answer.arena_bytes = 1 << 20;
      protocol::EncodedFrame frame;
      ASSERT_TRUE(protocol::EncodeResponse(request.header.request_id, answer, {}, &frame,
                                           request.header.version)
                      .ok());
      std::string bytes = frame.Flatten();
      // The first answer's key length says 200 bytes: more than the frame holds.
      if (index == 0) bytes[protocol::kFrameHeaderSize + 3] = static_cast<char>(200);
      conn.Write(bytes);
    }
    while (conn.Read(&request)) {  // held open until the client closes
    }
  });
  Result<std::unique_ptr<client::UcxArena>> opened = client::UcxArena::Open(ProcessUcxRuntime());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  client::UcxArena* arena = opened->get();
  Result<client::Endpoint> endpoint = client::ParseEndpoint(node.address());
  ASSERT_TRUE(endpoint.ok());
  const Deadline deadline = MonotonicClock::now() + std::chrono::seconds(20);
  client::PoolOptions with_ucx;
  with_ucx.connections = 1;
  with_ucx.attach = [arena](client::Connection& conn, Deadline d) {
    return arena->Attach(conn, d);
  };
  {
    client::ConnectionPool garbage(endpoint->nodes[0], with_ucx);
    Result<std::shared_ptr<client::Connection>> conn = garbage.ConnectFirst(deadline);
    ASSERT_FALSE(conn.ok());
    EXPECT_EQ(conn.status().code(), StatusCode::kCorruption) << conn.status().ToString();
  }
  {
    client::ConnectionPool unreachable(endpoint->nodes[0], with_ucx);
    Result<std::shared_ptr<client::Connection>> conn = unreachable.ConnectFirst(deadline);
    ASSERT_FALSE(conn.ok());
    EXPECT_EQ(conn.status().code(), StatusCode::kUnavailable) << conn.status().ToString();
    EXPECT_NE(conn.status().message().find(":" + std::to_string(nowhere)), std::string::npos)
        << conn.status().ToString();
  }
  client::PoolOptions plain;
  plain.connections = 1;
  client::ConnectionPool tcp(endpoint->nodes[0], plain);
  Result<std::shared_ptr<client::Connection>> conn = tcp.ConnectFirst(deadline);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();  // its HELLO was answered
  EXPECT_TRUE((*conn)->alive());
  ::unsetenv("UCX_TLS");
}

TEST(UcxArenaTest, AnUnknownDeviceIsRefusedNamingTheLane) {
  ::setenv("UCX_TLS", "tcp", 1);
  if (!ProcessUcxRuntime().usable()) {
    ::unsetenv("UCX_TLS");
    GTEST_SKIP() << "no usable UCX here: " << ProcessUcxRuntime().reason();
  }
  auto server = StartNode(UcxNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  InitOptions options;
  options.transport_type = 2;
  options.ucx_devices = {TcpDevices().front(), "no-such-device0"};
  Status init = client.Init("ucx-bad-lane", server->address(), options);
  ::unsetenv("UCX_TLS");
  // The client still works, over TCP, and says why UCX was not used.
  ASSERT_TRUE(init.ok()) << init.ToString();
  EXPECT_EQ(client.transport(), "TCP");
  EXPECT_NE(client.transport_reason().find("UCX lane 1 (ucx_devices 'no-such-device0')"),
            std::string::npos)
      << client.transport_reason();
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxTransportTest, ::testing::Values(kUcxTcp, kUcxSharedMemory),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           return std::string(param.param) == kUcxTcp ? "Tcp" : "SharedMemory";
                         });

}  // namespace
}  // namespace kvport
