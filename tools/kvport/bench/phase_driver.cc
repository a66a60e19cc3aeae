// SPDX-License-Identifier: Apache-2.0
#include "bench/phase_driver.h"

#include <atomic>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

namespace kvport::bench {

void RunTimedPhase(const PhaseLimits& limits, const PhaseCall& call, PhaseResult* result) {
  using Clock = std::chrono::steady_clock;
  const int threads = limits.threads > 0 ? limits.threads : 1;
  std::atomic<uint64_t> next_call{0};
  std::atomic<bool> stop{false};
  std::mutex mu;  // guards result's totals and error while threads merge into it
  std::latch ready(threads + 1);
  Clock::time_point start;
  std::atomic<int64_t> deadline_ns{0};

  auto worker = [&](int thread) {
    LatencyHistogram latency;
    CallOutcome total;
    std::string error;
    ready.arrive_and_wait();
    const Clock::time_point deadline{Clock::duration(deadline_ns.load())};
    for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      // Claim a call from the shared budget, so fast threads do more of it than slow ones.
      if (next_call.fetch_add(1) >= limits.calls) break;
      const Clock::time_point t0 = Clock::now();
      if (t0 >= deadline) break;
      Result<CallOutcome> r = call(thread, i);
      const Clock::time_point t1 = Clock::now();
      if (!r.ok()) {
        error = r.status().ToString();
        stop = true;
        break;
      }
      latency.Record(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
      total.keys += r->keys;
      total.bytes += r->bytes;
      total.failed_keys += r->failed_keys;
    }
    std::lock_guard<std::mutex> lock(mu);
    result->latency.Merge(latency);
    result->calls += latency.count();
    result->keys += total.keys;
    result->bytes += total.bytes;
    result->failed_keys += total.failed_keys;
    if (!error.empty() && result->error.empty()) result->error = error;
  };

  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(worker, t);
  start = Clock::now();
  deadline_ns = (start + std::chrono::duration_cast<Clock::duration>(limits.max_time))
                    .time_since_epoch()
                    .count();
  ready.arrive_and_wait();
  for (std::thread& t : pool)
    t.join();
  result->seconds = std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace kvport::bench
