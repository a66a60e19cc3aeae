// SPDX-License-Identifier: Apache-2.0
// The same-host shared-memory transport against a real node: choosing it, moving values through
// the mapped arena (and not the socket), lending values in place, leases against eviction.
#include <gtest/gtest.h>

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "client/arena_mapping.h"
#include "client/arena_transport.h"
#include "client/endpoint.h"
#include "client/socket_io.h"
#include "client/socket_watcher.h"
#include "kvport/client.h"
#include "kvport/server.h"
#include "net/stream.h"
#include "net/unix_listener.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "test_node.h"

namespace kvport {
namespace {

using testing::Buffers;
using testing::Pattern;
using testing::SmallNodeOptions;
using testing::SocketBytes;
using testing::StartNode;

ServerOptions ShmNodeOptions(uint64_t capacity = uint64_t{64} << 20) {
  ServerOptions options = SmallNodeOptions(capacity);
  options.unix_socket = "auto";
  return options;
}

IOBuffers One(std::vector<char>& value) {
  IOBuffers buffers;
  buffers.Append(value.data(), value.size());
  return buffers;
}

TEST(ShmTransportTest, AutoPicksSharedMemoryForANodeOnThisHost) {
  auto server = StartNode(ShmNodeOptions());
  ASSERT_NE(server, nullptr);
  ASSERT_FALSE(server->unix_socket_path().empty());
  Client client;
  ASSERT_TRUE(client.Init("shm-auto", server->address()).ok());
  EXPECT_EQ(client.transport(), "shared memory") << client.transport_reason();
  EXPECT_NE(client.transport_reason().find(server->unix_socket_path()), std::string::npos)
      << client.transport_reason();

  // eic_trans_type 1 forces TCP even so.
  Client tcp;
  InitOptions options;
  options.transport_type = 1;
  ASSERT_TRUE(tcp.Init("shm-tcp", server->address(), options).ok());
  EXPECT_EQ(tcp.transport(), "TCP");
}

TEST(ShmTransportTest, NoUnixSocketMeansTcpWithTheReason) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(client.Init("shm-none", server->address()).ok());
  EXPECT_EQ(client.transport(), "TCP");
  EXPECT_NE(client.transport_reason().find("offers no shared memory"), std::string::npos)
      << client.transport_reason();
  Result<LentValues> lent = client.MGetInPlace({"k"});
  ASSERT_FALSE(lent.ok());
  EXPECT_EQ(lent.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(lent.status().message().find("shared-memory transport"), std::string::npos);
}

TEST(ShmTransportTest, PutAndGetMoveValuesThroughTheArenaNotTheSocket) {
  auto server = StartNode(ShmNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(client.Init("shm-bytes", "unix:" + server->unix_socket_path()).ok());
  ASSERT_EQ(client.transport(), "shared memory") << client.transport_reason();

  // 4 MiB and 1 MiB values, an empty one, and metas.
  std::vector<std::string> keys = {"big", "mid", "empty"};
  std::vector<std::vector<char>> values = {Pattern(1, 4 << 20), Pattern(2, 1 << 20), {}};
  const uint64_t value_bytes = (4 << 20) + (1 << 20);
  const uint64_t before = SocketBytes(*server);
  Result<BatchResult> put = client.MSet(keys, Buffers(values), {}, {"m-big", "", "m-empty"});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->status, BatchCode::kSuccess) << put->error.ToString();

  std::vector<std::vector<char>> out = {std::vector<char>(4 << 20), std::vector<char>(1 << 20),
                                        std::vector<char>(8)};
  Result<GetResult> got = client.MGet(keys, {}, Buffers(out));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->status, BatchCode::kSuccess) << got->error.ToString();
  EXPECT_EQ(out[0], values[0]);
  EXPECT_EQ(out[1], values[1]);
  EXPECT_EQ(got->value_sizes, (std::vector<uint64_t>{4 << 20, 1 << 20, 0}));
  EXPECT_EQ(got->metas, (std::vector<std::string>{"m-big", "", "m-empty"}));

  // Only control frames crossed the socket: a put and a get of 5 MiB moved a few hundred bytes.
  const uint64_t through_socket = SocketBytes(*server) - before;
  EXPECT_LT(through_socket, 4096u)
      << through_socket << " socket bytes for " << value_bytes << " value bytes";

  // A TCP client sees the same objects (one store), and its bytes do cross the socket (a put:
  // the node counts received bytes before it answers).
  Client tcp;
  InitOptions options;
  options.transport_type = 1;
  ASSERT_TRUE(tcp.Init("shm-tcp", server->address(), options).ok());
  std::vector<char> via_tcp(4 << 20);
  Result<GetResult> tcp_got = tcp.MGet({"big"}, {}, One(via_tcp));
  ASSERT_TRUE(tcp_got.ok());
  EXPECT_EQ(via_tcp, values[0]);
  const uint64_t before_tcp_put = server->Stats().Get("bytes_received");
  ASSERT_TRUE(tcp.MSet({"big-tcp"}, One(via_tcp)).ok());
  EXPECT_GT(server->Stats().Get("bytes_received") - before_tcp_put, uint64_t{4} << 20);
}

// A put of a few KiB is one MSET exchange with the value in the request, not a reservation,
// a copy and a commit; one just over the limit goes through the arena.
TEST(ShmTransportTest, ASmallPutIsOneExchangeThroughTheSocket) {
  auto server = StartNode(ShmNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(client.Init("shm-small-put", "unix:" + server->unix_socket_path()).ok());
  ASSERT_EQ(client.transport(), "shared memory") << client.transport_reason();
  ASSERT_TRUE(client.Ping().ok());

  std::vector<char> small = Pattern(5, client::ArenaTransport::kMaxInlinePutBytes);
  std::vector<char> large = Pattern(6, client::ArenaTransport::kMaxInlinePutBytes + 1);
  uint64_t before = SocketBytes(*server);
  ASSERT_TRUE(client.MSet({"small"}, One(small)).ok());
  EXPECT_GT(SocketBytes(*server) - before, small.size());
  EXPECT_EQ(server->Stats().Get("reserved_bytes"), 0u);

  before = SocketBytes(*server);
  ASSERT_TRUE(client.MSet({"large"}, One(large)).ok());
  EXPECT_LT(SocketBytes(*server) - before, 1024u);

  std::vector<std::vector<char>> out = {std::vector<char>(small.size()),
                                        std::vector<char>(large.size())};
  Result<GetResult> got = client.MGet({"small", "large"}, {}, Buffers(out));
  ASSERT_TRUE(got.ok() && got->status == BatchCode::kSuccess);
  EXPECT_EQ(out[0], small);
  EXPECT_EQ(out[1], large);
}

// From protocol version 7 the node does not answer ARENA_RELEASE: a shared-memory get is one
// exchange (and a release the client sends), so over gets the node sends exactly their answers.
TEST(ShmTransportTest, AGetsReleaseIsNotAnswered) {
  auto server = StartNode(ShmNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(client.Init("shm-release", "unix:" + server->unix_socket_path()).ok());
  ASSERT_EQ(client.transport(), "shared memory") << client.transport_reason();
  std::vector<char> value = Pattern(4, 4096);
  ASSERT_TRUE(client.MSet({"k"}, One(value)).ok());

  // What the node sends for each: a one-key ARENA_GET answer (a hit, no meta), and a PING's.
  protocol::EncodedFrame get_answer, ping_answer;
  protocol::ArenaGetResponse hit;
  hit.lease_id = 1;
  hit.results.push_back(protocol::ArenaGetResult{StatusCode::kOk, "", value.size(), 4096});
  ASSERT_TRUE(protocol::EncodeResponse(1, hit, protocol::Limits{}, &get_answer,
                                       protocol::kMaxProtocolVersion)
                  .ok());
  ASSERT_TRUE(protocol::EncodeResponse(1, protocol::PingResponse{}, protocol::Limits{},
                                       &ping_answer, protocol::kMaxProtocolVersion)
                  .ok());

  constexpr int kGets = 20, kPings = 4;
  std::vector<char> out(value.size());
  // Every connection of the client opened (their HELLO and SHM_ATTACH answers are not counted).
  for (int i = 0; i < kGets; ++i) {
    ASSERT_TRUE(client.MGet({"k"}, {}, One(out)).ok());
    ASSERT_TRUE(client.Ping().ok());
  }
  // The node counts an answer's bytes after writing it, on the connection's I/O thread, so at
  // `before` each connection's last answer may not be counted yet; the ones before it on that
  // connection are (counted before the next was written). End on PINGs on every connection,
  // whose answers are then the only ones that can be counted late.
  constexpr int kConnections = 2;  // InitOptions' default
  for (int i = 0; i < 2 * kConnections; ++i)
    ASSERT_TRUE(client.Ping().ok());
  const uint64_t connections = server->Stats().Get("connections_accepted");
  const uint64_t before = server->Stats().Get("bytes_sent");
  for (int i = 0; i < kGets; ++i) {
    Result<GetResult> got = client.MGet({"k"}, {}, One(out));
    ASSERT_TRUE(got.ok() && got->status == BatchCode::kSuccess);
    ASSERT_EQ(out, value);
  }
  // The releases are not waited for; a PING behind them on every session is answered after.
  for (int i = 0; i < kPings; ++i)
    ASSERT_TRUE(client.Ping().ok());
  EXPECT_EQ(server->Stats().Get("leases"), 0u);
  ASSERT_EQ(server->Stats().Get("connections_accepted"), connections);
  // The node counts a write once it is made, so the last answer may be in before it is counted.
  const uint64_t expected = kGets * get_answer.head.size() + kPings * ping_answer.head.size();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server->Stats().Get("bytes_sent") - before < expected &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // The warm-up's last answers (PINGs, one per connection) may have been counted only after
  // `before` was read.
  const uint64_t sent = server->Stats().Get("bytes_sent") - before;
  EXPECT_GE(sent, expected);
  EXPECT_LE(sent, expected + kConnections * ping_answer.head.size())
      << "answers besides the gets' and pings'";
}

TEST(ShmTransportTest, PerKeyOutcomesMatchTcp) {
  auto server = StartNode(ShmNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(client.Init("shm-codes", "unix:" + server->unix_socket_path()).ok());
  std::vector<std::vector<char>> values = {Pattern(3, 4096)};
  ASSERT_TRUE(client.MSet({"k"}, Buffers(values), SetOptions{"ns"}).ok());

  // A miss, a buffer too small (untouched), a hit.
  std::vector<std::vector<char>> out = {std::vector<char>(16), std::vector<char>(100, 'x'),
                                        std::vector<char>(4096)};
  Result<GetResult> got = client.MGet({"absent", "k", "k"}, GetOptions{"ns"}, Buffers(out));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->codes, (std::vector<KeyCode>{KeyCode::kKeyNotExist, KeyCode::kBufferTooSmall,
                                              KeyCode::kSuccess}));
  EXPECT_EQ(got->value_sizes[1], 4096u);
  EXPECT_EQ(out[1], std::vector<char>(100, 'x'));
  EXPECT_EQ(out[2], values[0]);

  // Any namespace, meta-only, exists and delete over the same Unix-socket sessions.
  GetOptions any;
  any.any_namespace = true;
  std::vector<char> any_out(4096);
  Result<GetResult> found = client.MGet({"k"}, any, One(any_out));
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->codes[0], KeyCode::kSuccess);
  EXPECT_EQ(any_out, values[0]);
  Result<GetResult> meta = client.MGetMeta({"k"}, GetOptions{"ns"});
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->value_sizes[0], 4096u);
  Result<BatchResult> del = client.MDel({"k"}, DelOptions{"ns"});
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(del->codes[0], KeyCode::kSuccess);
  Result<BatchResult> exists = client.MExist({"k"}, ExistOptions{"ns"});
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(exists->codes[0], KeyCode::kKeyNotExist);
}

TEST(ShmTransportTest, ABatchLargerThanOneFrameIsSplitAndCommittedOnItsOwnSessions) {
  ServerOptions options = ShmNodeOptions();
  options.max_batch_keys = 8;  // 50 keys: 7 frames over the pool's sessions
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  Client client;
  InitOptions init;
  init.connections = 3;
  ASSERT_TRUE(client.Init("shm-frames", server->address(), init).ok());
  ASSERT_EQ(client.transport(), "shared memory");
  std::vector<std::string> keys;
  std::vector<std::vector<char>> values;
  for (int i = 0; i < 50; ++i) {
    keys.push_back("key-" + std::to_string(i));
    values.push_back(Pattern(100 + i, 1000 + i));
  }
  Result<BatchResult> put = client.MSet(keys, Buffers(values));
  ASSERT_TRUE(put.ok());
  ASSERT_EQ(put->status, BatchCode::kSuccess) << put->error.ToString();
  std::vector<std::vector<char>> out;
  for (int i = 0; i < 50; ++i)
    out.emplace_back(1000 + i);
  Result<GetResult> got = client.MGet(keys, {}, Buffers(out));
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->status, BatchCode::kSuccess);
  EXPECT_EQ(out, values);
  EXPECT_EQ(server->Stats().Get("reserved_bytes"), 0u);  // every reservation was committed
}

TEST(ShmTransportTest, LentValuesAreReadInPlaceAndSurviveEvictionUntilReleased) {
  auto server = StartNode(ShmNodeOptions(uint64_t{8} << 20));  // room for ~7 MiB values
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(client.Init("shm-lend", "unix:" + server->unix_socket_path()).ok());
  std::vector<std::vector<char>> values = {Pattern(7, 1 << 20)};
  ASSERT_TRUE(client.MSet({"lent"}, Buffers(values)).ok());

  Result<LentValues> lent = client.MGetInPlace({"lent", "absent"});
  ASSERT_TRUE(lent.ok()) << lent.status().ToString();
  ASSERT_TRUE(lent->valid());
  EXPECT_EQ(lent->result().codes, (std::vector<KeyCode>{KeyCode::kSuccess, KeyCode::kKeyNotExist}));
  ASSERT_EQ(lent->value(0).size(), values[0].size());
  EXPECT_TRUE(lent->value(1).empty());
  EXPECT_EQ(std::memcmp(lent->value(0).data(), values[0].data(), values[0].size()), 0);
  EXPECT_EQ(server->Stats().Get("leases"), 1u);

  // Overwrite the key and fill the node several times over: the old version is evicted from
  // view, but its bytes are leased, so they stay exactly as they were.
  std::vector<std::vector<char>> other = {Pattern(8, 1 << 20)};
  ASSERT_TRUE(client.MSet({"lent"}, Buffers(other)).ok());
  for (int i = 0; i < 24; ++i) {
    std::vector<std::vector<char>> filler = {Pattern(1000 + i, 1 << 20)};
    ASSERT_TRUE(client.MSet({"filler-" + std::to_string(i)}, Buffers(filler)).ok());
  }
  EXPECT_GT(server->Stats().Get("evictions"), 0u);
  EXPECT_EQ(std::memcmp(lent->value(0).data(), values[0].data(), values[0].size()), 0);

  // Released: the node drops the pin (the release is not waited for; a PING behind it on every
  // session is answered after it).
  lent->Release();
  EXPECT_FALSE(lent->valid());
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(client.Ping().ok());
  EXPECT_EQ(server->Stats().Get("leases"), 0u);
  EXPECT_EQ(server->Stats().Get("leased_bytes"), 0u);
}

// Keeps the process's socket watcher busy in a callback of its own until Release: meanwhile no
// connection of the process reads its socket between calls, so a client cannot see its node
// close a connection, and alive() stays true.
class WatcherHold final : public client::SocketWatcher::Watched {
 public:
  WatcherHold() {
    Result<std::shared_ptr<client::SocketWatcher>> shared = client::SocketWatcher::Shared();
    EXPECT_TRUE(shared.ok());
    watcher_ = *shared;
    EXPECT_TRUE(watcher_->Add(this, event_.fd()).ok());
    watcher_->Watch(this, /*readable=*/true, client::kNoDeadline);  // the eventfd is readable
    entered_.get_future().wait();
  }
  ~WatcherHold() override {
    Release();
    watcher_->Remove(this);
  }
  void OnWatch() override {
    if (visited_) return;
    visited_ = true;
    entered_.set_value();
    released_.get_future().wait();
  }
  void Release() {
    if (!released_set_) released_.set_value();
    released_set_ = true;
  }

 private:
  net::Socket event_{::eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::shared_ptr<client::SocketWatcher> watcher_;
  bool visited_ = false;  // the watcher's thread only
  std::promise<void> entered_;
  std::promise<void> released_;
  bool released_set_ = false;
};

// A lent value read while the node ended its lease (the session's end: here the node stopping)
// is not vouched for: valid(), called after the read, says so, even though the client has not
// yet noticed the connection close (its watcher is held), so only the lease word can tell.
TEST(ShmTransportTest, ValidAfterAReadSaysWhetherTheNodeEndedTheLeaseMeanwhile) {
  auto server = StartNode(ShmNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(client.Init("shm-word", "unix:" + server->unix_socket_path()).ok());
  ASSERT_EQ(client.transport(), "shared memory") << client.transport_reason();
  std::vector<std::vector<char>> values = {Pattern(3, 64 << 10)};
  ASSERT_TRUE(client.MSet({"k"}, Buffers(values)).ok());

  Result<LentValues> lent = client.MGetInPlace({"k"});
  ASSERT_TRUE(lent.ok()) << lent.status().ToString();
  std::vector<char> copy(lent->value(0).begin(), lent->value(0).end());
  EXPECT_TRUE(lent->valid());  // read, then checked: the copy is the value
  EXPECT_EQ(copy, values[0]);

  WatcherHold hold;
  server->Stop();  // every session ends: their words move before any leased byte is freed
  copy.assign(lent->value(0).begin(), lent->value(0).end());
  EXPECT_FALSE(lent->valid());
  hold.Release();
}

// The shared-memory MGet copies out of the arena under a lease: a copy finished after the node
// ended the lease is a failed frame, never bytes returned as a hit.
// A get's release goes with the connection's next request (one write for both), and the
// socket watcher sends it when no request follows. With the watcher held, nothing but a request
// can carry it: after K gets the node has seen K - 1 releases and holds the last lease.
TEST(ShmTransportTest, AGetsReleaseGoesWithTheNextRequest) {
  auto server = StartNode(ShmNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  InitOptions one;
  one.connections = 1;
  ASSERT_TRUE(client.Init("shm-deferred", "unix:" + server->unix_socket_path(), one).ok());
  ASSERT_EQ(client.transport(), "shared memory") << client.transport_reason();
  std::vector<char> value = Pattern(5, 4096);
  std::vector<char> out(value.size());
  ASSERT_TRUE(client.MSet({"k"}, One(value)).ok());

  constexpr uint64_t kGets = 10;
  {
    WatcherHold hold;
    const uint64_t before = server->Stats().Get("op_arena_release");
    for (uint64_t i = 0; i < kGets; ++i) {
      Result<GetResult> got = client.MGet({"k"}, {}, One(out));
      ASSERT_TRUE(got.ok() && got->status == BatchCode::kSuccess);
    }
    EXPECT_EQ(server->Stats().Get("op_arena_release") - before, kGets - 1);
    EXPECT_EQ(server->Stats().Get("leases"), 1u);
    ASSERT_TRUE(client.Ping().ok());  // carries the last one
    EXPECT_EQ(server->Stats().Get("op_arena_release") - before, kGets);
    EXPECT_EQ(server->Stats().Get("leases"), 0u);
    ASSERT_TRUE(client.MGet({"k"}, {}, One(out)).ok());
    EXPECT_EQ(server->Stats().Get("leases"), 1u);
  }
  // No request follows: the watcher, free again, sends it at its next callback.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server->Stats().Get("leases") != 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(server->Stats().Get("leases"), 0u);
}

TEST(ShmTransportTest, AGetWhoseLeaseEndedBeforeItsCopyIsNotAHit) {
  auto server = StartNode(ShmNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(client.Init("shm-copy", "unix:" + server->unix_socket_path()).ok());
  ASSERT_EQ(client.transport(), "shared memory") << client.transport_reason();
  std::vector<std::vector<char>> values = {Pattern(4, 64 << 10)};
  ASSERT_TRUE(client.MSet({"k"}, Buffers(values)).ok());

  std::vector<char> out(64 << 10);
  const std::vector<std::string> keys = {"k"};  // a started call's keys outlive it
  Pending<GetResult> pending = client.MGetAsync(keys, {}, One(out));
  // The node's answer (an offset under a lease) is in before the node stops; the copy is not
  // made until Wait.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!pending.Ready()) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "the ARENA_GET answer never came";
    std::this_thread::yield();
  }
  server->Stop();
  Result<GetResult> got = pending.Wait();  // its only frame failed: the call failed
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(got.status().message().find("ended the session while its values were being read"),
            std::string::npos)
      << got.status().ToString();
}

TEST(ShmTransportTest, ANodeWithoutSharedMemoryServesTheUnixSocketWithBytes) {
  ServerOptions options = ShmNodeOptions();
  options.shared_memory = false;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(client.Init("shm-off", "unix:" + server->unix_socket_path()).ok());
  EXPECT_EQ(client.transport(), "Unix socket");
  EXPECT_NE(client.transport_reason().find("switched off"), std::string::npos)
      << client.transport_reason();
  std::vector<std::vector<char>> values = {Pattern(9, 65536)};
  ASSERT_TRUE(client.MSet({"k"}, Buffers(values)).ok());
  std::vector<std::vector<char>> out = {std::vector<char>(65536)};
  ASSERT_TRUE(client.MGet({"k"}, {}, Buffers(out)).ok());
  EXPECT_EQ(out, values);
  // The node counts bytes sent after its write returns, which may be after the client read
  // them: a PING on each session is answered after that count.
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(client.Ping().ok());
  EXPECT_GT(SocketBytes(*server), 2u * 65536);

  // A TCP client of this node is not offered shared memory either.
  Client tcp;
  ASSERT_TRUE(tcp.Init("shm-off-tcp", server->address()).ok());
  EXPECT_EQ(tcp.transport(), "TCP");
}

// One round trip on a raw Unix-socket session: `request` sent as frame `id`, the answer's
// header and descriptor read back, with whatever descriptors ride with it.
template <typename Request>
Status RawCall(net::Stream& stream, uint64_t id, const Request& request, uint8_t version,
               protocol::FrameHeader* header, std::string* descriptor,
               std::vector<net::Socket>* passed) {
  const client::Deadline deadline = MonotonicClock::now() + std::chrono::seconds(10);
  const protocol::Limits defaults;
  protocol::EncodedFrame frame;
  KVPORT_RETURN_IF_ERROR(protocol::EncodeRequest(id, request, defaults, &frame, version));
  iovec iov{frame.head.data(), frame.head.size()};
  KVPORT_RETURN_IF_ERROR(client::WriteFully(stream, std::span<iovec>(&iov, 1), deadline));
  char head[protocol::kFrameHeaderSize];
  KVPORT_RETURN_IF_ERROR(
      client::ReadFullyWithDescriptors(stream.fd(), head, sizeof(head), deadline, passed));
  KVPORT_RETURN_IF_ERROR(
      protocol::DecodeFrameHeader(std::string_view(head, sizeof(head)), defaults, header));
  descriptor->assign(header->descriptor_length, '\0');
  return client::ReadFully(stream, descriptor->data(), descriptor->size(), deadline);
}

// A same-host client holds the descriptors SHM_ATTACH passes it (the arena's memfd, the lease
// words'): whatever it does with them, ftruncate included, must not crash the node. Both are
// sealed against resizing, so the node goes on serving every byte, and ends sessions (writing
// their lease words) as before.
TEST(ShmTransportTest, AClientCannotResizeTheMemoryTheNodeShares) {
  auto server = StartNode(ShmNodeOptions());
  ASSERT_NE(server, nullptr);
  Client client;
  ASSERT_TRUE(client.Init("shm-sealed", "unix:" + server->unix_socket_path()).ok());
  ASSERT_EQ(client.transport(), "shared memory") << client.transport_reason();
  std::vector<std::vector<char>> values = {Pattern(21, 1 << 20)};
  ASSERT_TRUE(client.MSet({"before"}, Buffers(values)).ok());

  // Attached the way any process of the node's user can: HELLO, then SHM_ATTACH.
  Result<net::Socket> socket = net::ConnectUnix(server->unix_socket_path());
  ASSERT_TRUE(socket.ok()) << socket.status().ToString();
  net::Stream stream(std::move(socket).value());
  protocol::FrameHeader header;
  std::string descriptor;
  protocol::HelloRequest hello;
  hello.client_name = "resizer";
  ASSERT_TRUE(
      RawCall(stream, 1, hello, protocol::kMinProtocolVersion, &header, &descriptor, nullptr).ok());
  protocol::HelloResponse hello_response;
  ASSERT_TRUE(
      protocol::DecodeResponse(header, descriptor, protocol::Limits{}, &hello_response).ok());
  ASSERT_GE(hello_response.version, protocol::kLeaseWordVersion);
  std::vector<net::Socket> memfds;
  ASSERT_TRUE(RawCall(stream, 2, protocol::ShmAttachRequest{}, hello_response.version, &header,
                      &descriptor, &memfds)
                  .ok());
  protocol::ShmAttachResponse attach;
  ASSERT_TRUE(protocol::DecodeResponse(header, descriptor, hello_response.limits, &attach).ok());
  ASSERT_EQ(attach.status, StatusCode::kOk) << attach.reason;
  ASSERT_EQ(memfds.size(), 2u);  // the arena, the lease words

  for (const net::Socket& memfd : memfds) {
    struct stat before {};
    ASSERT_EQ(::fstat(memfd.fd(), &before), 0);
    // Shrinking last: unsealed, the node would die of SIGBUS serving what follows.
    for (off_t size : {before.st_size + 65536, before.st_size / 2, off_t{0}}) {
      errno = 0;
      EXPECT_EQ(::ftruncate(memfd.fd(), size), -1) << "to " << size << " of " << before.st_size;
      EXPECT_EQ(errno, EPERM) << "to " << size << " of " << before.st_size;
    }
    struct stat after {};
    ASSERT_EQ(::fstat(memfd.fd(), &after), 0);
    EXPECT_EQ(after.st_size, before.st_size);
  }

  // The node serves every byte of its arena as before: the value stored before, and enough
  // new ones to wrap the 64 MiB arena, through shared memory and over TCP.
  for (int i = 0; i < 80; ++i) {
    std::vector<std::vector<char>> filler = {Pattern(100 + i, 1 << 20)};
    ASSERT_TRUE(client.MSet({"filler-" + std::to_string(i)}, Buffers(filler)).ok());
  }
  std::vector<std::vector<char>> out = {std::vector<char>(1 << 20)};
  ASSERT_TRUE(client.MGet({"filler-79"}, {}, Buffers(out)).ok());
  EXPECT_EQ(out[0], Pattern(179, 1 << 20));
  Client tcp;
  ASSERT_TRUE(tcp.Init("shm-sealed-tcp", server->address()).ok());
  ASSERT_TRUE(tcp.MGet({"filler-79"}, {}, Buffers(out)).ok());
  EXPECT_EQ(out[0], Pattern(179, 1 << 20));
  // Ending the raw session writes its lease word; the node goes on.
  stream.Close();
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(client.Ping().ok());
  EXPECT_TRUE(tcp.Ping().ok());
}

TEST(ShmTransportTest, TheUnixSocketIsOwnerOnlyAndRemovedOnStop) {
  auto server = StartNode(ShmNodeOptions());
  ASSERT_NE(server, nullptr);
  const std::string path = server->unix_socket_path();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  server->Stop();
  EXPECT_NE(::stat(path.c_str(), &st), 0);
}

TEST(ShmTransportTest, EndpointParsesUnixPaths) {
  Result<client::Endpoint> unix_endpoint = client::ParseEndpoint("unix:/run/kvport/node.sock");
  ASSERT_TRUE(unix_endpoint.ok());
  EXPECT_EQ(unix_endpoint->nodes.at(0).unix_path, "/run/kvport/node.sock");
  EXPECT_EQ(unix_endpoint->nodes.at(0).ToString(), "unix:/run/kvport/node.sock");
  EXPECT_FALSE(client::ParseEndpoint("unix:relative.sock").ok());
  EXPECT_FALSE(client::ParseEndpoint("unix:/" + std::string(200, 'a')).ok());
}

TEST(ShmTransportTest, AMappingRefusesRangesOutsideTheArena) {
  // A memfd of 64 KiB stands in for an arena: a node answering an offset past it is caught.
  int fd = ::memfd_create("test-arena", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 65536), 0);
  Result<std::shared_ptr<client::ArenaMapping>> wrong_size =
      client::ArenaMapping::Map(net::Socket(::dup(fd)), 131072, net::Socket());
  EXPECT_EQ(wrong_size.status().code(), StatusCode::kCorruption);
  Result<std::shared_ptr<client::ArenaMapping>> mapping =
      client::ArenaMapping::Map(net::Socket(fd), 65536, net::Socket());
  ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
  EXPECT_TRUE((*mapping)->ReadRange(0, 65536).ok());
  EXPECT_EQ((*mapping)->ReadRange(65536, 1).status().code(), StatusCode::kCorruption);
  EXPECT_EQ((*mapping)->WriteRange(uint64_t{1} << 63, uint64_t{1} << 63).status().code(),
            StatusCode::kCorruption);
}

// Lease words the node names are checked like arena offsets: inside the memfd, 8-byte aligned.
TEST(ShmTransportTest, AMappingRefusesLeaseWordsOutsideItsLeaseWords) {
  int arena = ::memfd_create("test-arena", MFD_CLOEXEC);
  int words = ::memfd_create("test-words", MFD_CLOEXEC);
  ASSERT_GE(arena, 0);
  ASSERT_GE(words, 0);
  ASSERT_EQ(::ftruncate(arena, 65536), 0);
  ASSERT_EQ(::ftruncate(words, 4096), 0);
  Result<std::shared_ptr<client::ArenaMapping>> without =
      client::ArenaMapping::Map(net::Socket(::dup(arena)), 65536, net::Socket());
  ASSERT_TRUE(without.ok());
  EXPECT_EQ((*without)->LeaseWord(0).status().code(), StatusCode::kNotSupported);
  Result<std::shared_ptr<client::ArenaMapping>> mapping =
      client::ArenaMapping::Map(net::Socket(arena), 65536, net::Socket(words));
  ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
  EXPECT_TRUE((*mapping)->LeaseWord(4088).ok());
  EXPECT_EQ((*mapping)->LeaseWord(4096).status().code(), StatusCode::kCorruption);
  EXPECT_EQ((*mapping)->LeaseWord(12).status().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace kvport
