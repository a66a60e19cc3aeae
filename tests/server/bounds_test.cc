// SPDX-License-Identifier: Apache-2.0
// Memory bounded under any client, and request deadlines: hostile or broken clients
// over raw loopback sockets against an in-process node, each test asserting the observable
// bound (a node gauge under its cap, the stalled client's reservation gone, another client
// still served). Waits are bounded polls on the node's counters; no test sleeps for a time.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "net/socket.h"
#include "protocol/wire.h"
#include "server_fixture.h"

namespace kvport::testing {
namespace {

// The memory one queued MGET response of a `value_bytes` value costs at most (head, its
// bookkeeping and the pinned value: net::OutputQueue::memory_bytes).
uint64_t OneResponse(uint64_t value_bytes) {
  return value_bytes + 4096;
}

// `count` MGETs of `key` (`keys_per_get` times each), encoded back to back, to be sent at once
// and never read.
std::string PipelinedMgets(const TestClient& client, const std::string& key, int count,
                           int keys_per_get = 1, bool meta_only = false) {
  protocol::MgetRequest get;
  get.meta_only = meta_only;
  for (int i = 0; i < keys_per_get; ++i)
    get.keys.push_back({key});
  std::string bytes;
  for (int i = 0; i < count; ++i) {
    protocol::EncodedFrame frame;
    EXPECT_TRUE(
        protocol::EncodeRequest(1000 + i, get, client.limits(), &frame, client.version()).ok());
    bytes += frame.Flatten();
  }
  return bytes;
}

// The header and descriptor of an MSET of one `value_bytes` value (the payload not included).
std::string MsetHead(const TestClient& client, const std::string& key, uint64_t value_bytes,
                     uint64_t request_id) {
  const std::string value(value_bytes, 'v');  // encoded, then left out
  protocol::MsetRequest m;
  m.items = {{key, "", value.size(), value.data()}};
  protocol::EncodedFrame frame;
  EXPECT_TRUE(
      protocol::EncodeRequest(request_id, m, client.limits(), &frame, client.version()).ok());
  return frame.head;
}

uint64_t Stat(const Server& server, const char* name) {
  return server.Stats().Get(name);
}

// (One client that never reads, against its own connection cap: concurrency_test.cc,
// BackpressureKeepsPipelinedResponsesCompleteAndInOrder.)

// Many clients that never read cannot together exceed the node's cap on queued answers (their
// heap: here metadata-heavy heads), each being far under its own connection cap; a client that
// reads its answers is still served. Without the node-wide cap each of them queues ~40 MiB
// (160 MiB in all).
TEST(ServerBoundsTest, ClientsThatNeverReadAreHeldUnderTheNodeWideCap) {
  ServerOptions options = SmallNodeOptions();
  constexpr uint64_t kNodeCap = 16 << 20;
  options.max_queued_response_bytes = kNodeCap;
  options.max_connection_outstanding_bytes = uint64_t{1} << 30;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  const std::string value = ValueFor("big", 1 << 20);
  const std::string meta(4000, 'm');
  TestClient writer = MustConnect(*server);
  ASSERT_TRUE(writer.Mset("", {{"big", value, meta}}).ok());

  constexpr int kHostile = 4;
  constexpr int kRequests = 48;
  constexpr int kKeysPerGet = 256;  // ~1 MiB of metadata per answer
  std::vector<TestClient> hostile;
  for (int i = 0; i < kHostile; ++i) {
    hostile.push_back(MustConnect(*server));
    ASSERT_TRUE(net::SetReceiveBufferSize(hostile.back().fd(), 64 * 1024).ok());
    ASSERT_TRUE(hostile.back()
                    .SendRaw(PipelinedMgets(hostile.back(), "big", kRequests, kKeysPerGet,
                                            /*meta_only=*/true))
                    .ok());
  }
  ASSERT_TRUE(Eventually([&] {
    return Stat(*server, "paused_connections") == kHostile ||
           Stat(*server, "op_mget") == kHostile * kRequests;
  }));
  EXPECT_EQ(Stat(*server, "paused_connections"), uint64_t{kHostile});
  // The cap, plus at most one answer per I/O thread queued after the last check.
  const uint64_t bound = kNodeCap + options.threads * OneResponse(kKeysPerGet * meta.size());
  EXPECT_LE(Stat(*server, "queued_response_bytes"), bound);
  EXPECT_EQ(Stat(*server, "max_queued_response_bytes"), kNodeCap);

  TestClient reader = MustConnect(*server);
  for (int i = 0; i < 3; ++i) {
    auto got = reader.Mget("", {"big"});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE((*got)[0].value == value);
  }
  EXPECT_LE(Stat(*server, "queued_response_bytes"), bound);

  hostile.clear();  // closing them releases their queues and pins
  EXPECT_TRUE(Eventually([&] {
    return Stat(*server, "queued_response_bytes") == 0 && Stat(*server, "pinned_bytes") == 0 &&
           Stat(*server, "paused_connections") == 0;
  }));
}

// An MSET header for a large value whose payload never comes evicts nothing (items are reserved
// as their bytes arrive), and at the request deadline the client is told (ERROR Timeout, the
// request's id) and the connection closes. Before: the header alone evicted 6 MiB of objects.
TEST(ServerBoundsTest, AnMsetWhosePayloadNeverArrivesEvictsNothingAndTimesOut) {
  ServerOptions options = SmallNodeOptions();  // 8 MiB
  options.request_timeout = std::chrono::milliseconds(200);
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient keeper = MustConnect(*server);
  for (int i = 0; i < 7; ++i) {
    const std::string key = "kept" + std::to_string(i);
    ASSERT_TRUE(keeper.Mset("", {{key, ValueFor(key, 1 << 20), ""}}).ok());
  }
  const uint64_t used = Stat(*server, "used_bytes");

  TestClient stalled = MustConnect(*server);
  const uint64_t received = Stat(*server, "bytes_received");
  const std::string head = MsetHead(stalled, "huge", 6 << 20, 77);
  ASSERT_TRUE(stalled.SendRaw(head).ok());
  ASSERT_TRUE(
      Eventually([&] { return Stat(*server, "bytes_received") >= received + head.size(); }));
  EXPECT_EQ(Stat(*server, "evictions"), 0u);
  EXPECT_EQ(Stat(*server, "reserved_bytes"), 0u);

  auto reply = stalled.ReadFrame();  // comes at the deadline
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->header.request_id, 77u);
  Status error = stalled.ErrorOf(*reply);
  EXPECT_EQ(error.code(), StatusCode::kTimeout) << error.ToString();
  EXPECT_NE(error.message().find("request_timeout"), std::string::npos) << error.ToString();
  EXPECT_TRUE(stalled.ReadsEndOfStream());
  ServerStats stats = server->Stats();
  EXPECT_EQ(stats.Get("request_timeouts"), 1u);
  EXPECT_EQ(stats.Get("evictions"), 0u);
  EXPECT_EQ(stats.Get("objects"), 7u);
  EXPECT_EQ(stats.Get("used_bytes"), used);
  auto got = keeper.Mget("", {"kept0"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].status, StatusCode::kOk);
}

// A payload trickled a byte at a time does not keep its request alive: each byte buys only
// 1/min_request_bytes_per_sec of time, so at the deadline the reservation is aborted and the
// client told, while the idle timeout (separate, and far away here) never fires. Before, the
// reservation lived as long as the trickle did.
TEST(ServerBoundsTest, ATrickledPayloadLosesItsReservationAtTheDeadline) {
  ServerOptions options = SmallNodeOptions();
  options.request_timeout = std::chrono::milliseconds(200);
  options.min_request_bytes_per_sec = 1 << 20;
  options.idle_timeout = std::chrono::seconds(60);
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient trickler = MustConnect(*server);
  // The header with the payload's first byte, in one segment: the item is reserved at once.
  ASSERT_TRUE(trickler.SendRaw(MsetHead(trickler, "slow", 256 * 1024, 9) + "x").ok());
  ASSERT_TRUE(Eventually([&] { return Stat(*server, "reserved_bytes") > 0; }));

  // A byte at a time (far below 1 MiB/s: a STATS round trip between bytes) until the node
  // gives up. Bounded by the payload, less its last byte, so the request can never complete:
  // whatever the speed of this host, 256 KiB at one byte per round trip takes far longer than
  // the 200 ms + 256 KiB / (1 MiB/s) the node allows.
  for (int i = 0; i < 256 * 1024 - 2 && Stat(*server, "request_timeouts") == 0; ++i) {
    if (!trickler.SendRaw("x").ok()) break;
  }
  ASSERT_EQ(Stat(*server, "request_timeouts"), 1u);
  EXPECT_TRUE(Eventually([&] { return Stat(*server, "reserved_bytes") == 0; }));
  EXPECT_EQ(Stat(*server, "aborted_msets"), 1u);
  EXPECT_EQ(Stat(*server, "idle_timeouts"), 0u);
  auto reply = trickler.ReadFrame();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->header.request_id, 9u);
  EXPECT_EQ(trickler.ErrorOf(*reply).code(), StatusCode::kTimeout);
  TestClient other = MustConnect(*server);
  auto got = other.Mget("", {"slow"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].status, StatusCode::kNotFound);  // nothing half-written became visible
}

// Many clients each really sending a large descriptor, slowly: their buffers together stay
// under max_input_buffer_bytes (the ones that would pass it are not read), a small request is
// still served meanwhile, and the deadline ends the stalled ones. Before: every client's buffer
// grew with its bytes, 8 x 512 KiB here.
TEST(ServerBoundsTest, LargeDescriptorsTogetherStayUnderTheNodeWideInputCap) {
  ServerOptions options = SmallNodeOptions();
  options.request_timeout = std::chrono::milliseconds(300);
  options.min_request_bytes_per_sec = 0;  // the time limit alone
  constexpr uint64_t kInputCap = 1 << 20;
  options.max_input_buffer_bytes = kInputCap;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Stat(*server, "max_input_buffer_bytes"), kInputCap);
  constexpr int kClients = 8;
  constexpr size_t kSent = 512 * 1024;  // of a descriptor announced at 1 MiB
  std::vector<TestClient> senders;
  for (int i = 0; i < kClients; ++i) {
    senders.push_back(MustConnect(*server));
    protocol::MdelRequest del;
    del.keys = {"k"};
    protocol::EncodedFrame frame;
    ASSERT_TRUE(
        protocol::EncodeRequest(5, del, senders.back().limits(), &frame, senders.back().version())
            .ok());
    std::string bytes = frame.Flatten();
    protocol::StoreLE32(bytes.data() + 16, 1 << 20);
    bytes.resize(protocol::kFrameHeaderSize + kSent, 'd');
    // Non-blocking: the node may not read all of it; the kernel buffers hold the rest or the
    // write stops short, which is what a throttled sender sees.
    (void)::send(senders.back().fd(), bytes.data(), bytes.size(), MSG_DONTWAIT);
  }
  // The node reads what its cap allows, then stops reading the ones that would pass it.
  ASSERT_TRUE(Eventually([&] { return Stat(*server, "paused_connections") > 0; }));
  EXPECT_LE(Stat(*server, "input_buffer_bytes"),
            kInputCap + (kClients + 2) * 4096 + options.threads * (1 << 20));
  TestClient small = MustConnect(*server);
  EXPECT_TRUE(small.Ping().ok());
  EXPECT_TRUE(small.Mset("", {{"k", "v", ""}}).ok());
  for (TestClient& sender : senders) {
    auto reply = sender.ReadFrame();
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(sender.ErrorOf(*reply).code(), StatusCode::kTimeout);
  }
  EXPECT_TRUE(Eventually([&] { return Stat(*server, "input_buffer_bytes") <= 4 * 64 * 1024; }));
}

// A 32-byte header announcing a 16 MiB descriptor costs what arrived, not what it claims: eight
// such connections hold a few KiB of input buffers between them (before: 128 MiB). The
// deadline then ends them.
TEST(ServerBoundsTest, AHeaderAnnouncingAHugeDescriptorAllocatesOnlyWhatArrived) {
  ServerOptions options = SmallNodeOptions();
  options.request_timeout = std::chrono::milliseconds(200);
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 8;
  std::vector<TestClient> liars;
  const uint64_t received = Stat(*server, "bytes_received");
  for (int i = 0; i < kClients; ++i) {
    liars.push_back(MustConnect(*server));
    protocol::MdelRequest del;
    del.keys = {"k"};
    protocol::EncodedFrame frame;
    ASSERT_TRUE(
        protocol::EncodeRequest(5, del, liars.back().limits(), &frame, liars.back().version())
            .ok());
    std::string bytes = frame.Flatten();
    const uint64_t claim = liars.back().limits().max_frame_bytes - protocol::kFrameHeaderSize;
    protocol::StoreLE32(bytes.data() + 16, static_cast<uint32_t>(claim));
    bytes.resize(protocol::kFrameHeaderSize + 100, 'd');
    ASSERT_TRUE(liars.back().SendRaw(bytes).ok());
  }
  ASSERT_TRUE(Eventually([&] {
    return Stat(*server, "bytes_received") >=
           received + kClients * (protocol::kFrameHeaderSize + 100);
  }));
  EXPECT_LE(Stat(*server, "input_buffer_bytes"), uint64_t{kClients + 1} * 4096);
  for (TestClient& liar : liars) {
    auto reply = liar.ReadFrame();
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(liar.ErrorOf(*reply).code(), StatusCode::kTimeout);
  }
  EXPECT_EQ(Stat(*server, "request_timeouts"), uint64_t{kClients});
}

// Pinned values (queued MGET answers) are capped node-wide: a key beyond max_pinned_bytes is
// NoSpace for that key alone, and reads resume once answers leave.
TEST(ServerBoundsTest, ReadsBeyondThePinnedCapAreNoSpaceForThoseKeys) {
  ServerOptions options = SmallNodeOptions();
  options.max_pinned_bytes = 2 << 20;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  for (const char* k : {"a", "b", "c"})
    ASSERT_TRUE(client.Mset("", {{k, ValueFor(k, 1 << 20), ""}}).ok());
  auto got = client.Mget("", {"a", "b", "c"});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].status, StatusCode::kOk);
  EXPECT_EQ((*got)[1].status, StatusCode::kOk);
  EXPECT_EQ((*got)[2].status, StatusCode::kNoSpace);
  EXPECT_EQ(Stat(*server, "pin_cap_refusals"), 1u);
  auto again = client.Mget("", {"c"});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].status, StatusCode::kOk);
  // The last pin goes once the server has written the answer (after the client may read it).
  EXPECT_TRUE(Eventually([&] { return Stat(*server, "pinned_bytes") == 0; }));
}

// 0-byte values with large metadata are charged against max_index_bytes, so they evict (LRU)
// instead of growing the heap without bound.
TEST(ServerBoundsTest, EmptyValuesWithLargeMetadataAreBoundedByTheIndexBudget) {
  ServerOptions options = SmallNodeOptions();
  constexpr uint64_t kIndexCap = 1 << 20;
  options.max_index_bytes = kIndexCap;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  TestClient client = MustConnect(*server);
  const std::string meta(4000, 'm');
  for (int batch = 0; batch < 20; ++batch) {
    std::vector<SetItem> items;
    for (int i = 0; i < 64; ++i)
      items.push_back({"k" + std::to_string(batch * 64 + i), "", meta});
    auto set = client.Mset("ns", items);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    ASSERT_LE(Stat(*server, "index_bytes"), kIndexCap);
  }
  EXPECT_GT(Stat(*server, "evictions"), 0u);
  EXPECT_LT(Stat(*server, "objects"), 20u * 64);
  EXPECT_EQ(Stat(*server, "max_index_bytes"), kIndexCap);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Resident memory of this process, from /proc/self/statm.
uint64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return got == 2 ? uint64_t{resident} * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

// docs/store.md, "Bounds on node memory": every input of the formula stays under its cap while
// every kind of hostile client works on the node at once (answers never read, payloads never
// sent, descriptors announced and not sent, empty values with large metadata), and the
// process's resident memory grows by less than the formula allows for these caps.
TEST(ServerBoundsTest, NodeMemoryStaysWithinTheStatedBoundUnderHostileClients) {
  ServerOptions options = SmallNodeOptions();  // 8 MiB arena, 2 I/O threads
  options.max_index_bytes = 1 << 20;
  options.max_queued_response_bytes = 4 << 20;
  options.max_connection_outstanding_bytes = 1 << 20;
  options.request_timeout = std::chrono::seconds(30);  // the stalled ones stay for the check
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  const ServerStats caps = server->Stats();
  const uint64_t rss_before = ResidentBytes();

  const std::string value = ValueFor("big", 1 << 20);
  TestClient writer = MustConnect(*server);
  ASSERT_TRUE(writer.Mset("", {{"big", value, ""}}).ok());
  std::vector<TestClient> clients;
  for (int i = 0; i < 3; ++i) {  // answers never read
    clients.push_back(MustConnect(*server));
    ASSERT_TRUE(net::SetReceiveBufferSize(clients.back().fd(), 64 * 1024).ok());
    ASSERT_TRUE(clients.back().SendRaw(PipelinedMgets(clients.back(), "big", 48)).ok());
  }
  for (int i = 0; i < 3; ++i) {  // payloads never sent (the first one evicts nothing either)
    clients.push_back(MustConnect(*server));
    ASSERT_TRUE(
        clients.back().SendRaw(MsetHead(clients.back(), "w" + std::to_string(i), 3 << 20, 1)).ok());
  }
  for (int i = 0; i < 4; ++i) {  // 16 MiB descriptors announced, 64 KiB sent
    clients.push_back(MustConnect(*server));
    protocol::MdelRequest del;
    del.keys = {"k"};
    protocol::EncodedFrame frame;
    ASSERT_TRUE(
        protocol::EncodeRequest(5, del, clients.back().limits(), &frame, clients.back().version())
            .ok());
    std::string bytes = frame.Flatten();
    protocol::StoreLE32(bytes.data() + 16, (16 << 20) - protocol::kFrameHeaderSize);
    bytes.resize(64 * 1024, 'd');
    ASSERT_TRUE(clients.back().SendRaw(bytes).ok());
  }
  const std::string meta(4000, 'm');  // empty values, large metadata: 4x the index budget
  for (int batch = 0; batch < 16; ++batch) {
    std::vector<SetItem> items;
    for (int i = 0; i < 64; ++i)
      items.push_back({"e" + std::to_string(batch * 64 + i), "", meta});
    ASSERT_TRUE(writer.Mset("e", items).ok());
  }
  ASSERT_TRUE(Eventually([&] { return Stat(*server, "paused_connections") == 3; }));

  const ServerStats s = server->Stats();
  EXPECT_LE(s.Get("used_bytes"), s.Get("capacity_bytes"));
  EXPECT_LE(s.Get("index_bytes"), caps.Get("max_index_bytes"));
  EXPECT_LE(s.Get("reserved_bytes"), caps.Get("max_reserved_bytes"));
  EXPECT_LE(s.Get("pinned_bytes"), caps.Get("max_pinned_bytes"));
  const uint64_t response = OneResponse(value.size());
  EXPECT_LE(s.Get("queued_response_bytes"),
            options.max_queued_response_bytes + options.threads * response);
  const uint64_t connections = s.Get("connections");
  EXPECT_EQ(connections, 11u);
  // Input buffers: at most twice what arrived (4 x 64 KiB here), 4 KiB for the others.
  EXPECT_LE(s.Get("input_buffer_bytes"), 4 * 128 * 1024 + connections * 4096);

  // The formula's heap terms for these caps (the arena's pages are counted in full, queued
  // answers' pinned values a second time, per-connection costs at 256 KiB), plus 16 MiB for
  // the test's own buffers (pipelines, a 3 MiB value encoded three times) and the allocator.
  const uint64_t formula = s.Get("capacity_bytes") + caps.Get("max_index_bytes") +
                           options.max_queued_response_bytes + options.threads * response +
                           s.Get("input_buffer_bytes") + connections * (256 * 1024);
  const uint64_t rss_after = ResidentBytes();
  // Sanitizers keep freed memory in quarantine and map shadow memory: RSS means nothing there.
  if (!kSanitized && rss_before != 0 && rss_after != 0) {
    EXPECT_LE(rss_after - std::min(rss_after, rss_before), formula + (16 << 20))
        << "resident memory grew by " << (rss_after - rss_before) << " bytes";
  }
}

}  // namespace
}  // namespace kvport::testing
