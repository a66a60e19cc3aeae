// SPDX-License-Identifier: Apache-2.0
// RunDemo: `kvport demo`, an LLM-serving-shaped run of the cache through the eic:// connector.
//
// Each request of a ConversationWorkload is "prefilled" the way LMCache does it: Lookup the
// cached prefix, Retrieve it (checking every byte against the chunk hash), "compute" the rest
// (FillChunkPayload) and Store the new chunks. The node is embedded in this process on an
// ephemeral loopback port (and a Unix socket, so the connector's automatic transport choice
// finds shared memory) unless a URL names one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench/latency_histogram.h"
#include "bench/model_shape.h"
#include "demo/workload.h"
#include "kvport/status.h"

namespace kvport::demo {

struct DemoOptions {
  // eic://HOST:PORT[/NS] of an existing node; empty embeds one.
  std::string url;
  // Llama-3-8B's KV heads, head dim and dtype, with 4 of its 32 layers by default (4 MiB
  // chunks instead of 32 MiB), so the default run moves a few GiB, not tens of GiB.
  bench::ModelShape shape = DefaultShape();
  std::string model_name = "meta-llama/Meta-Llama-3-8B";
  int requests = 200;
  WorkloadOptions workload;
  // The embedded node's capacity (smaller than what the run stores: old conversations are
  // evicted, as on a real node).
  uint64_t capacity_bytes = uint64_t{512} << 20;
  // The embedded node's Unix socket (ServerOptions::unix_socket): "auto" by default, so a
  // same-host client maps its arena; "" for TCP only. Should "auto" fail, the node runs without.
  std::string unix_socket = "auto";
  // The CacheEngine's local CPU tier in front of the node; 0 = none (every hit is remote).
  uint64_t local_cpu_bytes = 0;
  std::string ns = "demo";

  static bench::ModelShape DefaultShape() {
    bench::ModelShape s;
    s.layers = 4;
    return s;
  }
};

// What the run did; counts are totals over all requests.
struct DemoReport {
  std::string node;  // where the node was
  // The connector's data path ("shared memory", "TCP", ...) and why it is that one.
  std::string transport;
  std::string transport_reason;
  bench::ModelShape shape;
  uint64_t chunk_bytes = 0;

  uint64_t requests = 0;
  uint64_t tokens = 0;             // prompt tokens over all requests
  uint64_t lookup_hit_tokens = 0;  // what Lookup said was cached
  uint64_t hit_tokens = 0;         // cached tokens actually retrieved and verified
  uint64_t computed_tokens = 0;    // tokens - hit_tokens: "prefilled" by the demo

  uint64_t chunks_read = 0;      // chunks Retrieve returned
  uint64_t chunks_verified = 0;  // of those, chunks whose metadata and bytes were right
  uint64_t bytes_read = 0;       // payload bytes of the chunks read
  uint64_t chunks_written = 0;   // chunks the node accepted
  uint64_t bytes_written = 0;
  uint64_t store_failures = 0;              // chunks a Store refused (e.g. the node was full)
  uint64_t lookup_retrieve_mismatches = 0;  // Retrieve found fewer chunks than Lookup counted

  double seconds = 0;                              // the whole run, "compute" included
  double cache_seconds = 0;                        // inside Lookup, Retrieve and Store
  bench::LatencyHistogram lookup_latency;          // per Lookup call
  bench::LatencyHistogram retrieve_chunk_latency;  // per chunk: call time / chunks in the call
  bench::LatencyHistogram store_chunk_latency;     // per chunk, likewise

  // The embedded node's counters at the end (empty with --url).
  std::vector<std::pair<std::string, uint64_t>> node_counters;
  std::string first_failure;  // the first verification failure, described

  uint64_t verify_failures() const { return chunks_read - chunks_verified; }
  double hit_rate() const { return tokens == 0 ? 0 : static_cast<double>(hit_tokens) / tokens; }
};

struct DemoProgress {
  int done = 0;
  int total = 0;
  uint64_t tokens = 0;
  uint64_t hit_tokens = 0;
  uint64_t bytes_moved = 0;
  double seconds = 0;
};

// Called after every request.
using DemoProgressFn = std::function<void(const DemoProgress&)>;

// Errors: bad options (InvalidArgument), the node not starting or unreachable, a cache call
// failing as a whole. Verification failures do not stop the run: they are counted.
Result<DemoReport> RunDemo(const DemoOptions& options, const DemoProgressFn& progress = {});

}  // namespace kvport::demo
