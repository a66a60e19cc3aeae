// SPDX-License-Identifier: Apache-2.0
// The node a `kvport bench` run measures (an embedded one started in-process, or one at a URL),
// the transports a run measures on it, and a client connected over exactly the transport asked
// for.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/phase_result.h"
#include "kvport/client.h"
#include "kvport/server.h"
#include "kvport/status.h"

namespace kvport::bench {

// Whether this build's embedded node can offer the shared-memory transport (the server has a
// Unix-socket listener: ServerOptions::unix_socket).
bool EmbeddedNodeOffersShm();

// The options of an embedded node (RunBench, RunMatrix, RunDiskBench): `capacity` bytes of
// memory, `threads` I/O threads (0: one per CPU), values and batches up to the bench's, no idle
// timeout. It busy polls as long as the bench's client does (--busy-poll-us): a round trip
// spins on both ends or on neither, as the round-trip limit's busy-poll mode does.
ServerOptions EmbeddedServerOptions(uint64_t capacity, unsigned threads, int64_t busy_poll_us,
                                    uint64_t max_value, uint64_t max_batch);

// The embedded node holds every thread's keys twice over (a put replaces a value only once the
// new one is in, so old and new coexist for a moment) plus room for one more batch per thread.
uint64_t EmbeddedCapacity(const BenchOptions& o);

// The transports a run measures, and why shared memory is not among them when `auto` left it out.
struct Transports {
  std::vector<Transport> list;
  std::string note;
};

// Errors: InvalidArgument for a choice the URL (or the embedded node) cannot offer.
Result<Transports> ResolveTransports(TransportChoice choice, const std::string& url);

bool Has(const std::vector<Transport>& list, Transport t);

// A node to measure: the embedded one (started here) or the one at a URL, with the endpoint
// each transport's client connects to.
struct Node {
  std::unique_ptr<Server> server;
  std::string tcp_endpoint;
  std::string shm_endpoint;
  std::string description;
};

// `want_ucx`: the node offers UCX (and, for the client's eic_trans_type 2 to take it, should not
// offer shared memory too).
Result<Node> StartEmbeddedNode(ServerOptions so, bool want_shm, bool want_ucx);

Node UrlNode(const std::string& url);

// Connects `client` over `transport`: TCP forced (transport_type 1), or shared memory or UCX
// (transport_type 2), which must then be what the client got (a silent fallback to TCP would
// measure the wrong thing).
Status InitClient(Client& client, const Node& node, Transport transport,
                  const BenchOptions& options);

// The phases of `options.ops` that could not run, each carrying `error`.
std::vector<PhaseResult> FailedPhases(const BenchOptions& options, Transport transport,
                                      const std::string& error);

}  // namespace kvport::bench
