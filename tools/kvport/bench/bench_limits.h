// SPDX-License-Identifier: Apache-2.0
// The limits kvport's phases are measured against, for one run's shape (RunBench) or each
// matrix row's (RunMatrix): the loopback socket, ucx_perftest and the round trip of one call.
// (The memcpy limit is RunMemcpyBaseline's, socket_baseline.h.)
#pragma once

#include <cstdint>

#include "bench/bench_log.h"
#include "bench/bench_matrix.h"
#include "bench/bench_options.h"
#include "bench/bench_run.h"
#include "bench/phase_result.h"
#include "bench/socket_baseline.h"

namespace kvport::bench {

// ucx_perftest's `op` with messages of `value_bytes` (system "ucx_perftest" either way: a run
// that failed carries why in its error).
PhaseResult UcxPerftestLimit(Op op, uint64_t value_bytes, uint64_t messages, double max_seconds);

// The socket baseline for a shape: `streams` streams, each write the bytes of one batched call
// (what the client hands the kernel in one sendmsg), within 1-8 MiB. Writes of the call's size,
// not of one value: with 1 MiB buffers, busy-poll-1t copies between two buffers that stay in
// one core's L2 cache and runs up to twice as fast as with 4 MiB ones (docs/performance.md),
// which no client and node exchanging batches of values can do.
SocketBaselineOptions SocketOptionsFor(uint64_t bytes, int streams, uint64_t call_bytes,
                                       double max_seconds);

// RunBench's TCP limit: every socket mode over the same byte volume as its kvport phases, into
// report->socket (or why not, into report->socket_skipped).
void RunSocket(const BenchOptions& options, BenchReport* report, const BenchLog& log);

// The matrix's TCP limits: for each connection count and write size, the fastest socket mode,
// in each TCP row's `limit` (and the blocking mode in its `socket_blocking`).
void MeasureSocketLimits(const MatrixOptions& options, const BenchLog& log, MatrixReport* report);

// Fills every row's round-trip limits (see MatrixRow), each shape measured once.
void MeasureRoundTrips(const MatrixOptions& options, const BenchLog& log, MatrixReport* report);

}  // namespace kvport::bench
