// SPDX-License-Identifier: Apache-2.0
// The outcome of one timed phase of `kvport bench`: a system (kvport, redis, a socket baseline)
// doing one operation for a number of calls.
#pragma once

#include <cstdint>
#include <string>

#include "bench/bench_options.h"
#include "bench/latency_histogram.h"

namespace kvport::bench {

struct PhaseResult {
  std::string system;   // "kvport", "redis", "socket"
  std::string variant;  // e.g. the socket mode ("busy-poll", "blocking"); may be empty
  Op op = Op::kPut;
  uint64_t calls = 0;        // batched calls (round trips) completed
  uint64_t keys = 0;         // keys those calls carried
  uint64_t bytes = 0;        // value bytes moved
  uint64_t failed_keys = 0;  // keys that did not succeed or did not verify
  double seconds = 0;
  LatencyHistogram latency;  // per call; empty for the socket baseline
  std::string error;         // why the phase stopped early, if it did

  double gb_per_second() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
  double keys_per_second() const { return seconds > 0 ? keys / seconds : 0; }
};

}  // namespace kvport::bench
