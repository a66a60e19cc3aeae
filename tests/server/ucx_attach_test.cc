// SPDX-License-Identifier: Apache-2.0
// A node with UCX (ServerOptions::ucx, protocol version 9) against a peer that is not kvport's
// client: this test's own UCX worker (the device layer's, no client code) sending whatever
// messages it likes to the node's UCX listener. NODE_INFO offers UCX, UCX_ATTACH hands a TCP
// session a port and a session key, and the node then copies a put into the arena, or a get out
// of it, only inside what that session holds: nothing past the arena, nothing another session
// holds, nothing after the session ended or its token was revoked. UCX listens on loopback only
// when the node does. Over UCX's tcp transport (UCX_TLS set by the test); skipped where this
// target had no libucp at build time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "device/ucx_worker.h"
#include "kvport/ucx.h"
#include "server_fixture.h"

namespace kvport::testing {
namespace {

using protocol::UcxMessage;
using ::testing::HasSubstr;

constexpr const char* kHostUcp = KVPORT_TEST_UCP_LIBRARY;
constexpr auto kWait = std::chrono::seconds(30);

// A UCX peer of this test's own: a worker and one endpoint to the node's UCX listener, sending
// puts and gets with any key, offset and length, and waiting for the node's answer.
class RawPeer {
 public:
  static std::unique_ptr<RawPeer> Connect(uint16_t port) {
    auto peer = std::unique_ptr<RawPeer>(new RawPeer);
    peer->runtime_ = OpenUcxRuntime(kHostUcp);
    Result<std::unique_ptr<ucx::Worker>> worker = ucx::Worker::Open(*peer->runtime_);
    EXPECT_TRUE(worker.ok()) << worker.status().ToString();
    if (!worker.ok()) return nullptr;
    peer->worker_ = std::move(worker).value();
    ucx::Worker::Guard held(*peer->worker_);
    for (UcxMessage id : {UcxMessage::kPutDone, UcxMessage::kGetDone}) {
      RawPeer* raw = peer.get();
      EXPECT_TRUE(peer->worker_
                      ->SetHandler(held, static_cast<unsigned>(id),
                                   [raw](ucx::Worker::Guard& h, const ucx::Worker::Message& m) {
                                     raw->OnAnswer(h, m);
                                   })
                      .ok());
    }
    Result<ucx::EndpointId> endpoint = peer->worker_->Connect(held, "127.0.0.1", port);
    EXPECT_TRUE(endpoint.ok()) << endpoint.status().ToString();
    if (!endpoint.ok()) return nullptr;
    peer->endpoint_ = *endpoint;
    return peer;
  }

  // The node's answer to a put of `data` at `offset` under `key`.
  StatusCode Put(std::string_view key, uint64_t offset, const std::string& data) {
    return Call(UcxMessage::kPut, protocol::EncodeUcxPut({key, offset, ++token_}), data.data(),
                data.size(), nullptr);
  }
  // The node's answer to a get of `bytes` at `offset` under `key`, and the bytes it sent.
  StatusCode Get(std::string_view key, uint64_t offset, uint64_t bytes, std::string* out) {
    return Call(UcxMessage::kGet, protocol::EncodeUcxGet({key, offset, bytes, ++token_}), nullptr,
                0, out);
  }
  // A message the node cannot parse; nothing is expected back.
  void SendGarbage(UcxMessage id) {
    ucx::Worker::Guard held(*worker_);
    bool sent = false;
    worker_->Send(held, endpoint_, static_cast<unsigned>(id), "short", nullptr, 0,
                  [&sent](ucx::Worker::Guard&, Status) { sent = true; });
    worker_->ProgressUntil(
        held, [&] { return sent; }, MonotonicClock::now() + kWait);
  }

 private:
  RawPeer() = default;

  StatusCode Call(UcxMessage id, const std::string& header, const void* data, size_t bytes,
                  std::string* out) {
    ucx::Worker::Guard held(*worker_);
    answered_ = false;
    receiving_ = false;
    bool sent = false;
    Status send_status;
    worker_->Send(held, endpoint_, static_cast<unsigned>(id), header, data, bytes,
                  [&](ucx::Worker::Guard&, Status s) {
                    sent = true;
                    send_status = s;
                  });
    const bool done = worker_->ProgressUntil(
        held, [&] { return sent && (answered_ || !send_status.ok()) && !receiving_; },
        MonotonicClock::now() + kWait);
    if (!done || !send_status.ok() || !answered_) return StatusCode::kUnavailable;
    if (out != nullptr) *out = std::move(data_);
    return answer_;
  }

  void OnAnswer(ucx::Worker::Guard& held, const ucx::Worker::Message& m) {
    protocol::UcxDone done;
    if (!protocol::DecodeUcxDone(m.header, &done).ok() || done.token != token_) return;
    answer_ = done.status;
    answered_ = true;
    data_.assign(m.bytes, '\0');
    if (m.data != nullptr) {
      data_.assign(static_cast<const char*>(m.data), m.bytes);
    } else if (m.bytes > 0) {
      receiving_ = true;
      worker_->Receive(held, m, data_.data(),
                       [this](ucx::Worker::Guard&, Status) { receiving_ = false; });
    }
  }

  std::unique_ptr<UcxRuntime> runtime_;
  std::unique_ptr<ucx::Worker> worker_;
  ucx::EndpointId endpoint_ = 0;
  uint64_t token_ = 0;
  bool answered_ = false;
  bool receiving_ = false;
  StatusCode answer_ = StatusCode::kOk;
  std::string data_;
};

class UcxAttachTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (UcxBuildApiVersion().empty()) GTEST_SKIP() << "this build has no UCX";
    if (std::string(kHostUcp).empty()) GTEST_SKIP() << "no libucp for this target at build time";
    ::setenv("UCX_TLS", "tcp", 1);
  }
  void TearDown() override { ::unsetenv("UCX_TLS"); }

  static ServerOptions UcxNode() {
    ServerOptions options = SmallNodeOptions();
    options.ucx = true;
    options.ucx_library = kHostUcp;
    return options;
  }

  // UCX_ATTACH on `client`, which must be granted.
  static protocol::UcxAttachResponse Attach(TestClient& client, std::string* descriptor) {
    Result<protocol::UcxAttachResponse> attach =
        Exchange<protocol::UcxAttachResponse>(client, protocol::UcxAttachRequest{}, descriptor);
    EXPECT_TRUE(attach.ok()) << attach.status().ToString();
    if (!attach.ok()) return {};
    EXPECT_EQ(attach->status, StatusCode::kOk) << attach->reason;
    return *attach;
  }

  // ARENA_GET of one key: its arena offset and length under a new lease.
  static std::pair<uint64_t, uint64_t> Lease(TestClient& client, const std::string& key) {
    protocol::ArenaGetRequest get;
    get.ns = "ns";
    get.keys.push_back(protocol::MgetKey{key, protocol::kUnlimitedCapacity});
    std::string d;
    Result<protocol::ArenaGetResponse> got = Exchange<protocol::ArenaGetResponse>(client, get, &d);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok() || got->results.size() != 1 || got->results[0].status != StatusCode::kOk)
      return {0, 0};
    return {got->results[0].offset, got->results[0].value_length};
  }

  // ARENA_RESERVE of one item: the reservation id and the extent's offset.
  static std::pair<uint64_t, uint64_t> Reserve(TestClient& client, const std::string& key,
                                               uint64_t bytes) {
    protocol::ArenaReserveRequest reserve;
    reserve.ns = "ns";
    reserve.items.push_back(protocol::MsetItem{key, "", bytes, nullptr});
    std::string d;
    Result<protocol::ArenaReserveResponse> reserved =
        Exchange<protocol::ArenaReserveResponse>(client, reserve, &d);
    EXPECT_TRUE(reserved.ok()) << reserved.status().ToString();
    if (!reserved.ok() || reserved->items[0].status != StatusCode::kOk) return {0, 0};
    return {reserved->reservation_id, reserved->items[0].offset};
  }

  static std::vector<StatusCode> Commit(TestClient& client, uint64_t reservation) {
    protocol::ArenaCommitRequest commit;
    commit.reservation_id = reservation;
    commit.commit = {1};
    std::string d;
    Result<protocol::ArenaCommitResponse> committed =
        Exchange<protocol::ArenaCommitResponse>(client, commit, &d);
    if (!committed.ok()) return {committed.status().code()};
    return committed->statuses;
  }
};

TEST_F(UcxAttachTest, ATcpSessionMovesValuesThroughTheNodesChecks) {
  auto server = StartNode(UcxNode());
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  ASSERT_GE(client.version(), protocol::kUcxVersion);
  const std::string stored = ValueFor("stored", 300000);
  ASSERT_TRUE(client.Mset("ns", {{"stored", stored, "meta"}}).ok());

  std::string d1, d2;
  Result<protocol::NodeInfoResponse> info =
      Exchange<protocol::NodeInfoResponse>(client, protocol::NodeInfoRequest{}, &d1);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->offers & protocol::kOfferUcx, protocol::kOfferUcx);
  const protocol::UcxAttachResponse attach = Attach(client, &d2);
  ASSERT_EQ(attach.session_key.size(), protocol::kUcxSessionKeyBytes);
  ASSERT_NE(attach.ucx_port, 0);
  auto peer = RawPeer::Connect(attach.ucx_port);
  ASSERT_NE(peer, nullptr);

  // A get: ARENA_GET over TCP pins the value under a lease; the node sends its bytes over UCX.
  const auto [offset, length] = Lease(client, "stored");
  ASSERT_EQ(length, stored.size());
  std::string read;
  EXPECT_EQ(peer->Get(attach.session_key, offset, length, &read), StatusCode::kOk);
  EXPECT_EQ(read, stored);
  // Part of it, too (a striped read).
  EXPECT_EQ(peer->Get(attach.session_key, offset + 1000, 64, &read), StatusCode::kOk);
  EXPECT_EQ(read, stored.substr(1000, 64));

  // A put, large (UCX's rendezvous: the node receives it straight into the extent) and small
  // (with the message: copied by the node at once).
  for (size_t size : {size_t{200000}, size_t{100}}) {
    const std::string key = "written-" + std::to_string(size);
    const std::string value = ValueFor(key, size);
    const auto [reservation, at] = Reserve(client, key, value.size());
    ASSERT_NE(reservation, 0u);
    EXPECT_EQ(peer->Put(attach.session_key, at, value), StatusCode::kOk);
    EXPECT_EQ(Commit(client, reservation), (std::vector<StatusCode>{StatusCode::kOk}));
    TestClient reader = MustConnect(*server);
    Result<std::vector<GetItem>> check = reader.Mget("ns", {key});
    ASSERT_TRUE(check.ok());
    EXPECT_EQ((*check)[0].value, value);
  }
}

TEST_F(UcxAttachTest, NothingOutsideWhatTheSessionHoldsCanBeReadOrWritten) {
  auto server = StartNode(UcxNode());
  ASSERT_NE(server, nullptr);
  TestClient owner = MustConnect(*server);
  const std::string leased = ValueFor("leased", 100000);
  const std::string other = ValueFor("other", 100000);
  ASSERT_TRUE(owner.Mset("ns", {{"leased", leased, ""}, {"other", other, ""}}).ok());
  std::string d1, d2;
  const protocol::UcxAttachResponse attach = Attach(owner, &d1);
  const std::string key(attach.session_key);
  const auto [offset, length] = Lease(owner, "leased");
  const auto [reservation, reserved_at] = Reserve(owner, "mine", 4096);
  ASSERT_NE(reservation, 0u);
  // Another session, attached too, with a reservation and a lease of its own.
  TestClient neighbour = MustConnect(*server);
  Attach(neighbour, &d2);
  const auto [other_offset, other_length] = Lease(neighbour, "other");
  const auto [neighbour_reservation, neighbour_at] = Reserve(neighbour, "theirs", 4096);
  ASSERT_NE(neighbour_reservation, 0u);

  auto peer = RawPeer::Connect(attach.ucx_port);
  ASSERT_NE(peer, nullptr);
  const uint64_t arena = attach.arena_bytes;
  std::string read;
  // Reads: past the arena's end, wrapping, far away (where the node's code and heap are, as an
  // address), a byte past the leased value, a value only another session leased, the session's
  // own reservation.
  EXPECT_EQ(peer->Get(key, arena - 10, 64, &read), StatusCode::kPermissionDenied);
  EXPECT_EQ(peer->Get(key, UINT64_MAX - 8, 64, &read), StatusCode::kPermissionDenied);
  EXPECT_EQ(peer->Get(key, uint64_t{0x400000}, 64, &read), StatusCode::kPermissionDenied);
  EXPECT_EQ(peer->Get(key, uint64_t{1} << 46, 4096, &read), StatusCode::kPermissionDenied);
  EXPECT_EQ(peer->Get(key, offset, length + 1, &read), StatusCode::kPermissionDenied);
  EXPECT_EQ(peer->Get(key, other_offset, other_length, &read), StatusCode::kPermissionDenied);
  EXPECT_EQ(peer->Get(key, reserved_at, 64, &read), StatusCode::kPermissionDenied);
  // Writes: over a leased (committed) value, into another session's reservation, past the end
  // of the session's own, past the arena, and a large one (rendezvous) outside.
  EXPECT_EQ(peer->Put(key, offset, "forged"), StatusCode::kPermissionDenied);
  EXPECT_EQ(peer->Put(key, neighbour_at, "forged"), StatusCode::kPermissionDenied);
  EXPECT_EQ(peer->Put(key, reserved_at + 4000, std::string(200, 'x')),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(peer->Put(key, arena - 4, "forged"), StatusCode::kPermissionDenied);
  EXPECT_EQ(peer->Put(key, other_offset, std::string(other_length, 'x')),
            StatusCode::kPermissionDenied);
  // A key nobody holds, and messages that do not parse.
  std::string wrong = key;
  wrong[0] = static_cast<char>(wrong[0] ^ 1);
  EXPECT_EQ(peer->Get(wrong, offset, length, &read), StatusCode::kNotFound);
  EXPECT_EQ(peer->Put(wrong, reserved_at, "forged"), StatusCode::kNotFound);
  peer->SendGarbage(UcxMessage::kPut);
  peer->SendGarbage(UcxMessage::kGet);

  // The node lives, every value is as it was, and the session's own access still works.
  EXPECT_TRUE(owner.Ping().ok());
  TestClient reader = MustConnect(*server);
  Result<std::vector<GetItem>> check = reader.Mget("ns", {"leased", "other"});
  ASSERT_TRUE(check.ok());
  EXPECT_EQ((*check)[0].value, leased);
  EXPECT_EQ((*check)[1].value, other);
  EXPECT_EQ(peer->Get(key, offset, length, &read), StatusCode::kOk);
  EXPECT_EQ(read, leased);
  EXPECT_EQ(peer->Put(key, reserved_at, std::string(4096, 'm')), StatusCode::kOk);
}

TEST_F(UcxAttachTest, AnEndedSessionsKeyReachesNothing) {
  auto server = StartNode(UcxNode());
  ASSERT_NE(server, nullptr);
  const std::string value = ValueFor("k", 50000);
  std::string d;
  uint64_t offset = 0, length = 0;
  std::string key;
  uint16_t port = 0;
  {
    TestClient client = MustConnect(*server);
    ASSERT_TRUE(client.Mset("ns", {{"k", value, ""}}).ok());
    const protocol::UcxAttachResponse attach = Attach(client, &d);
    key = std::string(attach.session_key);
    port = attach.ucx_port;
    std::tie(offset, length) = Lease(client, "k");
    auto peer = RawPeer::Connect(port);
    ASSERT_NE(peer, nullptr);
    std::string read;
    ASSERT_EQ(peer->Get(key, offset, length, &read), StatusCode::kOk);
  }  // the session closes; its lease ends with it
  ASSERT_TRUE(Eventually([&] { return server->Stats().Get("leases") == 0; }));
  auto later = RawPeer::Connect(port);
  ASSERT_NE(later, nullptr);
  std::string read;
  EXPECT_EQ(later->Get(key, offset, length, &read), StatusCode::kNotFound);
  EXPECT_TRUE(read.empty());
}

TEST_F(UcxAttachTest, ARevokedTokensKeyReachesNothing) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("kvport-ucx-tokens-" + std::to_string(::getpid()) + ".yaml");
  const auto write_tokens = [&](const std::string& text) {
    std::ofstream(file) << text;
    std::filesystem::permissions(
        file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  };
  write_tokens(
      "tokens:\n"
      "  - name: all\n"
      "    secret: all-secret-0123456789\n"
      "    read: [\"*\"]\n"
      "    write: [\"*\"]\n");
  ServerOptions options = UcxNode();
  options.tokens_file = file.string();
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  Result<TestClient> connected = TestClient::Connect(server->port(), /*hello=*/false);
  ASSERT_TRUE(connected.ok());
  TestClient& client = *connected;
  ASSERT_TRUE(client.Hello(protocol::kMaxProtocolVersion, "all-secret-0123456789").ok());
  ASSERT_TRUE(client.Mset("ns", {{"k", "value", ""}}).ok());
  std::string d;
  const protocol::UcxAttachResponse attach = Attach(client, &d);
  const auto [offset, length] = Lease(client, "k");
  auto peer = RawPeer::Connect(attach.ucx_port);
  ASSERT_NE(peer, nullptr);
  std::string read;
  ASSERT_EQ(peer->Get(attach.session_key, offset, length, &read), StatusCode::kOk);

  write_tokens(
      "tokens:\n"
      "  - name: other\n"
      "    secret: other-secret-0123456789\n"
      "    read: [\"*\"]\n");
  ASSERT_TRUE(server->ReloadTokens().ok());
  // The TCP session says nothing meanwhile: the UCX path finds out by itself.
  EXPECT_EQ(peer->Get(attach.session_key, offset, length, &read), StatusCode::kPermissionDenied);
  EXPECT_EQ(peer->Get(attach.session_key, offset, length, &read), StatusCode::kUnavailable);
  std::filesystem::remove(file);
}

// The local addresses of the TCP sockets this process listens on (/proc/net/tcp and tcp6,
// state 0A, whose inode is one of this process's descriptors), as the kernel prints them.
std::vector<std::string> OwnListeningAddresses() {
  std::set<std::string> inodes;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    const std::string target = std::filesystem::read_symlink(fd.path(), error).string();
    if (!error && target.starts_with("socket:["))
      inodes.insert(target.substr(8, target.size() - 9));
  }
  std::vector<std::string> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
            timeout >> inode))
        continue;
      if (state == "0A" && inodes.count(inode) != 0) out.push_back(local);
    }
  }
  return out;
}

TEST_F(UcxAttachTest, UcxListensOnlyWhereTheNodeListens) {
  const std::vector<std::string> before = OwnListeningAddresses();
  // SmallNodeOptions listen on 127.0.0.1. The node's UCX worker listens for peers and opens its
  // transports as it starts: nothing of this test's own (a client's worker) is made below.
  auto server = StartNode(UcxNode());
  ASSERT_NE(server, nullptr);
  const std::vector<std::string> after = OwnListeningAddresses();
  ASSERT_GE(after.size(), before.size() + 2);  // the node's TCP port, UCX's listener at least
  for (const std::string& local : after) {
    if (std::find(before.begin(), before.end(), local) != before.end()) continue;
    // 127.0.0.1 as the kernel prints it (0100007F), or ::1 / its IPv4-mapped form.
    const bool loopback = local.starts_with("0100007F:") ||
                          local.starts_with("00000000000000000000000001000000:") ||
                          local.starts_with("0000000000000000FFFF00000100007F:");
    EXPECT_TRUE(loopback) << "a listener on " << local << " beyond loopback";
  }
}

// An open node (no tokens, loopback only) attaches only peers of its own uid, as it maps shared
// memory only for them: a process of another uid is refused, the node's own is not.
TEST_F(UcxAttachTest, AnOpenNodeAttachesOnlyPeersOfItsOwnUid) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run a peer as another uid";
  auto server = StartNode(UcxNode());
  ASSERT_NE(server, nullptr);
  const uint16_t port = server->port();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The peer, as nobody: its exit code is UCX_ATTACH's status code (100 when it got none).
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(101);
    Result<TestClient> peer = TestClient::Connect(port);
    if (!peer.ok()) ::_exit(102);
    std::string d;
    Result<protocol::UcxAttachResponse> attach =
        Exchange<protocol::UcxAttachResponse>(*peer, protocol::UcxAttachRequest{}, &d);
    ::_exit(attach.ok() ? static_cast<int>(attach->status) : 100);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), static_cast<int>(StatusCode::kNotSupported));
  TestClient own = MustConnect(*server);
  std::string d;
  EXPECT_EQ(Attach(own, &d).status, StatusCode::kOk);
}

TEST_F(UcxAttachTest, ANodeWithoutUcxSaysSoAndTheSessionGoesOn) {
  auto server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  std::string d1, d2;
  Result<protocol::NodeInfoResponse> info =
      Exchange<protocol::NodeInfoResponse>(client, protocol::NodeInfoRequest{}, &d1);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->offers & protocol::kOfferUcx, 0u);
  Result<protocol::UcxAttachResponse> attach =
      Exchange<protocol::UcxAttachResponse>(client, protocol::UcxAttachRequest{}, &d2);
  ASSERT_TRUE(attach.ok()) << attach.status().ToString();
  EXPECT_EQ(attach->status, StatusCode::kNotSupported);
  EXPECT_THAT(std::string(attach->reason), HasSubstr("offers no UCX"));
  EXPECT_TRUE(client.Ping().ok());
}

TEST_F(UcxAttachTest, ANodeAskedForAnUnusableUcxDoesNotStart) {
  ServerOptions options = SmallNodeOptions();
  options.ucx = true;
  options.ucx_library = "/nonexistent/libucp.so.0";
  Result<std::unique_ptr<Server>> server = Server::Start(options);
  EXPECT_EQ(server.status().code(), StatusCode::kNotSupported);
  EXPECT_THAT(server.status().message(), HasSubstr("/nonexistent/libucp.so.0"));
}

}  // namespace
}  // namespace kvport::testing
