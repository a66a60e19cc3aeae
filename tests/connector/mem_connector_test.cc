// SPDX-License-Identifier: Apache-2.0
// The connector semantics every connector keeps, checked on mem:// (no node needed); the same
// cases run against a real node in eic_connector_test.cc.
#include <gtest/gtest.h>

#include "chunk_fixture.h"
#include "connector/connector_url.h"
#include "kvport/connector.h"

namespace kvport {
namespace {

using testing::KeyOf;
using testing::KvChunkOf;
using testing::MlaChunkOf;

std::unique_ptr<RemoteConnector> Mem(const std::string& name) {
  auto c = CreateConnector("mem://" + name, ConnectorOptions{});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

TEST(ConnectorRegistryTest, UnknownSchemeListsKnownOnes) {
  auto c = CreateConnector("redis://127.0.0.1:6379", ConnectorOptions{});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("'redis'"), std::string::npos);
  EXPECT_NE(c.status().message().find("eic"), std::string::npos);
  EXPECT_NE(c.status().message().find("mem"), std::string::npos);
}

TEST(ConnectorRegistryTest, MalformedUrls) {
  EXPECT_EQ(CreateConnector("127.0.0.1:7470", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateConnector("eic://", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateConnector("eic://hostonly", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateConnector("eic://h:1/a/b", {}).status().code(), StatusCode::kInvalidArgument);
  auto url = ParseConnectorUrl("EIC://10.0.0.1:7470/tenant-a/");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->scheme, "eic");
  EXPECT_EQ(url->authority, "10.0.0.1:7470");
  EXPECT_EQ(url->path, "tenant-a");
}

TEST(MemConnectorTest, RoundTripKeepsMetadataAndBytes) {
  auto conn = Mem("roundtrip");
  auto a = KvChunkOf(2, 16, 64, 1);
  auto mla = MlaChunkOf(2, 16, 2);
  ASSERT_TRUE(conn->Put(KeyOf(1), a.view()).ok());
  ASSERT_TRUE(conn->Put(KeyOf(2), mla.view()).ok());
  auto got = conn->Get(KeyOf(2));
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->meta, mla.meta);
  EXPECT_EQ((*got)->data, mla.data);
  EXPECT_TRUE(*conn->Exists(KeyOf(1)));
  EXPECT_FALSE(*conn->Exists(KeyOf(3)));
  auto miss = conn->Get(KeyOf(3));
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
}

TEST(MemConnectorTest, BadChunkIsRefusedPerKey) {
  auto conn = Mem("bad");
  auto good = KvChunkOf(1, 4, 8, 1);
  auto short_payload = KvChunkOf(1, 4, 8, 2);
  short_payload.data.pop_back();
  std::vector<CacheKey> keys{KeyOf(1), KeyOf(2), KeyOf(3)};
  std::vector<KvChunkView> views{good.view(), short_payload.view(), KvChunkView{}};
  auto statuses = conn->BatchedPut(keys, views);
  ASSERT_TRUE(statuses.ok());
  EXPECT_TRUE((*statuses)[0].ok());
  EXPECT_EQ((*statuses)[1].code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*statuses)[2].code(), StatusCode::kInvalidArgument);
  // A refused chunk never becomes a hit.
  EXPECT_EQ(*conn->BatchedContains(keys), 1u);
  EXPECT_FALSE(conn->Get(KeyOf(2))->has_value());
}

TEST(MemConnectorTest, PrefixSemanticsWithAHole) {
  auto conn = Mem("prefix");
  std::vector<testing::OwnedChunk> chunks;
  for (uint64_t i = 0; i < 5; ++i)
    chunks.push_back(KvChunkOf(1, 4, 8, i));
  std::vector<CacheKey> keys;
  for (uint64_t i = 0; i < 5; ++i)
    keys.push_back(KeyOf(100 + i));
  for (size_t i : {0, 1, 3, 4})
    ASSERT_TRUE(conn->Put(keys[i], chunks[i].view()).ok());

  EXPECT_EQ(*conn->BatchedContains(keys), 2u);
  auto prefix = conn->BatchedGetPrefix(keys);
  ASSERT_TRUE(prefix.ok());
  ASSERT_EQ(prefix->size(), 2u);
  EXPECT_EQ((*prefix)[1].data, chunks[1].data);
  auto slots = conn->BatchedGet(keys);
  ASSERT_TRUE(slots.ok());
  ASSERT_EQ(slots->size(), 5u);
  EXPECT_TRUE((*slots)[0] && (*slots)[1] && !(*slots)[2] && (*slots)[3] && (*slots)[4]);
  EXPECT_EQ((*slots)[4]->data, chunks[4].data);
}

TEST(MemConnectorTest, RemoveListCloseAndSharedName) {
  auto a = Mem("shared");
  auto b = Mem("shared");
  auto chunk = KvChunkOf(1, 2, 4, 9);
  ASSERT_TRUE(a->Put(KeyOf(7), chunk.view()).ok());
  EXPECT_TRUE(*b->Exists(KeyOf(7)));
  auto keys = b->List();
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, std::vector<std::string>{KeyOf(7).ToString()});
  EXPECT_TRUE(b->Remove(KeyOf(7)).ok());
  EXPECT_EQ(b->Remove(KeyOf(7)).code(), StatusCode::kNotFound);
  EXPECT_TRUE(a->Close().ok());
  EXPECT_EQ(a->Ping().code(), StatusCode::kAborted);
  EXPECT_TRUE(b->Ping().ok());
}

TEST(AsyncConnectorTest, RunsCallsOnTheExecutor) {
  auto conn = Mem("async");
  AsyncConnector async(*conn, 2);
  auto chunk = KvChunkOf(1, 2, 4, 3);
  auto put = async.Put({KeyOf(1)}, {chunk.view()}).get();
  ASSERT_TRUE(put.ok());
  EXPECT_TRUE((*put)[0].ok());
  EXPECT_EQ(*async.Contains({KeyOf(1), KeyOf(2)}).get(), 1u);
  auto prefix = async.GetPrefix({KeyOf(1), KeyOf(2)}).get();
  ASSERT_TRUE(prefix.ok());
  ASSERT_EQ(prefix->size(), 1u);
  EXPECT_EQ((*prefix)[0].data, chunk.data);
  auto get = async.Get({KeyOf(2), KeyOf(1)}).get();
  ASSERT_TRUE(get.ok());
  EXPECT_FALSE((*get)[0].has_value());
  EXPECT_TRUE((*get)[1].has_value());
}

}  // namespace
}  // namespace kvport
