// SPDX-License-Identifier: Apache-2.0
// eic:// against a real kvport node on an ephemeral loopback port.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <fstream>
#include <thread>

#include "chunk_fixture.h"
#include "kvport/client.h"
#include "kvport/config.h"
#include "kvport/connector.h"
#include "kvport/server.h"
#include "server/test_client.h"

namespace kvport {
namespace {

using testing::KeyOf;
using testing::KvChunkOf;
using testing::MlaChunkOf;
using testing::OwnedChunk;

class EicConnectorTest : public ::testing::Test {
 protected:
  void StartNode(uint64_t capacity = 64 << 20, const std::string& listen = "127.0.0.1:0",
                 const std::string& unix_socket = "") {
    ServerOptions options;
    options.listen = listen;
    options.unix_socket = unix_socket;
    options.capacity_bytes = capacity;
    options.threads = 2;
    auto server = Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }

  std::unique_ptr<RemoteConnector> Connect(ConnectorOptions options = {},
                                           const std::string& path = "") {
    options.transport_type = 1;
    options.timeout_secs = 5;
    auto c = CreateConnector("eic://" + server_->address() + path, options);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::unique_ptr<Server> server_;
};

TEST_F(EicConnectorTest, MultiGroupChunksRoundTripExactly) {
  StartNode();
  for (uint64_t expected : {uint64_t{0}, uint64_t{4096}}) {  // meta-first and one-round-trip reads
    ConnectorOptions options;
    options.expected_chunk_bytes = expected;
    auto conn = Connect(options);
    ASSERT_NE(conn, nullptr);
    OwnedChunk kv = KvChunkOf(2, 16, 64, 1);   // 8 KiB: larger than the 4 KiB guess
    OwnedChunk mla = MlaChunkOf(2, 8, 2);      // three groups, three dtypes
    OwnedChunk small = KvChunkOf(1, 2, 8, 3);  // 64 bytes: smaller than the guess
    std::vector<CacheKey> keys{KeyOf(10 + expected), KeyOf(11 + expected), KeyOf(12 + expected)};
    std::vector<KvChunkView> views{kv.view(), mla.view(), small.view()};
    auto put = conn->BatchedPut(keys, views);
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    for (const Status& st : *put)
      EXPECT_TRUE(st.ok()) << st.ToString();

    auto got = conn->BatchedGet(keys);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const OwnedChunk* want[] = {&kv, &mla, &small};
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_TRUE((*got)[i].has_value()) << i;
      EXPECT_EQ((*got)[i]->meta, want[i]->meta) << i;
      EXPECT_EQ((*got)[i]->data, want[i]->data) << i;
    }
    auto offsets = RemoteMetadata::GroupOffsets((*got)[1]->meta.groups);
    ASSERT_TRUE(offsets.ok());
    EXPECT_EQ((*offsets)[0], 0u);
    EXPECT_EQ(offsets->size(), 3u);
  }
}

TEST_F(EicConnectorTest, PrefixWithAHoleAndNamespaces) {
  StartNode();
  ConnectorOptions in_a;
  in_a.ns = "tenant-a";
  auto a = Connect(in_a);
  auto b = Connect({}, "/tenant-b");  // the URL's namespace
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::vector<OwnedChunk> chunks;
  std::vector<CacheKey> keys;
  for (uint64_t i = 0; i < 5; ++i) {
    chunks.push_back(KvChunkOf(1, 4, 8, i));
    keys.push_back(KeyOf(200 + i));
  }
  for (size_t i : {0, 1, 3, 4})
    ASSERT_TRUE(a->Put(keys[i], chunks[i].view()).ok());

  EXPECT_EQ(*a->BatchedContains(keys), 2u);
  EXPECT_EQ(*b->BatchedContains(keys), 0u);  // other namespace
  auto prefix = a->BatchedGetPrefix(keys);
  ASSERT_TRUE(prefix.ok());
  ASSERT_EQ(prefix->size(), 2u);
  EXPECT_EQ((*prefix)[0].data, chunks[0].data);
  EXPECT_EQ((*prefix)[1].data, chunks[1].data);
  auto slots = a->BatchedGet(keys);
  ASSERT_TRUE(slots.ok());
  EXPECT_TRUE((*slots)[3].has_value());
  EXPECT_FALSE((*slots)[2].has_value());

  auto listed = a->List();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->size(), 4u);
  EXPECT_TRUE(a->Remove(keys[0]).ok());
  EXPECT_EQ(a->Remove(keys[0]).code(), StatusCode::kNotFound);
  EXPECT_EQ(*a->BatchedContains(keys), 0u);
}

TEST_F(EicConnectorTest, CapacityExhaustionReportsEveryKeyTruthfully) {
  StartNode(1 << 20);  // 1 MiB node
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  std::vector<OwnedChunk> chunks;
  std::vector<CacheKey> keys;
  for (uint64_t i = 0; i < 4; ++i) {
    chunks.push_back(KvChunkOf(1, 64, 1024, i));  // 256 KiB each
    keys.push_back(KeyOf(300 + i));
  }
  OwnedChunk huge = KvChunkOf(1, 512, 1024, 99);  // 2 MiB: larger than the node
  chunks.push_back(std::move(huge));
  keys.push_back(KeyOf(399));
  std::vector<KvChunkView> views;
  for (const auto& c : chunks)
    views.push_back(c.view());
  auto put = conn->BatchedPut(keys, views);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ((*put)[4].code(), StatusCode::kTooLarge) << (*put)[4].ToString();
  // Whatever was reported stored reads back intact; whatever failed never reads as a hit.
  auto got = conn->BatchedGet(keys);
  ASSERT_TRUE(got.ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    if ((*put)[i].ok()) {
      if ((*got)[i]) {  // may have been evicted since
        EXPECT_EQ((*got)[i]->data, chunks[i].data) << i;
      }
    } else {
      EXPECT_FALSE((*got)[i].has_value()) << i;
    }
  }
}

TEST_F(EicConnectorTest, AForeignObjectIsAMissNotAHit) {
  StartNode();
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  // Written with the raw client: a payload with no RemoteMetadata.
  Client raw;
  ASSERT_TRUE(raw.Init("test", server_->address()).ok());
  std::vector<std::string> key{KeyOf(500).ToString()};
  std::string value(100, 'x');
  IOBuffers values;
  values.Append(value.data(), value.size());
  auto set = raw.MSet(key, values);
  ASSERT_TRUE(set.ok());
  ASSERT_EQ(set->status, BatchCode::kSuccess);
  auto got = conn->Get(KeyOf(500));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got->has_value());
}

// Sizes come from the node: a stored chunk larger than max_chunk_bytes reads as a miss and is
// never fetched (no buffer sized for it, none of its bytes sent), in both read paths.
TEST_F(EicConnectorTest, ChunksOverMaxChunkBytesAreMissesAndAreNeverFetched) {
  StartNode();
  Client raw;
  ASSERT_TRUE(raw.Init("test", server_->address()).ok());
  auto node_counter = [&](std::string_view name) {
    Result<NodeStats> stats = raw.Stats();
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return stats.ok() ? stats->Get(name) : 0;
  };
  OwnedChunk big = KvChunkOf(2, 16, 64, 1);  // 8 KiB
  OwnedChunk small = KvChunkOf(1, 2, 8, 2);  // 64 bytes
  const std::vector<CacheKey> keys{KeyOf(600), KeyOf(601)};
  {
    auto writer = Connect();
    ASSERT_NE(writer, nullptr);
    std::vector<KvChunkView> views{big.view(), small.view()};
    auto put = writer->BatchedPut(keys, views);
    ASSERT_TRUE(put.ok()) << put.status().ToString();
  }
  for (uint64_t expected : {uint64_t{0}, uint64_t{2048}}) {  // meta-first, one round trip
    ConnectorOptions options;
    options.max_chunk_bytes = 4096;
    options.expected_chunk_bytes = expected;
    auto conn = Connect(options);
    ASSERT_NE(conn, nullptr);
    const uint64_t sent_before = node_counter("bytes_sent");
    auto got = conn->BatchedGet(keys);
    const uint64_t sent = node_counter("bytes_sent") - sent_before;
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_FALSE((*got)[0].has_value()) << expected;
    ASSERT_TRUE((*got)[1].has_value()) << expected;
    EXPECT_EQ((*got)[1]->data, small.data);
    EXPECT_LT(sent, big.data.size()) << "bytes the node sent, expected_chunk_bytes " << expected;
    auto prefix = conn->BatchedGetPrefix(keys);
    ASSERT_TRUE(prefix.ok());
    EXPECT_TRUE(prefix->empty());  // the first chunk is a miss
  }
  ConnectorOptions inconsistent;
  inconsistent.expected_chunk_bytes = 8192;
  inconsistent.max_chunk_bytes = 4096;
  auto refused = CreateConnector("eic://" + server_->address(), inconsistent);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("max_chunk_bytes"), std::string::npos)
      << refused.status().ToString();
}

TEST_F(EicConnectorTest, WithoutExpectedChunkBytesOnlyTheFirstGetReadsMetadataFirst) {
  StartNode();
  OwnedChunk chunk = KvChunkOf(2, 16, 64, 1);  // 8 KiB, the model's full chunk
  OwnedChunk last = KvChunkOf(1, 2, 8, 2);     // a prefix's shorter last chunk
  const std::vector<CacheKey> keys{KeyOf(700), KeyOf(701)};
  {
    auto writer = Connect();
    ASSERT_NE(writer, nullptr);
    std::vector<KvChunkView> views{chunk.view(), last.view()};
    ASSERT_TRUE(writer->BatchedPut(keys, views).ok());
  }
  auto node_counter = [&](std::string_view name) { return server_->Stats().Get(name); };
  // A fresh reader (another process, in LMCache) knows no chunk size yet: its first get costs a
  // meta-only MGET and the read; from then on it knows the size and a get is one MGET.
  auto reader = Connect();
  ASSERT_NE(reader, nullptr);
  for (uint64_t want_mgets : {uint64_t{2}, uint64_t{1}, uint64_t{1}}) {
    const uint64_t before = node_counter("op_mget");
    auto got = reader->BatchedGet(keys);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE((*got)[0].has_value() && (*got)[1].has_value());
    EXPECT_EQ((*got)[0]->data, chunk.data);
    EXPECT_EQ((*got)[1]->data, last.data);
    EXPECT_EQ(node_counter("op_mget") - before, want_mgets);
  }
  // A writer learns the size from its own puts.
  auto writer = Connect();
  ASSERT_NE(writer, nullptr);
  std::vector<KvChunkView> views{chunk.view()};
  const std::vector<CacheKey> own{KeyOf(702)};
  ASSERT_TRUE(writer->BatchedPut(own, views).ok());
  const uint64_t before = node_counter("op_mget");
  auto got = writer->BatchedGet(own);
  ASSERT_TRUE(got.ok() && (*got)[0].has_value());
  EXPECT_EQ(node_counter("op_mget") - before, 1u);
}

TEST_F(EicConnectorTest, EightThreadsShareOneConnector) {
  StartNode();
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const uint64_t id = 1000 + t * 100 + i;
        OwnedChunk c = KvChunkOf(1, 8, 16, id);
        if (!conn->Put(KeyOf(id), c.view()).ok()) ++bad;
        auto got = conn->Get(KeyOf(id));
        if (!got.ok() || !got->has_value() || (*got)->data != c.data) ++bad;
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(EicConnectorTest, NodeRestartFailsThenRecoversWithoutANewConnector) {
  StartNode();
  const std::string address = server_->address();
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  OwnedChunk c = KvChunkOf(1, 4, 8, 1);
  ASSERT_TRUE(conn->Put(KeyOf(1), c.view()).ok());

  server_->Stop();
  server_.reset();
  auto during = conn->BatchedContains(std::vector<CacheKey>{KeyOf(1)});
  ASSERT_FALSE(during.ok());
  EXPECT_EQ(during.status().code(), StatusCode::kUnavailable) << during.status().ToString();

  StartNode(64 << 20, address);  // same port, empty node
  Status put;
  for (int attempt = 0; attempt < 200; ++attempt) {  // reconnect backoff: bounded retries
    put = conn->Put(KeyOf(2), c.view());
    if (put.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(put.ok()) << put.ToString();
  EXPECT_FALSE(*conn->Exists(KeyOf(1)));  // the old node's data went with it
  EXPECT_TRUE(*conn->Exists(KeyOf(2)));
}

TEST_F(EicConnectorTest, TransportTypesFromConfig) {
  StartNode();
  Config config;
  config.remote_url = "eic://" + server_->address();
  config.eic_trans_type = 1;
  EXPECT_TRUE(CreateConnector(config).ok());
  config.eic_trans_type = 2;  // RDMA: served over TCP until the RDMA transport exists
  EXPECT_TRUE(CreateConnector(config).ok());
  config.eic_trans_type = 3;  // GPUDirect: needs a usable CUDA runtime and the GDR transport
  auto gdr = CreateConnector(config);
  ASSERT_FALSE(gdr.ok());
  EXPECT_EQ(gdr.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(gdr.status().message().find("GPUDirect"), std::string::npos) << gdr.status().ToString();
  config.remote_url.clear();
  EXPECT_EQ(CreateConnector(config).status().code(), StatusCode::kInvalidArgument);
}

// The config key `checksums` reaches the connector's client: a chunk whose stored checksum does
// not match its bytes (what a flipped bit between the writer and the reader looks like) is a
// miss by default and comes back with `checksums: false`.
TEST_F(EicConnectorTest, TheChecksumsKeyTurnsTheConnectorsChecksOff) {
  StartNode();
  auto writer = Connect();
  ASSERT_NE(writer, nullptr);
  const OwnedChunk chunk = KvChunkOf(2, 4, 64, 31);
  ASSERT_TRUE(writer->Put(KeyOf(31), chunk.view()).ok());
  // The same key, meta and bytes written again with a checksum that is not theirs.
  Result<testing::TestClient> connected = testing::TestClient::Connect(server_->port());
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  testing::TestClient raw = std::move(connected).value();
  const std::string key = KeyOf(31).ToString();
  Result<std::vector<testing::GetItem>> stored = raw.Mget("", {key});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ((*stored)[0].status, StatusCode::kOk);
  const testing::GetItem& item = (*stored)[0];
  protocol::MsetRequest rewrite;
  rewrite.items.push_back({key, item.meta, item.value.size(), item.value.data(),
                           XXH3_64bits(item.value.data(), item.value.size()) ^ 1});
  std::string descriptor;
  Result<protocol::MsetResponse> rewritten =
      testing::Exchange<protocol::MsetResponse>(raw, rewrite, &descriptor);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  ASSERT_EQ(rewritten->statuses[0], StatusCode::kOk);

  auto connector_from = [&](const std::string& yaml) -> std::unique_ptr<RemoteConnector> {
    const std::string path = ::testing::TempDir() + "kvport-checksums-key.yaml";
    std::ofstream(path) << "remote_url: eic://" << server_->address() << "\neic_trans_type: 1\n"
                        << yaml;
    ConfigSources sources;
    sources.file = path;
    sources.env = std::map<std::string, std::string>{};  // the file alone
    Result<Config> config = LoadConfig(sources);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    if (!config.ok()) return nullptr;
    Result<std::unique_ptr<RemoteConnector>> made = CreateConnector(*config);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    return made.ok() ? std::move(made).value() : nullptr;
  };
  auto checked = connector_from("");
  ASSERT_NE(checked, nullptr);
  Result<std::optional<KvChunk>> missed = checked->Get(KeyOf(31));
  ASSERT_TRUE(missed.ok()) << missed.status().ToString();
  EXPECT_FALSE(missed->has_value());
  auto unchecked = connector_from("checksums: false\n");
  ASSERT_NE(unchecked, nullptr);
  Result<std::optional<KvChunk>> got = unchecked->Get(KeyOf(31));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->data, chunk.data);
}

// The connector's own default is eic_trans_type 0: shared memory with a node on this host that
// offers it (over its Unix socket), TCP otherwise; Transport() says which and why.
TEST_F(EicConnectorTest, DefaultTransportIsAutomaticAndReported) {
  StartNode(64 << 20, "127.0.0.1:0", "auto");
  ConnectorOptions options;
  EXPECT_EQ(options.transport_type, 0);
  options.timeout_secs = 5;
  auto shm = CreateConnector("eic://" + server_->address(), options);
  ASSERT_TRUE(shm.ok()) << shm.status().ToString();
  EXPECT_EQ((*shm)->Transport(), "shared memory") << (*shm)->TransportReason();
  EXPECT_NE((*shm)->TransportReason().find(server_->unix_socket_path()), std::string::npos)
      << (*shm)->TransportReason();
  OwnedChunk c = KvChunkOf(1, 4, 8, 7);
  ASSERT_TRUE((*shm)->Put(KeyOf(7), c.view()).ok());
  auto got = (*shm)->Get(KeyOf(7));
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  EXPECT_EQ((*got)->data, c.data);

  options.transport_type = 1;  // TCP, forced
  auto tcp = CreateConnector("eic://" + server_->address(), options);
  ASSERT_TRUE(tcp.ok()) << tcp.status().ToString();
  EXPECT_EQ((*tcp)->Transport(), "TCP");
  got = (*tcp)->Get(KeyOf(7));
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  EXPECT_EQ((*got)->data, c.data);

  auto mem = CreateConnector("mem://transport-test", ConnectorOptions{});
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  EXPECT_EQ((*mem)->Transport(), "in-process");
}

// A node without a Unix socket: the automatic choice stays on TCP and says why.
TEST_F(EicConnectorTest, AutomaticTransportFallsBackToTcpWithAReason) {
  StartNode();
  ConnectorOptions options;
  options.timeout_secs = 5;
  auto conn = CreateConnector("eic://" + server_->address(), options);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  EXPECT_EQ((*conn)->Transport(), "TCP");
  EXPECT_NE((*conn)->TransportReason().find("no shared memory"), std::string::npos)
      << (*conn)->TransportReason();
}

// EIC's static-cluster form in remote_url: the chunks spread over the nodes, come back whole,
// and the URL's namespace is the connector's.
TEST_F(EicConnectorTest, AStaticClusterUrlSpreadsChunksOverItsNodes) {
  std::vector<std::unique_ptr<Server>> nodes;
  std::string list;
  for (int i = 0; i < 3; ++i) {
    StartNode();
    list += (list.empty() ? "" : ";") + server_->address();
    nodes.push_back(std::move(server_));
  }
  ConnectorOptions options;
  options.transport_type = 1;
  options.timeout_secs = 5;
  auto conn = CreateConnector("eic://" + list + "/tenant/", options);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  std::vector<CacheKey> keys;
  std::vector<OwnedChunk> chunks;
  for (int i = 0; i < 30; ++i) {
    keys.push_back(KeyOf(100 + i));
    chunks.push_back(KvChunkOf(1, 4, 16, i));
  }
  std::vector<KvChunkView> views;
  for (const OwnedChunk& c : chunks)
    views.push_back(c.view());
  auto put = (*conn)->BatchedPut(keys, views);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  auto got = (*conn)->BatchedGet(keys);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE((*got)[i].has_value()) << i;
    EXPECT_EQ((*got)[i]->data, chunks[i].data) << i;
  }
  for (const auto& node : nodes) {
    Client one;
    ASSERT_TRUE(one.Init("count", node->address()).ok());
    Result<NodeStats> stats = one.Stats();
    ASSERT_TRUE(stats.ok());
    ASSERT_EQ(stats->namespaces.size(), 1u);
    EXPECT_EQ(stats->namespaces[0].name, "tenant");
    EXPECT_GT(stats->namespaces[0].objects, 0u) << node->address();
  }
}

}  // namespace
}  // namespace kvport
