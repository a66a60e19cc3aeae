// SPDX-License-Identifier: Apache-2.0
// The UCX limit: ucx_perftest (UCX's own benchmark, Debian's ucx-utils), moving messages of a
// row's value size between two processes on this host over the transports this process's UCX_*
// environment selects (UCX_TLS), the same ones kvport's UCX transport then uses: ucp_put_bw for
// puts, ucp_get for gets, each in UCX's own best pattern (its window of operations in flight).
// Its overall bandwidth is what UCX's own put or get of that size can reach here; kvport's UCX
// rows (node-checked messages) are compared with it.
#pragma once

#include <cstdint>
#include <string>

#include "bench/bench_options.h"
#include "bench/phase_result.h"
#include "kvport/status.h"

namespace kvport::bench {

struct UcxPerftestOptions {
  uint64_t message_bytes = uint64_t{1} << 20;
  uint64_t messages = 100;  // measured, after as many again of warm-up (at most 1000)
  double max_seconds = 30;  // the whole run, server and client: past it both are killed
  std::string program;      // "" searches $PATH for ucx_perftest
};

// One run for `op` (kPut: ucp_put_bw, kGet: ucp_get). The result: system "ucx_perftest",
// variant the test and UCX_TLS ("ucp_get, UCX_TLS=tcp"), `messages` calls of one key each,
// `bytes` their bytes and the seconds they took at ucx_perftest's overall bandwidth (its MB is
// 2^20 bytes). NotFound when there is no ucx_perftest (naming the package); InvalidArgument for
// kExists; Unavailable with its output when it fails; Timeout past max_seconds.
Result<PhaseResult> RunUcxPerftest(Op op, const UcxPerftestOptions& options);

// The "Final:" line of ucx_perftest's output as MB/s (2^20 bytes) overall bandwidth; Corruption
// when there is none.
Result<double> ParseUcxPerftestBandwidth(const std::string& output);

}  // namespace kvport::bench
