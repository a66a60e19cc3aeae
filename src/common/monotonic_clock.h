// SPDX-License-Identifier: Apache-2.0
// MonotonicClock: the one clock kvport measures elapsed time with (deadlines, timeouts, idle
// times, linger, backoff, benchmarks). Steady: never set back, so a deadline cannot jump.
// Object lifetimes (TTLs) are told by store::TtlClock instead, which tests drive by hand.
#pragma once

#include <chrono>

namespace kvport {

using MonotonicClock = std::chrono::steady_clock;

}  // namespace kvport
