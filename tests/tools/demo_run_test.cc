// SPDX-License-Identifier: Apache-2.0
#include "demo/demo_run.h"

#include <gtest/gtest.h>

#include <memory>

#include "demo/demo_report.h"
#include "kvport/cache_key.h"
#include "kvport/chunk_hasher.h"
#include "kvport/client.h"
#include "kvport/server.h"

namespace kvport::demo {
namespace {

// A small run: 128 KiB chunks (1 layer, 2 KV heads, head dim 64, bf16, 256 tokens), few
// conversations so that most prompts continue one already seen.
DemoOptions TinyDemo() {
  DemoOptions o;
  o.shape.layers = 1;
  o.shape.kv_heads = 2;
  o.shape.head_dim = 64;
  o.requests = 30;
  o.capacity_bytes = uint64_t{64} << 20;
  o.workload.seed = 11;
  o.workload.system_prompts = 2;
  o.workload.live_conversations = 3;
  return o;
}

void ExpectConsistent(const DemoReport& r, const DemoOptions& o) {
  EXPECT_EQ(r.chunk_bytes, uint64_t{128} << 10);
  EXPECT_EQ(r.requests, static_cast<uint64_t>(o.requests));
  EXPECT_GT(r.tokens, 0u);
  EXPECT_LE(r.hit_tokens, r.tokens);
  EXPECT_LE(r.hit_tokens, r.lookup_hit_tokens);
  EXPECT_EQ(r.hit_tokens + r.computed_tokens, r.tokens);
  EXPECT_EQ(r.bytes_read, r.chunks_read * r.chunk_bytes);
  EXPECT_EQ(r.bytes_written, r.chunks_written * r.chunk_bytes);
  // Hit tokens are whole chunks.
  EXPECT_EQ(r.hit_tokens % static_cast<uint64_t>(o.shape.tokens_per_chunk), 0u);
  EXPECT_EQ(r.retrieve_chunk_latency.count(), r.chunks_read);
}

TEST(DemoRunTest, EmbeddedRunVerifiesEveryChunkAndReportsConsistentNumbers) {
  const DemoOptions o = TinyDemo();
  int progress_calls = 0;
  Result<DemoReport> r = RunDemo(o, [&](const DemoProgress& p) {
    ++progress_calls;
    EXPECT_EQ(p.done, progress_calls);
    EXPECT_EQ(p.total, o.requests);
    EXPECT_LE(p.hit_tokens, p.tokens);
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(progress_calls, o.requests);
  ExpectConsistent(*r, o);
  // Prompts continue earlier ones, so some of their prefix is found, retrieved and verified.
  EXPECT_GT(r->hit_tokens, 0u);
  EXPECT_GT(r->chunks_read, 0u);
  EXPECT_EQ(r->chunks_verified, r->chunks_read);
  EXPECT_EQ(r->verify_failures(), 0u);
  EXPECT_GT(r->chunks_written, 0u);
  EXPECT_EQ(r->store_failures, 0u);
  EXPECT_FALSE(r->node_counters.empty());

  // The embedded node listens on a Unix socket too, and the connector's automatic choice maps
  // its arena.
  EXPECT_EQ(r->transport, "shared memory") << r->transport_reason;
  EXPECT_NE(r->node.find(" and unix:/"), std::string::npos) << r->node;

  const std::string text = FormatDemoReport(*r, o);
  EXPECT_NE(text.find("prefix hit rate"), std::string::npos) << text;
  EXPECT_NE(text.find("verified"), std::string::npos) << text;
  EXPECT_NE(text.find("  transport  shared memory ("), std::string::npos) << text;
  EXPECT_EQ(text.find("FAILED"), std::string::npos) << text;
}

TEST(DemoRunTest, WithoutSharedMemoryTheRunGoesOverTcp) {
  DemoOptions o = TinyDemo();
  o.unix_socket = "";  // the embedded node offers no shared memory
  Result<DemoReport> r = RunDemo(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->transport, "TCP");
  EXPECT_NE(r->transport_reason.find("no shared memory"), std::string::npos) << r->transport_reason;
  EXPECT_EQ(r->node.find("unix:"), std::string::npos) << r->node;
  ExpectConsistent(*r, o);
  EXPECT_GT(r->chunks_read, 0u);
  EXPECT_EQ(r->verify_failures(), 0u);
  EXPECT_NE(FormatDemoReport(*r, o).find("  transport  TCP ("), std::string::npos);
}

TEST(DemoRunTest, AnUnusableUnixSocketPathFailsWithTheReason) {
  DemoOptions o = TinyDemo();
  o.unix_socket = "relative.sock";  // only "auto" falls back by itself
  Result<DemoReport> r = RunDemo(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("relative.sock"), std::string::npos) << r.status().ToString();
}

TEST(DemoRunTest, SameSeedSameHits) {
  const DemoOptions o = TinyDemo();
  Result<DemoReport> a = RunDemo(o);
  Result<DemoReport> b = RunDemo(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->hit_tokens, b->hit_tokens);
  EXPECT_EQ(a->chunks_written, b->chunks_written);
}

TEST(DemoRunTest, DetectsAChunkWhoseBytesChangedOnTheNode) {
  ServerOptions so;
  so.capacity_bytes = uint64_t{64} << 20;
  Result<std::unique_ptr<Server>> server = Server::Start(so);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  DemoOptions o = TinyDemo();
  o.url = "eic://" + (*server)->address();
  o.ns = "corrupt";
  o.requests = 1;
  Result<DemoReport> first = RunDemo(o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_GT(first->chunks_written, 0u);
  EXPECT_EQ(first->chunks_read, 0u);  // nothing was cached yet

  // Damage one byte of the first chunk of the first prompt, keeping its metadata.
  Result<ConversationWorkload> w = ConversationWorkload::Create(o.workload);
  ASSERT_TRUE(w.ok());
  const Request req = w->Next();
  Result<ChunkHasher> hasher = ChunkHasher::Create({});
  ASSERT_TRUE(hasher.ok());
  CacheKey key;
  key.model_name = o.model_name;
  key.chunk_hash = hasher->Hashes(req.tokens).at(0);
  key.dtype = KeyDtype::kBfloat16;
  const std::vector<std::string> keys{key.ToString()};
  Client client;
  ASSERT_TRUE(client.Init("test", (*server)->address()).ok());
  GetOptions get;
  get.ns = o.ns;
  std::vector<uint8_t> value(first->chunk_bytes);
  IOBuffers buffers;
  buffers.Append(value.data(), value.size());
  Result<GetResult> got = client.MGet(keys, get, buffers);
  ASSERT_TRUE(got.ok() && got->codes[0] == KeyCode::kSuccess);
  value[value.size() / 3] ^= 0x40;
  SetOptions set;
  set.ns = o.ns;
  Result<BatchResult> put = client.MSet(keys, buffers, set, got->metas);
  ASSERT_TRUE(put.ok() && put->codes[0] == KeyCode::kSuccess);

  // The same prompt again: its cached prefix is read, and the damaged chunk is caught.
  Result<DemoReport> second = RunDemo(o);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_GT(second->chunks_read, 0u);
  EXPECT_EQ(second->verify_failures(), 1u);
  EXPECT_EQ(second->hit_tokens, 0u) << "a chunk that did not verify is not reused";
  EXPECT_NE(second->first_failure.find("chunk 0"), std::string::npos) << second->first_failure;
  ExpectConsistent(*second, o);
  EXPECT_NE(FormatDemoReport(*second, o).find("FAILED"), std::string::npos);
}

TEST(DemoRunTest, RejectsBadOptionsWithTheReason) {
  DemoOptions o = TinyDemo();
  o.shape.dtype = "int4";
  Result<DemoReport> r = RunDemo(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("int4"), std::string::npos);
  o = TinyDemo();
  o.capacity_bytes = 4096;
  r = RunDemo(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--capacity"), std::string::npos);
}

}  // namespace
}  // namespace kvport::demo
