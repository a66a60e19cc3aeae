// SPDX-License-Identifier: Apache-2.0
// The kvport side of `kvport bench`: MSet / MGet / MExist through kvport::Client.
#pragma once

#include <vector>

#include "bench/bench_data.h"
#include "bench/bench_options.h"
#include "bench/phase_result.h"
#include "kvport/client.h"
#include "kvport/status.h"

namespace kvport::bench {

// Runs options.ops in order against the node `client` is connected to, with `data`'s keys in
// namespace options.ns, after options.warmup_calls() untimed puts. A key that fails, or reads
// back different bytes, counts in the phase's failed_keys; a call that fails as a whole ends the
// phase with PhaseResult::error set. Every result's variant is `transport`'s name.
std::vector<PhaseResult> RunKvportPhases(const BenchOptions& options, Client& client,
                                         BenchData& data, Transport transport = Transport::kTcp);

}  // namespace kvport::bench
