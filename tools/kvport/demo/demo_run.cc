// SPDX-License-Identifier: Apache-2.0
#include "demo/demo_run.h"

#include <fmt/core.h>

#include <chrono>
#include <memory>

#include "demo/chunk_payload.h"
#include "kvport/cache_engine.h"
#include "kvport/connector.h"
#include "kvport/log.h"
#include "kvport/remote_metadata.h"
#include "kvport/server.h"
#include "kvport/size.h"

namespace kvport::demo {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t Nanos(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

// The dtype as LMCache's metadata codes it and as its keys name it.
struct DtypeCodes {
  MetadataDtype meta;
  KeyDtype key;
};

Result<DtypeCodes> CodesOf(std::string_view dtype) {
  if (dtype == "bf16" || dtype == "bfloat16") {
    return DtypeCodes{MetadataDtype::kBfloat16, KeyDtype::kBfloat16};
  }
  if (dtype == "fp16" || dtype == "float16" || dtype == "half") {
    return DtypeCodes{MetadataDtype::kFloat16, KeyDtype::kHalf};
  }
  if (dtype == "fp32" || dtype == "float32" || dtype == "float") {
    return DtypeCodes{MetadataDtype::kFloat32, KeyDtype::kFloat};
  }
  if (dtype == "fp8" || dtype == "fp8_e4m3fn") {
    return DtypeCodes{MetadataDtype::kFp8E4m3fn, KeyDtype::kFp8E4m3fn};
  }
  if (dtype == "fp8_e5m2") return DtypeCodes{MetadataDtype::kFp8E5m2, KeyDtype::kFp8E5m2};
  return Status::InvalidArgument(fmt::format(
      "demo: dtype '{}' is not a KV-cache dtype: use bf16, fp16, fp32, fp8 or fp8_e5m2", dtype));
}

// Everything one run holds: the node (when embedded), the connector and the engine.
struct Setup {
  std::unique_ptr<Server> server;
  std::unique_ptr<RemoteConnector> connector;
  std::unique_ptr<CacheEngine> engine;
  RemoteMetadata meta;  // every full chunk's metadata: KV_2LTD [2, layers, tokens, hidden]
  uint64_t chunk_bytes = 0;
};

Result<Setup> Prepare(const DemoOptions& o, DemoReport* report) {
  Setup s;
  KVPORT_ASSIGN_OR_RETURN(s.chunk_bytes, bench::ChunkBytes(o.shape));
  KVPORT_ASSIGN_OR_RETURN(DtypeCodes codes, CodesOf(o.shape.dtype));
  KVPORT_ASSIGN_OR_RETURN(
      s.meta, RemoteMetadata::ForGroups(MemoryFormat::kKv2LTD,
                                        {MetadataGroup{codes.meta,
                                                       {2, o.shape.layers, o.shape.tokens_per_chunk,
                                                        static_cast<int32_t>(o.shape.hidden())}}}));
  if (o.requests < 1) return Status::InvalidArgument("demo: --requests must be at least 1");

  std::string url = o.url;
  if (url.empty()) {
    ServerOptions so;
    so.capacity_bytes = o.capacity_bytes;
    so.max_value_bytes = std::max(so.max_value_bytes, s.chunk_bytes);
    if (so.capacity_bytes < s.chunk_bytes) {
      return Status::InvalidArgument(fmt::format(
          "demo: --capacity {} is smaller than one chunk ({} for {})",
          FormatSize(so.capacity_bytes), FormatSize(s.chunk_bytes), o.shape.ToString()));
    }
    so.max_value_bytes = std::min(so.max_value_bytes, so.capacity_bytes);
    so.unix_socket = o.unix_socket;
    Result<std::unique_ptr<Server>> started = Server::Start(so);
    if (!started.ok() && so.unix_socket == "auto") {
      // The socket is what shared memory needs, not what the demo needs: run over TCP.
      const Status why = started.status();
      so.unix_socket.clear();
      started = Server::Start(so);
      if (started.ok()) log::Warn("demo: the embedded node has no Unix socket: {}", why.ToString());
    }
    if (!started.ok()) return started.status().WithContext("demo: starting the embedded node");
    s.server = std::move(*started);
    url = "eic://" + s.server->address();
    const std::string unix_path = s.server->unix_socket_path();
    report->node = fmt::format("embedded node {}{} (capacity {})", s.server->address(),
                               unix_path.empty() ? std::string() : " and unix:" + unix_path,
                               FormatSize(so.capacity_bytes));
  } else {
    report->node = o.url;
  }
  ConnectorOptions co;  // eic_trans_type 0: shared memory with a node on this host, else TCP
  co.ns = o.ns;
  co.timeout_secs = 60;
  co.expected_chunk_bytes = s.chunk_bytes;
  KVPORT_ASSIGN_OR_RETURN(s.connector, CreateConnector(url, co));
  report->transport = s.connector->Transport();
  report->transport_reason = s.connector->TransportReason();

  CacheEngineOptions eo;
  eo.model_name = o.model_name;
  eo.dtype = codes.key;
  eo.chunking.chunk_size = static_cast<uint32_t>(o.shape.tokens_per_chunk);
  eo.chunking.save_unfull_chunk = false;
  eo.local_cpu_bytes = o.local_cpu_bytes;
  KVPORT_ASSIGN_OR_RETURN(s.engine, CacheEngine::Create(eo, s.connector.get()));
  return s;
}

// One request: look up, retrieve and verify the cached prefix, compute and store the rest.
Status Prefill(const Request& request, Setup& s, std::vector<std::vector<uint8_t>>& scratch,
               DemoReport* r) {
  CacheEngine& engine = *s.engine;
  const std::vector<TokenChunk> chunks = engine.Chunks(request.tokens);
  r->tokens += request.tokens.size();

  const Clock::time_point t0 = Clock::now();
  KVPORT_ASSIGN_OR_RETURN(size_t lookup_tokens, engine.Lookup(request.tokens));
  const Clock::time_point t1 = Clock::now();
  KVPORT_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<const KvChunk>> cached,
                          engine.Retrieve(request.tokens));
  const Clock::time_point t2 = Clock::now();
  r->lookup_latency.Record(Nanos(t1 - t0));
  r->lookup_hit_tokens += lookup_tokens;

  // Retrieve may see less than Lookup did (a chunk evicted in between), never more chunks than
  // the prompt has.
  size_t hit_chunks = std::min(cached.size(), chunks.size());
  if ((hit_chunks == 0 ? 0 : chunks[hit_chunks - 1].end) < lookup_tokens) {
    ++r->lookup_retrieve_mismatches;
  }
  for (size_t i = 0; i < cached.size(); ++i) {
    ++r->chunks_read;
    r->bytes_read += cached[i]->data.size();
    r->retrieve_chunk_latency.Record(Nanos(t2 - t1) / cached.size());
    const bool ok = i < chunks.size() && cached[i]->meta == s.meta &&
                    cached[i]->data.size() == s.chunk_bytes &&
                    VerifyChunkPayload(chunks[i].hash, cached[i]->data);
    if (ok) {
      ++r->chunks_verified;
      continue;
    }
    if (r->first_failure.empty()) {
      r->first_failure = fmt::format(
          "request {} (conversation {}, turn {}): chunk {} of {} bytes (hash {}) does not hold "
          "the bytes that were stored for it",
          r->requests, request.conversation, request.turn, i, cached[i]->data.size(),
          CacheKey::HashToHex(i < chunks.size() ? chunks[i].hash : 0));
    }
    // A chunk that did not verify is not reused: it and everything after it is recomputed.
    hit_chunks = std::min(hit_chunks, i);
  }
  const uint64_t hit_tokens = hit_chunks == 0 ? 0 : chunks[hit_chunks - 1].end;
  r->hit_tokens += hit_tokens;
  r->computed_tokens += request.tokens.size() - hit_tokens;

  // "Compute" the chunks after the cached prefix: their bytes follow from their hashes.
  const size_t fresh = chunks.size() - hit_chunks;
  if (fresh == 0) return Status::Ok();
  if (scratch.size() < fresh) scratch.resize(fresh);
  std::vector<KvChunkView> views;
  for (size_t i = 0; i < fresh; ++i) {
    scratch[i].resize(s.chunk_bytes);
    FillChunkPayload(chunks[hit_chunks + i].hash, scratch[i]);
    views.push_back(KvChunkView{&s.meta, scratch[i]});
  }
  const Clock::time_point t3 = Clock::now();
  KVPORT_ASSIGN_OR_RETURN(std::vector<Status> stored,
                          engine.Store(request.tokens, hit_chunks, views));
  const Clock::time_point t4 = Clock::now();
  for (const Status& st : stored) {
    r->store_chunk_latency.Record(Nanos(t4 - t3) / stored.size());
    if (st.ok()) {
      ++r->chunks_written;
      r->bytes_written += s.chunk_bytes;
    } else {
      ++r->store_failures;
    }
  }
  r->cache_seconds += std::chrono::duration<double>((t2 - t0) + (t4 - t3)).count();
  return Status::Ok();
}

}  // namespace

Result<DemoReport> RunDemo(const DemoOptions& options, const DemoProgressFn& progress) {
  DemoReport report;
  report.shape = options.shape;
  KVPORT_ASSIGN_OR_RETURN(ConversationWorkload workload,
                          ConversationWorkload::Create(options.workload));
  KVPORT_ASSIGN_OR_RETURN(Setup setup, Prepare(options, &report));
  report.chunk_bytes = setup.chunk_bytes;

  std::vector<std::vector<uint8_t>> scratch;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < options.requests; ++i) {
    const Request request = workload.Next();
    Status st = Prefill(request, setup, scratch, &report);
    if (!st.ok()) {
      return st.WithContext(fmt::format("demo: request {} (conversation {}, turn {})", i,
                                        request.conversation, request.turn));
    }
    ++report.requests;
    report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (progress) {
      progress(DemoProgress{i + 1, options.requests, report.tokens, report.hit_tokens,
                            report.bytes_read + report.bytes_written, report.seconds});
    }
  }
  if (setup.server) report.node_counters = setup.server->Stats().counters;
  // The engine and connector go before the node they talk to.
  setup.engine.reset();
  (void)setup.connector->Close();
  setup.connector.reset();
  if (setup.server) setup.server->Stop();
  return report;
}

}  // namespace kvport::demo
