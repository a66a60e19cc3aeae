// SPDX-License-Identifier: Apache-2.0
#include "bench/bench_limits.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/bench_node.h"
#include "bench/round_trip_baseline.h"
#include "bench/ucx_perftest_baseline.h"
#include "kvport/size.h"

namespace kvport::bench {
namespace {

// Bytes of a call's frame besides its values: header and descriptor, about (the round trip's
// cost hardly depends on them).
constexpr uint64_t kFrameOverhead = 64;

}  // namespace

PhaseResult UcxPerftestLimit(Op op, uint64_t value_bytes, uint64_t messages, double max_seconds) {
  UcxPerftestOptions o;
  o.message_bytes = value_bytes;
  o.messages = messages;
  o.max_seconds = std::max(30.0, 4 * max_seconds);
  Result<PhaseResult> r = RunUcxPerftest(op, o);
  if (r.ok()) return *r;
  PhaseResult failed;
  failed.system = "ucx_perftest";
  failed.op = op;
  failed.error = r.status().ToString();
  return failed;
}

SocketBaselineOptions SocketOptionsFor(uint64_t bytes, int streams, uint64_t call_bytes,
                                       double max_seconds) {
  SocketBaselineOptions so;
  so.bytes = bytes;
  so.streams = streams;
  so.write_bytes = std::clamp<uint64_t>(call_bytes, uint64_t{1} << 20, uint64_t{8} << 20);
  so.max_seconds = max_seconds;
  return so;
}

void RunSocket(const BenchOptions& options, BenchReport* report, const BenchLog& log) {
  // The same byte volume as the largest kvport TCP put or get phase (what the ratio compares),
  // or what the options ask for when kvport moved nothing.
  uint64_t bytes = 0;
  for (const PhaseResult& p : report->kvport) {
    if (p.op != Op::kExists && p.variant == TransportName(Transport::kTcp)) {
      bytes = std::max(bytes, p.bytes);
    }
  }
  if (bytes == 0) bytes = options.count * options.batch * options.value_bytes;
  const SocketBaselineOptions so = SocketOptionsFor(
      bytes, options.connections, options.batch * options.value_bytes, options.max_seconds);
  Note(log, fmt::format("socket: {} over {} loopback streams, three ways", FormatSize(bytes),
                        so.streams));
  Result<std::vector<PhaseResult>> r = MeasureSocketLimit(so);
  if (r.ok()) {
    report->socket = std::move(*r);
  } else {
    report->socket_skipped = r.status().ToString();
  }
}

void MeasureSocketLimits(const MatrixOptions& options, const BenchLog& log, MatrixReport* report) {
  if (Has(report->transports, Transport::kTcp)) {
    if (!options.socket_baseline) {
      report->socket_skipped = "not asked for (--no-socket)";
    } else {
      std::map<std::pair<int, uint64_t>, PhaseResult> best, blocking;
      for (MatrixRow& row : report->rows) {
        if (row.transport != Transport::kTcp) continue;
        const SocketBaselineOptions so = SocketOptionsFor(
            options.phase_bytes, row.connections, row.batch * row.value_bytes, options.max_seconds);
        const auto key = std::make_pair(so.streams, so.write_bytes);
        if (!best.contains(key) && report->socket_skipped.empty()) {
          Note(log, fmt::format("matrix: socket limit, {} stream(s), {} writes", so.streams,
                                FormatSize(so.write_bytes)));
          Result<std::vector<PhaseResult>> r = MeasureSocketLimit(so);
          if (!r.ok()) {
            report->socket_skipped = r.status().ToString();
            continue;
          }
          PhaseResult fastest;
          for (PhaseResult& p : *r) {
            const bool is_blocking = p.variant == SocketModeName(SocketMode::kBlocking);
            p.variant = fmt::format("{}, {} stream(s), {} writes", p.variant, so.streams,
                                    FormatSize(so.write_bytes));
            if (fastest.system.empty() || p.gb_per_second() > fastest.gb_per_second()) {
              fastest = p;
            }
            if (is_blocking) blocking[key] = p;
            report->socket.push_back(std::move(p));
          }
          best[key] = fastest;
        }
        if (auto it = best.find(key); it != best.end()) row.limit = it->second;
        if (auto it = blocking.find(key); it != blocking.end()) row.socket_blocking = it->second;
      }
    }
  }
}

void MeasureRoundTrips(const MatrixOptions& options, const BenchLog& log, MatrixReport* report) {
  using Key = std::tuple<RoundTripSocket, int, uint64_t, uint64_t>;
  std::map<Key, PhaseResult> fastest;
  auto measure = [&](RoundTripSocket socket, int connections, uint64_t request, uint64_t response,
                     uint64_t value_bytes, uint64_t calls) -> PhaseResult {
    const Key key{socket, connections, request, response};
    if (auto it = fastest.find(key); it != fastest.end()) return it->second;
    RoundTripOptions rt;
    rt.socket = socket;
    rt.connections = connections;
    rt.request_bytes = request;
    rt.response_bytes = response;
    rt.value_bytes = value_bytes;
    rt.calls = calls;
    rt.max_seconds = options.max_seconds;
    const std::string shape = fmt::format("{} x{} conn, {} request, {} response",
                                          socket == RoundTripSocket::kTcp ? "tcp" : "unix",
                                          connections, FormatSize(request), FormatSize(response));
    Note(log, "matrix: round trip, " + shape);
    Result<std::vector<PhaseResult>> r = MeasureRoundTripLimit(rt);
    PhaseResult best;
    if (!r.ok()) {
      best.system = "round trip";
      best.error = r.status().ToString();
    } else {
      for (PhaseResult& p : *r) {
        p.variant = fmt::format("{}, {}", p.variant, shape);
        report->round_trips.push_back(p);
      }
      best = r->front();  // the faster mode
    }
    fastest[key] = best;
    return best;
  };
  for (MatrixRow& row : report->rows) {
    const uint64_t values = row.batch * row.value_bytes;
    const uint64_t calls = options.calls_for(row.value_bytes, row.batch);
    if (row.transport == Transport::kTcp) {
      row.round_trip_put = measure(RoundTripSocket::kTcp, row.connections, values + kFrameOverhead,
                                   kFrameOverhead, values, calls);
      row.round_trip_get = measure(RoundTripSocket::kTcp, row.connections, kFrameOverhead,
                                   values + kFrameOverhead, values, calls);
    } else if (!row.limit.system.empty()) {
      const PhaseResult control = measure(RoundTripSocket::kUnix, row.connections, kFrameOverhead,
                                          kFrameOverhead, 0, calls);
      row.round_trip_put = ShmCallLimit(control, row.limit, values, row.connections);
      row.round_trip_get = row.round_trip_put;
    }
  }
}

}  // namespace kvport::bench
