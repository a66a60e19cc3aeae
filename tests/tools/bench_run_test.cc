// SPDX-License-Identifier: Apache-2.0
// A tiny `kvport bench` against an in-process node, with the socket baseline; the redis
// baseline is in bench_redis_test.cc (it starts a child process).
#include "bench/bench_run.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "bench/bench_matrix.h"
#include "bench/bench_node.h"
#include "bench/bench_report.h"
#include "bench/round_trip_baseline.h"
#include "bench/socket_baseline.h"
#include "bench/ucx_perftest_baseline.h"
#include "kvport/server.h"
#include "kvport/ucx.h"

namespace kvport::bench {
namespace {

BenchOptions TinyBench() {
  BenchOptions o;
  o.value_bytes = 64 << 10;
  o.batch = 4;
  o.connections = 2;
  o.count = 8;
  o.max_seconds = 120;  // bounded by count; the time limit is only a safety net
  o.exists_batch = 16;
  o.exists_count = 4;
  o.redis_baseline = false;
  o.warmup_bytes = 1 << 20;  // 4 calls: exercised, but small
  return o;
}

void ExpectKvportPhasesPassed(const BenchReport& r, const BenchOptions& o) {
  ASSERT_EQ(r.kvport.size(), 3u);
  for (const PhaseResult& p : r.kvport) {
    SCOPED_TRACE(std::string(OpName(p.op)));
    EXPECT_EQ(p.system, "kvport");
    EXPECT_TRUE(p.error.empty()) << p.error;
    EXPECT_EQ(p.failed_keys, 0u);
    EXPECT_EQ(p.latency.count(), p.calls);
    if (p.op == Op::kExists) {
      EXPECT_EQ(p.calls, o.exists_count);
      EXPECT_EQ(p.keys, o.exists_count * o.exists_batch);
      EXPECT_EQ(p.bytes, 0u);
    } else {
      EXPECT_EQ(p.calls, o.count);
      EXPECT_EQ(p.keys, o.count * o.batch);
      EXPECT_EQ(p.bytes, p.keys * o.value_bytes);
    }
  }
}

TEST(BenchRunTest, EmbeddedNodeWithSocketBaseline) {
  BenchOptions o = TinyBench();
  o.transport = TransportChoice::kTcp;
  std::vector<std::string> notes;
  Result<BenchReport> r = RunBench(o, [&](std::string_view n) { notes.emplace_back(n); });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectKvportPhasesPassed(*r, o);
  EXPECT_NE(r->node.find("embedded 127.0.0.1:"), std::string::npos) << r->node;
  EXPECT_FALSE(notes.empty());

  // Every socket mode moved the same volume as the largest kvport phase.
  ASSERT_EQ(r->socket.size(), 3u);
  for (const PhaseResult& p : r->socket) {
    EXPECT_EQ(p.bytes, o.count * o.batch * o.value_bytes) << p.variant;
    EXPECT_TRUE(p.error.empty()) << p.error;
  }
  ASSERT_NE(r->Limit(), nullptr);
  for (const PhaseResult& p : r->socket)
    EXPECT_LE(p.gb_per_second(), r->Limit()->gb_per_second());
  EXPECT_TRUE(r->RatioToLimit(Op::kPut).has_value());
  EXPECT_TRUE(r->RatioToLimit(Op::kGet).has_value());
  EXPECT_FALSE(r->RatioToLimit(Op::kExists).has_value());
  EXPECT_FALSE(r->RatioToRedis(Op::kPut).has_value());
  EXPECT_NE(r->redis_skipped.find("--no-redis"), std::string::npos);
  EXPECT_TRUE(r->AllPassed());

  const std::string text = FormatBenchText(*r);
  EXPECT_NE(text.find("kvport/limit"), std::string::npos) << text;
  EXPECT_NE(text.find("redis baseline skipped"), std::string::npos) << text;
  const std::string text_json = FormatBenchJson(*r);
  ASSERT_TRUE(nlohmann::json::accept(text_json)) << text_json;
  EXPECT_EQ(text_json.find('\n'), text_json.size() - 1);  // one line
  const nlohmann::json json = nlohmann::json::parse(text_json);
  EXPECT_EQ(json["passed"], true);
  EXPECT_TRUE(json["ratios"]["exists"]["vs_limit"].is_null());
  EXPECT_TRUE(json["ratios"]["put"]["vs_limit"].is_number());
  EXPECT_TRUE(json["ratios"]["put"]["vs_redis"].is_null());
  EXPECT_EQ(json["limit"]["variant"], r->Limit()->variant);
  EXPECT_NE(json["redis_skipped"].get<std::string>().find("--no-redis"), std::string::npos);
  EXPECT_TRUE(json["socket_skipped"].is_string());
  EXPECT_TRUE(json["memcpy_limit"].is_null());  // no shared-memory phase, no memcpy baseline
  EXPECT_TRUE(json["ratios_shm"].is_null());
  EXPECT_EQ(json["options"]["transports"], nlohmann::json::array({"tcp"}));
  EXPECT_TRUE(json["node"].is_string());
  for (const char* key : {"url", "value_bytes", "batch", "connections", "threads", "ops", "count",
                          "max_seconds", "exists_batch", "exists_count", "warmup_bytes"}) {
    EXPECT_TRUE(json["options"].contains(key)) << key;
  }
  EXPECT_EQ(json["options"]["value_bytes"], o.value_bytes);
  EXPECT_EQ(json["options"]["redis_pipeline"], o.batch);  // 64 KiB values: the whole batch
  EXPECT_FALSE(json["options"].contains("shape"));
  ASSERT_EQ(json["phases"].size(), r->kvport.size() + r->socket.size() + r->redis.size());
  for (const nlohmann::json& phase : json["phases"]) {
    for (const char* key : {"system", "variant", "op", "calls", "keys", "bytes", "failed_keys",
                            "seconds", "gb_per_s", "keys_per_s", "error", "latency_us"}) {
      EXPECT_TRUE(phase.contains(key)) << key << " in " << phase.dump();
    }
    if (phase["system"] == "socket") {
      EXPECT_EQ(phase["op"], "stream");
      EXPECT_TRUE(phase["latency_us"].is_null());
    } else {
      for (const char* key : {"p50", "p99", "p999", "max", "mean"}) {
        EXPECT_TRUE(phase["latency_us"][key].is_number()) << key;
      }
    }
  }
}

// Both transports on the embedded node: the shared-memory phases are compared with a memcpy
// of the same bytes, measured in the same run.
// --inflight: each thread starts that many calls on key sets of its own, then waits for them;
// a phase's call is the group, and every key of every set is written and read back verified.
TEST(BenchRunTest, InflightCallsRunAsGroupsOnKeySetsOfTheirOwn) {
  BenchOptions o = TinyBench();
  o.transport = TransportChoice::kTcp;
  o.socket_baseline = false;
  o.inflight = 4;
  Result<BenchReport> r = RunBench(o, [](std::string_view) {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->kvport.size(), 3u);
  for (const PhaseResult& p : r->kvport) {
    SCOPED_TRACE(std::string(OpName(p.op)));
    EXPECT_TRUE(p.error.empty()) << p.error;
    EXPECT_EQ(p.failed_keys, 0u);
    if (p.op == Op::kExists) {
      EXPECT_EQ(p.calls, o.exists_count);
      EXPECT_EQ(p.keys, o.exists_count * o.exists_batch * 4);
    } else {
      EXPECT_EQ(p.calls, o.count);
      EXPECT_EQ(p.keys, o.count * o.batch * 4);
      EXPECT_EQ(p.bytes, p.keys * o.value_bytes);
    }
  }
  const nlohmann::json json = nlohmann::json::parse(FormatBenchJson(*r));
  EXPECT_EQ(json["options"]["inflight"], 4);
  EXPECT_NE(FormatBenchText(*r).find("4 kvport calls in flight"), std::string::npos);

  o.inflight = 0;
  EXPECT_EQ(RunBench(o, [](std::string_view) {}).status().code(), StatusCode::kInvalidArgument);
  o.inflight = 65;
  EXPECT_EQ(RunBench(o, [](std::string_view) {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(BenchRunTest, EmbeddedNodeOverTcpAndSharedMemory) {
  if (!EmbeddedNodeOffersShm()) GTEST_SKIP() << "this build's server has no shared memory";
  BenchOptions o = TinyBench();
  o.transport = TransportChoice::kAuto;  // both, since the node offers shared memory
  Result<BenchReport> r = RunBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->transports, (std::vector<Transport>{Transport::kTcp, Transport::kShm}));
  EXPECT_TRUE(r->transport_note.empty()) << r->transport_note;
  ASSERT_EQ(r->kvport.size(), 6u);
  for (Transport t : {Transport::kTcp, Transport::kShm}) {
    for (Op op : {Op::kPut, Op::kGet, Op::kExists}) {
      const PhaseResult* p = r->FindKvport(op, t);
      ASSERT_NE(p, nullptr) << TransportName(t) << " " << OpName(op);
      EXPECT_TRUE(p->error.empty()) << p->error;
      EXPECT_EQ(p->failed_keys, 0u);
    }
  }
  EXPECT_NE(r->node.find("unix:"), std::string::npos) << r->node;
  ASSERT_GE(r->memcpy.size(), 1u);
  ASSERT_NE(r->MemcpyLimit(), nullptr);
  EXPECT_EQ(r->MemcpyLimit()->bytes, o.count * o.batch * o.value_bytes);
  EXPECT_EQ(r->MemcpyLimit()->calls, o.count);
  EXPECT_TRUE(r->RatioToLimit(Op::kPut, Transport::kShm).has_value());
  EXPECT_TRUE(r->RatioToLimit(Op::kGet, Transport::kShm).has_value());
  EXPECT_TRUE(r->RatioToLimit(Op::kGet, Transport::kTcp).has_value());
  EXPECT_TRUE(r->AllPassed());
  const std::string text = FormatBenchText(*r);
  EXPECT_NE(text.find("kvport/memcpy"), std::string::npos) << text;
  EXPECT_NE(text.find("shm limit = memcpy into"), std::string::npos) << text;
  const nlohmann::json json = nlohmann::json::parse(FormatBenchJson(*r));
  EXPECT_EQ(json["options"]["transports"], nlohmann::json::array({"tcp", "shm"}));
  EXPECT_TRUE(json["memcpy_limit"]["gb_per_s"].is_number());
  EXPECT_TRUE(json["ratios_shm"]["put"]["vs_memcpy"].is_number());
  EXPECT_TRUE(json["ratios_shm"]["exists"]["vs_memcpy"].is_null());
  EXPECT_TRUE(json["ratios"]["put"]["vs_limit"].is_number());
}

TEST(BenchRunTest, ExistingNodeByUrlWithModelShapeAndOnlyReads) {
  ServerOptions so;
  so.capacity_bytes = 32 << 20;
  Result<std::unique_ptr<Server>> server = Server::Start(so);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  BenchOptions o = TinyBench();
  o.url = "eic://" + (*server)->address();
  ModelShape shape;
  shape.layers = 1;
  shape.kv_heads = 1;
  shape.head_dim = 64;
  shape.tokens_per_chunk = 64;  // 2 * 64 * 64 * 2 = 16 KiB
  o.shape = shape;
  o.ops = {Op::kGet};  // the keys are written untimed first
  o.socket_baseline = false;
  Result<BenchReport> r = RunBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->options.value_bytes, 16u << 10);
  ASSERT_EQ(r->kvport.size(), 1u);
  EXPECT_EQ(r->kvport[0].failed_keys, 0u);
  EXPECT_EQ(r->kvport[0].bytes, o.count * o.batch * (16u << 10));
  EXPECT_EQ(r->node, o.url);
  EXPECT_TRUE(r->AllPassed());
  EXPECT_EQ((*server)->Stats().Get("objects"), o.batch * 2);  // 2 threads' keys
  const nlohmann::json json = nlohmann::json::parse(FormatBenchJson(*r));
  EXPECT_EQ(json["options"]["url"], o.url);
  EXPECT_EQ(json["options"]["ops"], nlohmann::json::array({"get"}));
  EXPECT_EQ(json["options"]["shape"]["head_dim"], 64);
  EXPECT_EQ(json["options"]["shape"]["tokens_per_chunk"], 64);
  EXPECT_TRUE(json["options"]["shape"]["dtype"].is_string());
  EXPECT_TRUE(json["options"]["shape"].contains("layers"));
  EXPECT_TRUE(json["options"]["shape"].contains("kv_heads"));
  EXPECT_TRUE(json["limit"].is_null());  // no socket baseline
}

TEST(BenchRunTest, ReadsFromANodeMissingTheKeysFail) {
  // A node too small for one batch refuses the untimed writes: the get phase reports it and
  // the run is not a pass.
  BenchOptions o = TinyBench();
  o.transport = TransportChoice::kTcp;
  o.ops = {Op::kGet};
  o.node_capacity = 64 << 10;  // one value; a batch is four
  o.socket_baseline = false;
  Result<BenchReport> r = RunBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->kvport.size(), 1u);
  EXPECT_FALSE(r->kvport[0].error.empty());
  EXPECT_FALSE(r->AllPassed());
  EXPECT_NE(FormatBenchText(*r).find("FAILED"), std::string::npos);
}

TEST(BenchRunTest, TransportChoicesThatCannotWorkAreRefused) {
  BenchOptions o = TinyBench();
  o.url = "unix:/nonexistent/kvport.sock";
  o.transport = TransportChoice::kTcp;
  EXPECT_EQ(RunBench(o).status().code(), StatusCode::kInvalidArgument);
  o.transport = TransportChoice::kBoth;
  EXPECT_EQ(RunBench(o).status().code(), StatusCode::kInvalidArgument);
  o.transport = TransportChoice::kUcx;  // a unix: URL is shared memory, never UCX
  EXPECT_EQ(RunBench(o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseTransportChoice("both"), TransportChoice::kBoth);
  EXPECT_EQ(*ParseTransportChoice("ucx"), TransportChoice::kUcx);
  EXPECT_FALSE(ParseTransportChoice("rdma").ok());
}

// --transport ucx: the phases over UCX (its tcp here) against an embedded node with
// UCX, and ucx_perftest's put and get of the same message size as the limit, in one run.
TEST(BenchRunTest, UcxIsMeasuredAgainstUcxPerftest) {
  ::setenv("UCX_TLS", "tcp", 1);
  if (!ProcessUcxRuntime().usable()) {
    ::unsetenv("UCX_TLS");
    GTEST_SKIP() << "no usable UCX here: " << ProcessUcxRuntime().reason();
  }
  BenchOptions o = TinyBench();
  o.transport = TransportChoice::kUcx;
  Result<BenchReport> r = RunBench(o);
  ::unsetenv("UCX_TLS");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->transports, std::vector<Transport>{Transport::kUcx});
  EXPECT_NE(r->node.find("with UCX"), std::string::npos) << r->node;
  ExpectKvportPhasesPassed(*r, o);
  for (const PhaseResult& p : r->kvport)
    EXPECT_EQ(p.variant, "ucx");
  ASSERT_EQ(r->ucx_perftest.size(), 2u);
  if (r->ucx_perftest[0].error.find("ucx_perftest not found") != std::string::npos) {
    GTEST_SKIP() << r->ucx_perftest[0].error;
  }
  for (const PhaseResult& p : r->ucx_perftest) {
    EXPECT_TRUE(p.error.empty()) << p.error;
    EXPECT_NE(p.variant.find("UCX_TLS=tcp"), std::string::npos) << p.variant;
    EXPECT_EQ(p.bytes, p.calls * o.value_bytes);
    EXPECT_GT(p.gb_per_second(), 0);
  }
  EXPECT_TRUE(r->RatioToLimit(Op::kPut, Transport::kUcx).has_value());
  EXPECT_TRUE(r->RatioToLimit(Op::kGet, Transport::kUcx).has_value());
  const std::string text = FormatBenchText(*r);
  EXPECT_NE(text.find("kvport/perftest"), std::string::npos) << text;
  EXPECT_NE(FormatBenchJson(*r).find("\"vs_ucx_perftest\""), std::string::npos);
}

TEST(BenchRunTest, UcxPerftestsFinalLineIsItsBandwidth) {
  const std::string output =
      "+--------------+\n"
      "|    Stage     | # iterations | 50.0%ile | average | overall |  average |  overall |\n"
      "Final:                   200   1670.145  1670.256  1670.256      598.71     612.50"
      "         599         599\n";
  Result<double> mb = ParseUcxPerftestBandwidth(output);
  ASSERT_TRUE(mb.ok()) << mb.status().ToString();
  EXPECT_DOUBLE_EQ(*mb, 612.50);
  EXPECT_EQ(ParseUcxPerftestBandwidth("Final: 200 1.0\n").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(ParseUcxPerftestBandwidth("no such line").status().code(), StatusCode::kCorruption);
  UcxPerftestOptions missing;
  missing.program = "/nonexistent/ucx_perftest";
  EXPECT_EQ(RunUcxPerftest(Op::kPut, missing).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(RunUcxPerftest(Op::kExists, {}).status().code(), StatusCode::kInvalidArgument);
}

// --nodes 3: the same phases against one embedded node and against three as one static
// cluster, in one run, each with its ratio (over shared memory too when the node offers it).
TEST(BenchRunTest, NodesMeasuresOneNodeAndTheClusterInTheSameRun) {
  BenchOptions o = TinyBench();
  o.nodes = 3;
  o.transport = TransportChoice::kAuto;
  o.socket_baseline = false;
  Result<BenchReport> r = RunBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const size_t transports = r->transports.size();
  ASSERT_EQ(r->kvport.size(), 3 * transports);
  ASSERT_EQ(r->cluster.size(), 3 * transports);
  EXPECT_EQ(std::count(r->cluster_endpoint.begin(), r->cluster_endpoint.end(), ';'), 2)
      << r->cluster_endpoint;
  EXPECT_NE(r->node.find("embedded 127.0.0.1:"), std::string::npos) << r->node;
  EXPECT_NE(r->node.find(r->cluster_endpoint), std::string::npos) << r->node;
  for (Transport t : r->transports) {
    for (Op op : {Op::kPut, Op::kGet, Op::kExists}) {
      SCOPED_TRACE(fmt::format("{} {}", TransportName(t), OpName(op)));
      const PhaseResult* one = r->FindKvport(op, t);
      const PhaseResult* all = r->FindCluster(op, t);
      ASSERT_NE(one, nullptr);
      ASSERT_NE(all, nullptr);
      EXPECT_EQ(one->system, "kvport");
      EXPECT_EQ(all->system, "cluster");
      for (const PhaseResult* p : {one, all}) {
        EXPECT_TRUE(p->error.empty()) << p->error;
        EXPECT_EQ(p->failed_keys, 0u);
        EXPECT_EQ(p->calls, op == Op::kExists ? o.exists_count : o.count);
      }
      EXPECT_EQ(all->keys, one->keys);
      EXPECT_EQ(all->bytes, one->bytes);
      EXPECT_TRUE(r->RatioClusterToNode(op, t).has_value());
    }
  }
  EXPECT_TRUE(r->AllPassed());

  const std::string text = FormatBenchText(*r);
  EXPECT_NE(text.find("cluster of 3 nodes over one node alone"), std::string::npos) << text;
  EXPECT_NE(text.find("cluster put"), std::string::npos) << text;
  EXPECT_NE(text.find("kvport  put"), std::string::npos) << text;
  size_t ratio_lines = 0;
  for (size_t at = text.find("cluster/node"); at != std::string::npos;
       at = text.find("cluster/node", at + 1))
    ++ratio_lines;
  EXPECT_EQ(ratio_lines, 3 * transports) << text;

  const nlohmann::json json = nlohmann::json::parse(FormatBenchJson(*r));
  EXPECT_EQ(json["options"]["nodes"], 3);
  EXPECT_EQ(json["cluster"]["nodes"], 3);
  EXPECT_EQ(json["cluster"]["endpoint"], r->cluster_endpoint);
  for (const char* op : {"put", "get", "exists"}) {
    EXPECT_TRUE(json["cluster"]["ratios"][op]["vs_node"].is_number()) << op;
  }
  const bool shm = transports == 2;
  EXPECT_EQ(json["cluster"]["ratios_shm"].is_null(), !shm);
  if (shm) {
    EXPECT_TRUE(json["cluster"]["ratios_shm"]["get"]["vs_node"].is_number());
  }
  ASSERT_EQ(json["phases"].size(), r->kvport.size() + r->cluster.size() + r->memcpy.size());
  size_t cluster_phases = 0;
  for (const nlohmann::json& phase : json["phases"])
    cluster_phases += phase["system"] == "cluster" ? 1 : 0;
  EXPECT_EQ(cluster_phases, r->cluster.size());
  EXPECT_EQ(json["passed"], true);
}

// One node: no cluster rows, no cluster object.
TEST(BenchRunTest, OneNodeReportsNoCluster) {
  BenchOptions o = TinyBench();
  o.transport = TransportChoice::kTcp;
  o.socket_baseline = false;
  o.ops = {Op::kPut};
  Result<BenchReport> r = RunBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->cluster.empty());
  EXPECT_TRUE(r->cluster_endpoint.empty());
  EXPECT_FALSE(r->RatioClusterToNode(Op::kPut).has_value());
  EXPECT_EQ(FormatBenchText(*r).find("cluster/node"), std::string::npos);
  const nlohmann::json json = nlohmann::json::parse(FormatBenchJson(*r));
  EXPECT_TRUE(json["cluster"].is_null());
  EXPECT_EQ(json["options"]["nodes"], 1);
}

// --url with a static cluster ("a;b"): the bench runs against it, its keys spread over both
// nodes, and the report names the endpoint and the nodes it resolved to.
TEST(BenchRunTest, ExistingStaticClusterByUrl) {
  std::vector<std::unique_ptr<Server>> servers;
  std::string url;
  for (int i = 0; i < 2; ++i) {
    ServerOptions so;
    so.capacity_bytes = 32 << 20;
    so.threads = 1;
    Result<std::unique_ptr<Server>> server = Server::Start(so);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    url += (url.empty() ? "" : ";") + (*server)->address();
    servers.push_back(std::move(server).value());
  }
  BenchOptions o = TinyBench();
  o.url = url;
  o.batch = 16;  // 32 keys: all on one of two nodes has odds of 2^-31
  o.value_bytes = 16 << 10;
  o.socket_baseline = false;
  Result<BenchReport> r = RunBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->kvport.size(), 3u);
  for (const PhaseResult& p : r->kvport) {
    EXPECT_TRUE(p.error.empty()) << p.error;
    EXPECT_EQ(p.failed_keys, 0u);
  }
  EXPECT_TRUE(r->cluster.empty());  // the URL's cluster is the one measured
  EXPECT_NE(r->node.find(url), std::string::npos) << r->node;
  EXPECT_NE(r->node.find("a cluster of 2 nodes"), std::string::npos) << r->node;
  const uint64_t a = servers[0]->Stats().Get("objects");
  const uint64_t b = servers[1]->Stats().Get("objects");
  EXPECT_EQ(a + b, 2 * o.batch);  // 2 threads' keys, each on one node
  EXPECT_GT(a, 0u);
  EXPECT_GT(b, 0u);
  const nlohmann::json json = nlohmann::json::parse(FormatBenchJson(*r));
  EXPECT_EQ(json["options"]["url"], url);
  EXPECT_TRUE(json["cluster"].is_null());
}

// A tiny matrix: every row runs put and get over each transport, each with its limit.
TEST(BenchMatrixTest, EveryRowHasItsPhasesAndItsLimit) {
  MatrixOptions m;
  m.value_sizes = {16 << 10, 64 << 10};
  m.batches = {1, 4};
  m.connections = {1, 2};
  m.count = 4;
  m.phase_bytes = 4 << 20;  // the socket limits' volume
  m.max_seconds = 120;
  Result<MatrixReport> r = RunMatrix(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const size_t transports = r->transports.size();
  ASSERT_EQ(r->rows.size(), 2u * 2u * 2u * transports);
  EXPECT_EQ(r->rows.front().value_bytes, 64u << 10);  // largest first
  EXPECT_EQ(r->rows.front().batch, 4u);
  EXPECT_EQ(r->rows.front().connections, 2);
  for (const MatrixRow& row : r->rows) {
    SCOPED_TRACE(fmt::format("{} x{} x{} {}", row.value_bytes, row.batch, row.connections,
                             TransportName(row.transport)));
    EXPECT_TRUE(row.Passed()) << row.put.error << row.get.error;
    EXPECT_EQ(row.put.calls, 4u);
    EXPECT_EQ(row.get.calls, 4u);
    EXPECT_EQ(row.get.bytes, 4u * row.batch * row.value_bytes);
    EXPECT_EQ(row.limit.system, row.transport == Transport::kTcp ? "socket" : "memcpy");
    if (row.transport == Transport::kTcp) {
      EXPECT_EQ(row.socket_blocking.system, "socket");
      EXPECT_LE(row.socket_blocking.gb_per_second(), row.limit.gb_per_second());
    } else {
      EXPECT_EQ(row.memcpy_buffers.variant, "buffers");
    }
    EXPECT_TRUE(row.RatioToLimit(Op::kPut).has_value());
    EXPECT_TRUE(row.RatioToLimit(Op::kGet).has_value());
    // The round-trip limit of the row's shape: a call's value bytes, measured or composed.
    EXPECT_EQ(row.round_trip_put.system, "round trip");
    EXPECT_EQ(row.round_trip_get.system, "round trip");
    EXPECT_TRUE(row.RatioToRoundTrip(Op::kPut).has_value()) << row.round_trip_put.error;
    EXPECT_TRUE(row.RatioToRoundTrip(Op::kGet).has_value()) << row.round_trip_get.error;
    if (row.transport == Transport::kTcp) {
      EXPECT_EQ(row.round_trip_get.bytes, row.round_trip_get.calls * row.batch * row.value_bytes);
    } else {
      EXPECT_NE(row.round_trip_put.variant.find("unix"), std::string::npos);
    }
  }
  EXPECT_TRUE(r->AllPassed());
  // Two connection counts x one write size (calls of 16-256 KiB all write 1 MiB): 2 x 3 modes.
  EXPECT_EQ(r->socket.size(), 6u);
  const std::string text = FormatMatrixText(*r);
  EXPECT_NE(text.find("put/limit"), std::string::npos) << text;
  const nlohmann::json json = nlohmann::json::parse(FormatMatrixJson(*r));
  EXPECT_EQ(json["rows"].size(), r->rows.size());
  EXPECT_TRUE(json["rows"][0]["put_vs_limit"].is_number());
  EXPECT_TRUE(json["rows"][0]["get_vs_round_trip"].is_number());
  EXPECT_NE(text.find("put/rt"), std::string::npos) << text;
  EXPECT_EQ(json["passed"], true);
}

TEST(SocketBaselineTest, EveryModeMovesExactlyTheVolume) {
  SocketBaselineOptions so;
  so.bytes = (3 << 20) + 5;  // not a multiple of the streams or the write size
  so.streams = 2;
  so.write_bytes = 1 << 20;
  so.max_seconds = 120;
  Result<std::vector<PhaseResult>> r = MeasureSocketLimit(so);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].variant, "blocking");
  EXPECT_EQ((*r)[1].variant, "busy-poll");
  EXPECT_EQ((*r)[2].variant, "busy-poll-1t");
  for (const PhaseResult& p : *r) {
    EXPECT_EQ(p.bytes, so.bytes) << p.variant;
    EXPECT_GT(p.calls, 0u);
    EXPECT_GT(p.seconds, 0);
  }
}

// Each mode makes exactly the calls asked for, each a whole request and a whole response (a
// response larger than the 8 MiB pieces the ends move included), over TCP and a Unix socket.
TEST(RoundTripBaselineTest, EveryModeCompletesEveryCallWithItsWholeMessages) {
  for (const RoundTripSocket socket : {RoundTripSocket::kTcp, RoundTripSocket::kUnix}) {
    RoundTripOptions rt;
    rt.socket = socket;
    rt.connections = 2;
    rt.request_bytes = 100;
    rt.response_bytes = (9 << 20) + 3;
    rt.value_bytes = 9 << 20;
    rt.calls = 6;
    rt.max_seconds = 120;
    Result<std::vector<PhaseResult>> r = MeasureRoundTripLimit(rt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->size(), 2u);
    for (const PhaseResult& p : *r) {
      EXPECT_EQ(p.system, "round trip");
      EXPECT_EQ(p.calls, 6u) << p.variant;
      EXPECT_EQ(p.bytes, 6u * rt.value_bytes) << p.variant;
      EXPECT_EQ(p.latency.count(), 6u) << p.variant;
    }
    // The faster mode comes first.
    EXPECT_GE((*r)[0].calls / (*r)[0].seconds, (*r)[1].calls / (*r)[1].seconds);
  }
}

// A shared-memory call's limit adds a connection's share of the control round trips' time to
// its copy: 2 connections doing 1000 round trips in 0.01 s (20 us each) and copying at 10 GB/s
// together (5 each), 1 MB values: per call 20 us + 200 us, so 2 MB per 220 us.
TEST(RoundTripBaselineTest, AShmCallIsAControlRoundTripPlusACopy) {
  PhaseResult control;
  control.variant = "busy-poll";
  control.calls = 1000;
  control.seconds = 0.01;
  PhaseResult copy;
  copy.variant = "pool";
  copy.bytes = 10'000'000'000;
  copy.seconds = 1;
  const PhaseResult limit = ShmCallLimit(control, copy, 1'000'000, 2);
  EXPECT_TRUE(limit.error.empty());
  EXPECT_NEAR(limit.gb_per_second(), 2e6 / 220e-6 / 1e9, 1e-9);
  EXPECT_EQ(limit.variant, "unix busy-poll + memcpy pool");
  PhaseResult none;
  EXPECT_FALSE(ShmCallLimit(none, copy, 1, 1).error.empty());
}

}  // namespace
}  // namespace kvport::bench
