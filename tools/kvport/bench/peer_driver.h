// SPDX-License-Identifier: Apache-2.0
// The peers of `kvport bench --peers` that are driven from Python: Mooncake Store and LMCache's
// own server.
//
// Their released clients are Python (over C++ for Mooncake), so each has a driver in
// python/peers/ run by the Python of a venv the project's make targets made: `make peers`
// (build/peers/venv: the pinned Mooncake wheel) and `make engines` (build/engines/venv: the
// pinned LMCache). A driver starts its system on loopback, drives it in its best pattern with
// this run's shape (value size, batch, threads, calls, seconds, phases, the exists shape, the
// warm-up), checks every value read back, and prints its phases as JSON, which RunPeerDriver
// turns into PhaseResults of system `peer.system`. docs/performance.md has each one's pattern.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_options.h"
#include "bench/phase_result.h"
#include "kvport/status.h"

namespace kvport::bench {

// The Python-driven peers, as --peers names them.
inline constexpr std::string_view kPythonPeers[] = {"mooncake", "lmcache-server"};

struct PeerDriver {
  std::string system;  // "mooncake", "lmcache-server"
  std::string python;  // the venv's interpreter
  std::string driver;  // the driver script
};

// Where the make targets put `system`'s venv and driver: under `peers_dir` when set, else
// build/peers as seen from this executable (BIN/../peers; LMCache's venv is ../engines/venv
// from there). NotFound naming what is missing and the make target that installs it;
// InvalidArgument for a system that is not a Python-driven peer.
Result<PeerDriver> FindPeerDriver(std::string_view system, const std::string& peers_dir);

// Runs the driver with `options`' shape and a store of `segment_bytes` (the memory the peer's
// server may use, where it has such a bound). Unavailable with the driver's reason when it could
// not start its system; Corruption for a result that does not parse; Timeout when it has not
// finished `start_allowance` plus three times max_seconds per phase after it started (it is then
// killed with every process it started).
Result<std::vector<PhaseResult>> RunPeerDriver(
    const PeerDriver& peer, const BenchOptions& options, uint64_t segment_bytes,
    std::chrono::seconds start_allowance = std::chrono::seconds(120));

}  // namespace kvport::bench
