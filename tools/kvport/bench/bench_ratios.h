// SPDX-License-Identifier: Apache-2.0
// How a bench report sets kvport against what it is compared with: the limit of each transport,
// the peers, the one node (--nodes), each row of the matrix against its own limits; and whether
// every phase passed. BenchReport's and the matrix's queries are defined in bench_ratios.cc;
// this header adds the one piece RunMatrix needs besides.
#pragma once

#include <vector>

#include "bench/phase_result.h"

namespace kvport::bench {

// The memcpy way that is the shared-memory limit: the copy through the pool when it ran (the
// arena of a node is larger than the caches, so a copy into it goes to memory), else the copy
// into the read buffers (which then are themselves larger than the pool).
const PhaseResult* MemcpyLimitOf(const std::vector<PhaseResult>& ways);

}  // namespace kvport::bench
