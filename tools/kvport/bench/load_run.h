// SPDX-License-Identifier: Apache-2.0
// RunLoad: `kvport load` from start to end. For kvport (an embedded node, or the node at the
// URL) and then redis-server (started for the run, when installed and asked for): connect the
// workers, write the prompts' cached pages (untimed), and run the steps' offered rates in order
// (load_generator.h) until the system saturates. Both systems are offered the same rates.
//
// With 2 CPUs or more the servers run on the lower CPUs and the workers on the upper half
// (cpu_split.h), so the load generator does not take its turns on the servers' cores.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/bench_log.h"
#include "bench/cpu_split.h"
#include "bench/load_generator.h"
#include "bench/load_options.h"
#include "kvport/status.h"

namespace kvport::bench {

struct LoadReport {
  LoadOptions options;
  std::string node;  // what kvport was
  CpuSplit cpus;
  std::vector<LoadStep> kvport;
  std::vector<LoadStep> redis;
  std::string redis_skipped;  // why there are no redis steps, when there are none

  // No step has a wrong answer or a failure (misses are not errors).
  bool AllCorrect() const;
};

// Called with the system, the step (0-based), the steps and the step's progress.
using LoadStepProgressFn = std::function<void(std::string_view system, size_t step, size_t steps,
                                              double offered, const LoadProgress& progress)>;

// Errors: InvalidArgument for options out of range; the embedded node failing to start, or the
// connections or prefill failing for kvport. Redis failing to start or connect is recorded in
// redis_skipped instead.
Result<LoadReport> RunLoad(const LoadOptions& options, const BenchLog& log,
                           const LoadStepProgressFn& progress);

}  // namespace kvport::bench
