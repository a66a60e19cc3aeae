// SPDX-License-Identifier: Apache-2.0
// The client's parts on their own: endpoints, codes, the memory registry, frame planning, and
// timeouts against a node that accepts requests and never answers.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client/batch_call.h"
#include "client/endpoint.h"
#include "client/frame_planner.h"
#include "client/memory_registry.h"
#include "fake_node.h"
#include "kvport/client.h"
#include "protocol/messages.h"

namespace kvport {
namespace {

TEST(EndpointTest, ParsesHostPortAndEicUrls) {
  Result<client::Endpoint> plain = client::ParseEndpoint("127.0.0.1:7470");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->nodes[0].tcp.host, "127.0.0.1");
  EXPECT_EQ(plain->nodes[0].tcp.port, 7470);
  EXPECT_EQ(plain->ns, "");

  Result<client::Endpoint> url = client::ParseEndpoint("eic://localhost:9000/team-a");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->nodes[0].tcp.host, "localhost");
  EXPECT_EQ(url->nodes[0].tcp.port, 9000);
  EXPECT_EQ(url->ns, "team-a");

  Result<client::Endpoint> v6 = client::ParseEndpoint("eic://[::1]:9000");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(v6->nodes[0].tcp.host, "::1");

  // EIC's static-cluster form with one node, with or without its trailing ';'.
  for (const char* one : {"127.0.0.1:7470;", "eic://127.0.0.1:7470;", "eic://127.0.0.1:7470;/ns"}) {
    Result<client::Endpoint> single = client::ParseEndpoint(one);
    ASSERT_TRUE(single.ok()) << one << ": " << single.status().ToString();
    EXPECT_EQ(single->nodes[0].tcp.host, "127.0.0.1") << one;
    EXPECT_EQ(single->nodes[0].tcp.port, 7470) << one;
  }
  // Several nodes: a static cluster, in the order written, never cut to the first node.
  Result<client::Endpoint> three = client::ParseEndpoint("eic://h:1;h:2;h:3/ns");
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  ASSERT_EQ(three->nodes.size(), 3u);
  EXPECT_TRUE(three->is_cluster());
  EXPECT_EQ(three->nodes[2].tcp.port, 3);
  EXPECT_EQ(three->ns, "ns");
  EXPECT_EQ(three->ToString(), "h:1;h:2;h:3");
  Result<client::Endpoint> list = client::ParseEndpoint("h:1;h:2;?replicas=2&write_quorum=2");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->nodes.size(), 2u);
  EXPECT_EQ(list->replicas, 2);
  EXPECT_EQ(list->write_quorum, 2);

  // The etcd form, with eic:// (LMCache strips it, SGLang does not) and a trailing '/'.
  for (const char* text :
       {"etcd:127.0.0.1:2379,e2:2379/c1/team", "eic://etcd:127.0.0.1:2379,e2:2379/c1/team/"}) {
    Result<client::Endpoint> etcd = client::ParseEndpoint(text);
    ASSERT_TRUE(etcd.ok()) << text << ": " << etcd.status().ToString();
    EXPECT_TRUE(etcd->nodes.empty());
    EXPECT_TRUE(etcd->is_cluster());
    EXPECT_EQ(etcd->etcd, (std::vector<std::string>{"127.0.0.1:2379", "e2:2379"}));
    EXPECT_EQ(etcd->cluster, "c1");
    EXPECT_EQ(etcd->ns, "team");
    EXPECT_EQ(etcd->ToString(), "etcd:127.0.0.1:2379,e2:2379/c1");
  }
  // A host named etcd is still one node.
  Result<client::Endpoint> host = client::ParseEndpoint("etcd:7470");
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ(host->nodes.at(0).tcp.host, "etcd");

  for (const char* bad : {"",
                          "eic://",
                          "redis://h:1",
                          "host",
                          "h:0",
                          "h:99999",
                          "eic://h:1/a/b",
                          "h:port",
                          ";",
                          "h:1;;",
                          "h:1;;h:2",
                          ";h:1",
                          "h:1;h:0x",
                          "h:1;h:1",
                          "etcd:e:2379",
                          "etcd:e:2379/",
                          "etcd:e:2379,,f:1/c",
                          "etcd:e:0/c",
                          "h:1?replicas=0",
                          "h:1?replicas=17",
                          "h:1?replicas=2&write_quorum=3",
                          "h:1?copies=2"}) {
    Result<client::Endpoint> r = client::ParseEndpoint(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(r.status().message().find("'" + std::string(bad) + "'"), std::string::npos)
          << r.status().message();
    }
  }
}

TEST(KeyCodeTest, OverallCodeAndWireMapping) {
  using K = KeyCode;
  EXPECT_EQ(OverallCode(std::vector<K>{}), BatchCode::kSuccess);
  EXPECT_EQ(OverallCode(std::vector<K>{K::kSuccess, K::kSuccess}), BatchCode::kSuccess);
  EXPECT_EQ(OverallCode(std::vector<K>{K::kSuccess, K::kKeyNotExist}), BatchCode::kPartialFailed);
  EXPECT_EQ(OverallCode(std::vector<K>{K::kKeyNotExist, K::kNoSpace}), BatchCode::kFailed);
  EXPECT_EQ(BatchCodeName(BatchCode::kPartialFailed), "PARTIAL_FAILED");
  EXPECT_EQ(KeyCodeName(K::kKeyNotExist), "KEY_NOT_EXIST");

  EXPECT_EQ(client::KeyCodeFromWire(StatusCode::kOk, false), K::kSuccess);
  EXPECT_EQ(client::KeyCodeFromWire(StatusCode::kNotFound, true), K::kKeyNotExist);
  EXPECT_EQ(client::KeyCodeFromWire(StatusCode::kNoSpace, false), K::kNoSpace);
  EXPECT_EQ(client::KeyCodeFromWire(StatusCode::kTooLarge, false), K::kTooLarge);
  EXPECT_EQ(client::KeyCodeFromWire(StatusCode::kTooLarge, true), K::kBufferTooSmall);
  EXPECT_EQ(client::KeyCodeFromWire(StatusCode::kInvalidArgument, false), K::kInvalidArgument);
  EXPECT_EQ(client::KeyCodeFromWire(StatusCode::kInternal, false), K::kFailed);
  EXPECT_EQ(KeyCodeFromCallFailure(Status::Unavailable("x")), K::kUnavailable);
  EXPECT_EQ(KeyCodeFromCallFailure(Status::Timeout("x")), K::kTimeout);
  EXPECT_EQ(KeyCodeFromCallFailure(Status::Corruption("x")), K::kFailed);
}

TEST(MemoryRegistryTest, LooksUpRangesAndRefusesOverlaps) {
  client::MemoryRegistry registry;
  std::vector<char> block(1000);
  char* base = block.data();
  const MemoryInfo cuda{RuntimeKind::kCuda, 1};
  ASSERT_TRUE(registry.Register(base + 100, 200, cuda).ok());
  EXPECT_TRUE(registry.Register(base + 100, 200, cuda).ok());  // the same again is fine
  EXPECT_EQ(registry.Register(base + 250, 100, cuda).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register(base + 50, 60, cuda).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register(nullptr, 10, cuda).code(), StatusCode::kInvalidArgument);

  Result<MemoryInfo> inside = registry.Lookup(base + 150, 50);
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(inside->kind, RuntimeKind::kCuda);
  EXPECT_EQ(inside->device_id, 1);
  Result<MemoryInfo> outside = registry.Lookup(base, 100);
  ASSERT_TRUE(outside.ok());
  EXPECT_EQ(outside->kind, RuntimeKind::kHost);
  EXPECT_EQ(registry.Lookup(base + 250, 100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Lookup(base + 50, 100).status().code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(registry.Unregister(base + 100, 100).code(), StatusCode::kNotFound);
  EXPECT_TRUE(registry.Unregister(base + 100, 200).ok());
  EXPECT_EQ(registry.Lookup(base + 150, 50)->kind, RuntimeKind::kHost);
}

TEST(FramePlannerTest, RespectsKeyCountDescriptorAndPayloadBudgets) {
  protocol::Limits limits;
  limits.max_batch_keys = 4;
  limits.max_frame_bytes = client::kFrameFixedBytes + 100;
  auto descriptor_bytes = [](size_t) { return uint64_t{30}; };
  auto payload_bytes = [](size_t i) { return i == 5 ? uint64_t{1000} : uint64_t{10}; };
  // 3 items per frame by descriptor bytes (90 <= 100), and item 5 alone breaks the payload
  // budget of 500.
  std::vector<client::FrameSlice> slices;
  client::PlanFrames(8, descriptor_bytes, payload_bytes, limits, &slices, 500);
  std::vector<std::pair<size_t, size_t>> got;
  for (const auto& s : slices)
    got.emplace_back(s.begin, s.end);
  EXPECT_EQ(got, (std::vector<std::pair<size_t, size_t>>{{0, 3}, {3, 5}, {5, 6}, {6, 8}}));

  limits.max_frame_bytes = 16 << 20;
  client::PlanFrames(10, descriptor_bytes, payload_bytes, limits, &slices, uint64_t{1} << 40);
  ASSERT_EQ(slices.size(), 3u);  // by key count: 4 + 4 + 2
  EXPECT_EQ(slices[2].end - slices[2].begin, 2u);
  client::PlanFrames(0, descriptor_bytes, payload_bytes, limits, &slices);
  EXPECT_TRUE(slices.empty());  // and what was there is gone
}

// A "node" that answers HELLO (choosing `version`) and then reads requests without ever
// answering them.
class SilentNode {
 public:
  explicit SilentNode(uint8_t version = protocol::kMaxProtocolVersion) : version_(version) {
    listener_ = testing::ListenOnLoopback(&port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~SilentNode() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    for (int fd : conns_)
      ::shutdown(fd, SHUT_RDWR);
    thread_.join();
    for (int fd : conns_)
      ::close(fd);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }

 private:
  bool ReadExact(int fd, char* p, size_t n) {
    while (n > 0) {
      ssize_t r = ::read(fd, p, n);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }
  void Serve() {
    int fd = ::accept(listener_, nullptr, nullptr);
    if (fd < 0) return;
    conns_.push_back(fd);
    const protocol::Limits limits;
    while (true) {
      char head[protocol::kFrameHeaderSize];
      if (!ReadExact(fd, head, sizeof(head))) return;
      protocol::FrameHeader header;
      if (!protocol::DecodeFrameHeader(std::string_view(head, sizeof(head)), limits, &header)
               .ok()) {
        return;
      }
      std::string rest(header.descriptor_length + header.payload_length, '\0');
      if (!ReadExact(fd, rest.data(), rest.size())) return;
      if (header.opcode != protocol::Opcode::kHello) {
        ++requests_;
        continue;  // never answered
      }
      protocol::HelloResponse hello;
      hello.version = version_;
      hello.server_name = "silent";
      protocol::EncodedFrame frame;
      if (!protocol::EncodeResponse(header.request_id, hello, limits, &frame).ok()) return;
      if (::write(fd, frame.head.data(), frame.head.size()) !=
          static_cast<ssize_t>(frame.head.size())) {
        return;
      }
    }
  }

  const uint8_t version_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::vector<int> conns_;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

TEST(ClientTimeoutTest, CallsToANodeThatNeverAnswersTimeOutAndLeaveBuffersAlone) {
  SilentNode node;
  InitOptions options;
  options.connections = 1;
  options.timeout = std::chrono::milliseconds(200);
  Client client;
  ASSERT_TRUE(client.Init("silent", node.address(), options).ok());

  Result<BatchResult> exist = client.MExist({"k"});
  ASSERT_FALSE(exist.ok());
  EXPECT_EQ(exist.status().code(), StatusCode::kTimeout) << exist.status().ToString();

  std::vector<char> buffer(64, '\x33');
  IOBuffers buffers;
  buffers.Append(buffer.data(), buffer.size());
  GetOptions get;
  get.timeout = std::chrono::milliseconds(100);  // a per-call override
  Result<GetResult> got = client.MGet({"k"}, get, buffers);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kTimeout);
  EXPECT_EQ(buffer, std::vector<char>(64, '\x33'));
  EXPECT_GE(node.requests(), 1);
}

// A node that chose protocol version 1 cannot do any-namespace requests: NotSupported, naming
// the versions, and nothing is sent (no silent exact lookup instead).
TEST(ClientVersionTest, AnyNamespaceAgainstAVersion1NodeIsNotSupported) {
  SilentNode node(/*version=*/1);
  InitOptions options;
  options.connections = 1;
  Client client;
  ASSERT_TRUE(client.Init("old-node", node.address(), options).ok());

  auto expect_not_supported = [](const Status& s, const char* op) {
    EXPECT_EQ(s.code(), StatusCode::kNotSupported) << op << ": " << s.ToString();
    EXPECT_NE(s.message().find("needs protocol version 2"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("chose version 1"), std::string::npos) << s.ToString();
  };
  ExistOptions exist;
  exist.any_namespace = true;
  expect_not_supported(client.MExist({"k"}, exist).status(), "MExist");
  DelOptions del;
  del.any_namespace = true;
  expect_not_supported(client.MDel({"k"}, del).status(), "MDel");
  GetOptions get;
  get.any_namespace = true;
  expect_not_supported(client.MGetMeta({"k"}, get).status(), "MGetMeta");
  std::vector<char> buffer(8);
  IOBuffers buffers;
  buffers.Append(buffer.data(), buffer.size());
  expect_not_supported(client.MGet({"k"}, get, buffers).status(), "MGet");

  // A namespace with any_namespace is the caller's mistake, whatever the node speaks.
  exist.ns = "x";
  EXPECT_EQ(client.MExist({"k"}, exist).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(node.requests(), 0);
}

TEST(SumNodeStatsTest, SumsCountersTakesTheLargestOfTheRestAndMergesNamespaces) {
  auto report = [](uint64_t objects, uint64_t p99, uint64_t largest_free, uint64_t bench_objects) {
    NodeReport r;
    r.stats.counters = {{"objects", objects},
                        {"latency_p99_us", p99},
                        {"largest_free_bytes", largest_free},
                        {"insecure", 0}};
    r.stats.namespaces = {{"", 1, 10}, {"bench", bench_objects, bench_objects * 100}};
    return r;
  };
  NodeReport down;
  down.status = Status::Unavailable("node c down");
  const std::vector<NodeReport> reports = {report(5, 900, 4096, 2), down, report(7, 300, 8192, 3)};
  Result<NodeStats> sum = SumNodeStats(reports);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->Get("objects"), 12u);
  EXPECT_EQ(sum->Get("latency_p99_us"), 900u);
  EXPECT_EQ(sum->Get("largest_free_bytes"), 8192u);
  EXPECT_EQ(sum->Get("insecure"), 0u);
  ASSERT_EQ(sum->namespaces.size(), 2u);
  EXPECT_EQ(sum->namespaces[0].name, "");
  EXPECT_EQ(sum->namespaces[0].objects, 2u);
  EXPECT_EQ(sum->namespaces[1].name, "bench");
  EXPECT_EQ(sum->namespaces[1].objects, 5u);
  EXPECT_EQ(sum->namespaces[1].bytes, 500u);

  const std::vector<NodeReport> none_answered = {down, down};
  EXPECT_EQ(SumNodeStats(none_answered).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(SumNodeStats({}).ok());
}

}  // namespace
}  // namespace kvport
