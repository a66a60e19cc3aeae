// SPDX-License-Identifier: Apache-2.0
// RunMatrix: the measurement of `kvport bench` over a grid of shapes (value size x batch x
// connections x transport), each row with its limits from the same run (the streaming limit, and
// the round trip of a call of its shape), bounded in time per row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/bench_log.h"
#include "bench/bench_options.h"
#include "bench/phase_result.h"
#include "kvport/status.h"

namespace kvport::bench {

struct MatrixOptions {
  std::vector<uint64_t> value_sizes = {uint64_t{64} << 10, uint64_t{1} << 20, uint64_t{4} << 20,
                                       uint64_t{32} << 20};
  std::vector<size_t> batches = {1, 16};
  std::vector<int> connections = {1, 4};  // one calling thread per connection
  TransportChoice transport = TransportChoice::kAuto;
  // Calls per put/get phase: `count` when set, else enough calls to move about `phase_bytes`
  // (at least 8, at most 20000); every phase stops at `max_seconds` anyway.
  std::optional<uint64_t> count;
  uint64_t phase_bytes = uint64_t{1} << 30;
  double max_seconds = 2;
  unsigned node_threads = 0;  // embedded node I/O threads (0: one per CPU)
  // Client and embedded node busy poll this long (BenchOptions::busy_poll_us); the round-trip
  // limit is the faster of its blocking and busy-poll modes either way.
  int64_t busy_poll_us = 0;
  bool socket_baseline = true;
  std::string ns = "bench";
  // Python-driven peers (bench/peer_driver.h) at every shape, beside the shape's TCP row.
  std::vector<std::string> python_peers;
  std::string peers_dir;

  // The calls of a row's phases.
  uint64_t calls_for(uint64_t value_bytes, size_t batch) const;
  Status Validate() const;
};

struct MatrixRow {
  uint64_t value_bytes = 0;
  size_t batch = 0;
  int connections = 0;
  Transport transport = Transport::kTcp;
  PhaseResult put;
  PhaseResult get;
  // The row's limit: the fastest socket mode with its connections as streams and writes of one
  // call's bytes (1-8 MiB) (TCP), the faster memcpy of its batch on as many threads (shm), or
  // ucx_perftest's ucp_put_bw of its value size (UCX; `limit_get` then holds its ucp_get, the
  // get's limit). Empty system when it was not measured.
  PhaseResult limit;
  PhaseResult limit_get;
  // shm rows: the memcpy into the same buffers every call (for information: cache-warm for
  // small batches, so faster than any copy into an arena larger than the caches).
  PhaseResult memcpy_buffers;
  // tcp rows: the blocking socket mode (for information when a busy-polling mode is the limit).
  PhaseResult socket_blocking;
  // The row's round-trip limits (round_trip_baseline.h), what a call of its shape costs when,
  // like a kvport call, it is a request and a response one at a time per connection: tcp rows,
  // a put's request (its values) and answer, and a get's, on bare loopback sockets, the faster
  // of blocking and busy-poll; shm rows, a small control round trip on a Unix socket plus one
  // copy of the batch at the row's memcpy limit. Empty system when not measured.
  PhaseResult round_trip_put;
  PhaseResult round_trip_get;
  // tcp rows, with MatrixOptions::python_peers: each peer at the same shape, in that order.
  struct Peer {
    std::string system;
    PhaseResult put;
    PhaseResult get;
  };
  std::vector<Peer> peers;

  std::optional<double> RatioToLimit(Op op) const;
  std::optional<double> RatioToRoundTrip(Op op) const;
  // kvport over peer `system` (GB/s); nullopt when it was not measured or failed.
  std::optional<double> RatioToPeer(std::string_view system, Op op) const;
  bool Passed() const;
};

struct MatrixReport {
  MatrixOptions options;
  std::string node;
  std::vector<Transport> transports;
  std::string transport_note;
  std::vector<MatrixRow> rows;           // in the order run: largest values first
  std::vector<PhaseResult> socket;       // every socket measurement (variant: "mode, N streams, W")
  std::vector<PhaseResult> round_trips;  // every round-trip measurement (variant: its shape)
  std::string socket_skipped;
  // Python-driven peers asked for that could not run at all: (system, why).
  std::vector<std::pair<std::string, std::string>> peers_skipped;
  double seconds = 0;  // the whole matrix, wall time

  bool AllPassed() const;
};

// Runs every row on one embedded node (sized for the largest row, warmed once; each
// shared-memory client's mapping warmed once), then the socket limits. Errors as RunBench's.
Result<MatrixReport> RunMatrix(const MatrixOptions& options, const BenchLog& log = {});

}  // namespace kvport::bench
