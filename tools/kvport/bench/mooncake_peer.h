// SPDX-License-Identifier: Apache-2.0
// The Mooncake Store peer of `kvport bench --peers mooncake`.
//
// Mooncake's released client is Python over C++ (the `mooncake-transfer-engine-non-cuda` wheel,
// pinned in python/peers/requirements.txt and installed by `make peers` into build/peers/venv).
// The bench runs python/peers/mooncake_bench.py with that venv's Python: it starts the wheel's
// mooncake_master and a process holding the store's memory, and drives the store in its best
// pattern (batch_put_from / batch_get_into from registered buffers, batch_is_exist) with this
// run's shape, then prints its phases as JSON, which this turns into PhaseResults (system
// "mooncake"). docs/performance.md says how the driver's per-call Python cost was checked.
#pragma once

#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/phase_result.h"
#include "kvport/status.h"

namespace kvport::bench {

// Where `make peers` put the venv and the driver: `peers_dir` when set, else build/peers as
// seen from this executable (BIN/../peers). NotFound naming what is missing and `make peers`.
struct MooncakePeer {
  std::string python;  // the venv's interpreter
  std::string driver;  // mooncake_bench.py
};
Result<MooncakePeer> FindMooncakePeer(const std::string& peers_dir);

// Runs the driver with `options`' shape (value size, batch, threads, calls, seconds, phases, the
// exists shape, the warm-up) and a store of `segment_bytes`. Unavailable with the driver's reason
// when it could not start Mooncake.
Result<std::vector<PhaseResult>> RunMooncakePhases(const MooncakePeer& peer,
                                                   const BenchOptions& options,
                                                   uint64_t segment_bytes);

}  // namespace kvport::bench
