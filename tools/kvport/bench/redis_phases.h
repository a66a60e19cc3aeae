// SPDX-License-Identifier: Apache-2.0
// The redis-server baseline of `kvport bench`: the same keys and values through hiredis, one
// connection per thread, one SET / GET / EXISTS per key, in redis's best pattern for the value
// size (BenchOptions::redis_depth: a batch of small values as one pipeline, multi-MiB values
// one command at a time; EXISTS always pipelines the whole batch). Each phase's variant names
// the pattern ("pipeline 16", "no pipeline").
#pragma once

#include <cstdint>
#include <vector>

#include "bench/bench_data.h"
#include "bench/bench_options.h"
#include "bench/phase_result.h"
#include "kvport/status.h"

namespace kvport::bench {

// Runs options.ops in order against redis on 127.0.0.1:`port`. Unavailable when a connection
// cannot be made; per-phase failures are in the results as for kvport.
Result<std::vector<PhaseResult>> RunRedisPhases(const BenchOptions& options, uint16_t port,
                                                BenchData& data);

}  // namespace kvport::bench
