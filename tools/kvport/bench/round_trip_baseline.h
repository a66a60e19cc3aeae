// SPDX-License-Identifier: Apache-2.0
// The round-trip limit: what one call of a row's shape costs on a bare socket when, like a
// kvport call, it is a request and a response, one call at a time per connection.
//
// The streaming socket limit (socket_baseline.h) keeps a connection's pipe full; a call that
// sends its request and waits for the answer cannot, and for small values the wait is most of
// its time. So each row is also compared with this: per connection, a client thread writes
// `request_bytes`, a server thread reads them and writes `response_bytes`, the client reads
// them, and the next call starts; `connections` pairs run at once. Nothing is parsed, copied
// or stored: only the bytes and the wake-ups a call cannot avoid.
//
// Two modes, the faster counting (as for the streaming limit): blocking sockets, and
// non-blocking ones spinning on EAGAIN (busy-poll: no sleep between request and response,
// which on a machine with fewer cores than threads may be slower). Two transports: TCP over
// loopback (the tcp rows), and a Unix socket pair carrying the small control messages of a
// shared-memory call (the shm rows: the value itself is a memcpy through the shared arena,
// whose limit RunMemcpyBaseline measures; ShmCallLimit combines the two).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "bench/phase_result.h"
#include "kvport/status.h"

namespace kvport::bench {

enum class RoundTripSocket { kTcp, kUnix };
enum class RoundTripMode { kBlocking, kBusyPoll };

std::string_view RoundTripModeName(RoundTripMode mode);

struct RoundTripOptions {
  RoundTripSocket socket = RoundTripSocket::kTcp;
  int connections = 1;
  uint64_t request_bytes = 64;
  uint64_t response_bytes = 64;
  // The value bytes one call moves, counted as the result's bytes (the request's for a put,
  // the response's for a get): GB/s comparable with kvport's.
  uint64_t value_bytes = 0;
  uint64_t calls = 1000;  // in all, over the connections
  double max_seconds = 2;
};

// One mode. The result: system "round trip", variant the mode, `calls` round trips completed,
// `bytes` their value bytes, per-call latency. IoError when a socket cannot be set up or fails.
Result<PhaseResult> RunRoundTrip(RoundTripMode mode, const RoundTripOptions& options);

// Both modes; the faster one (more calls per second) first.
Result<std::vector<PhaseResult>> MeasureRoundTripLimit(const RoundTripOptions& options);

// A shared-memory call's limit from the same run's measurements, for `connections` calling at
// once: per call, one control round trip on the Unix socket (`control`, measured with as many
// connections) plus one memcpy of the call's `value_bytes` at a connection's share of `copy`'s
// rate (measured with a thread per connection). System "round trip", variant naming both.
PhaseResult ShmCallLimit(const PhaseResult& control, const PhaseResult& copy, uint64_t value_bytes,
                         int connections);

}  // namespace kvport::bench
