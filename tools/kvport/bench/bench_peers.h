// SPDX-License-Identifier: Apache-2.0
// The peers kvport is compared with, run for one `kvport bench` run (redis-server through
// hiredis, and the Python-driven ones of peer_driver.h) or at one matrix shape (the
// Python-driven ones, beside its TCP row).
#pragma once

#include <cstdint>
#include <string>

#include "bench/bench_data.h"
#include "bench/bench_log.h"
#include "bench/bench_matrix.h"
#include "bench/bench_options.h"
#include "bench/bench_run.h"
#include "bench/peer_driver.h"

namespace kvport::bench {

// redis-server on an ephemeral loopback port, with the same keys and values as kvport's phases:
// its phases into report->redis, or why it could not run into report->redis_skipped.
void RunRedis(const BenchOptions& options, BenchData& data, BenchReport* report,
              const BenchLog& log);

// The Python-driven peer `system` ("mooncake", "lmcache-server"): a report->peers entry with its
// phases, or why it has none.
void RunPythonPeer(const std::string& system, const BenchOptions& options, BenchReport* report,
                   const BenchLog& log);

// `driver`'s peer at the shape of `o`, with a store of `store_bytes` (what the shape needs), its
// pages written once first. A peer that could not run has the why in both phases' error.
MatrixRow::Peer RunPeerAtShape(const PeerDriver& driver, const BenchOptions& o,
                               uint64_t store_bytes, const BenchLog& log);

}  // namespace kvport::bench
