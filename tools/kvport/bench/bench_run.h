// RunBench: one `kvport bench` run. kvport first (an embedded node, or --url), then the raw
// loopback socket baseline for the same byte volume and number of streams, then redis-server
// through hiredis with the same keys, values and pipelining.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_options.h"
#include "bench/phase_result.h"
#include "kvport/status.h"

namespace kvport::bench {

struct BenchReport {
  BenchOptions options;  // as run: value_bytes resolved from the shape when one was given
  std::string node;      // "embedded 127.0.0.1:PORT (capacity ..., N I/O threads)" or the URL
  std::vector<PhaseResult> kvport;
  std::vector<PhaseResult> socket;  // every socket mode measured
  std::vector<PhaseResult> redis;
  std::string socket_skipped;  // why there is no socket baseline, when there is none
  std::string redis_skipped;   // why there is no redis baseline, when there is none

  // The fastest socket mode (the limit), or null.
  const PhaseResult* Limit() const;
  // The phase of `system` ("kvport", "redis") for `op`, or null.
  const PhaseResult* Find(std::string_view system, Op op) const;
  // kvport GB/s over the limit's GB/s (put and get), and kvport over redis (GB/s for put and
  // get, keys/s for exists); nullopt when either side is missing or failed.
  std::optional<double> RatioToLimit(Op op) const;
  std::optional<double> RatioToRedis(Op op) const;
  // True when every phase ran without an error or a failed key.
  bool AllPassed() const;
};

// Progress notes ("starting redis-server ...") for the person waiting; may be empty.
using BenchLog = std::function<void(std::string_view)>;

// Errors: InvalidArgument for bad options; a node that cannot be started or reached. Failures
// inside a phase are reported in the phase, not here.
Result<BenchReport> RunBench(BenchOptions options, const BenchLog& log = {});

}  // namespace kvport::bench
