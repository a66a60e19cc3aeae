// SPDX-License-Identifier: Apache-2.0
// RunTimedPhase: runs a call on N threads until a shared count of calls or a time limit is
// reached, and collects per-call latency, keys and bytes. Used for every system the bench
// measures, so they are timed the same way.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "bench/phase_result.h"
#include "kvport/status.h"

namespace kvport::bench {

// What one call did.
struct CallOutcome {
  uint64_t keys = 0;
  uint64_t bytes = 0;
  uint64_t failed_keys = 0;
};

// Runs on each thread: `call_index` is the thread's own sequence number (0, 1, ...). A non-OK
// Result stops the phase (every thread finishes its current call) and is recorded in
// PhaseResult::error.
using PhaseCall = std::function<Result<CallOutcome>(int thread, uint64_t call_index)>;

struct PhaseLimits {
  int threads = 1;
  uint64_t calls = 1;  // total over all threads
  std::chrono::duration<double> max_time{10};
};

// Fills calls, keys, bytes, failed_keys, seconds, latency and error of `result`.
void RunTimedPhase(const PhaseLimits& limits, const PhaseCall& call, PhaseResult* result);

}  // namespace kvport::bench
