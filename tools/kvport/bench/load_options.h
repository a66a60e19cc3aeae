// SPDX-License-Identifier: Apache-2.0
// LoadOptions: what `kvport load` offers a node (and redis-server) and how it steps the rate.
//
// The load is open-loop: sequences arrive at `rate` per second whatever the systems answer (a
// fixed interval, or Poisson arrivals), spread over `connections` connections, each an engine
// worker with its own connection and thread. A sequence is what an engine does for one request
// (LoadSequence in load_mix.h); its latency, and that of its first call, is counted from the
// moment it was meant to start, so a system that falls behind is charged for the wait
// (coordinated omission corrected, as wrk2 does).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvport/status.h"

namespace kvport::bench {

enum class Arrivals { kFixed, kPoisson };

struct LoadOptions {
  std::string url;       // a node to load; empty: an embedded node started for the run
  int connections = 16;  // 1..1024, one thread each
  Arrivals arrivals = Arrivals::kPoisson;
  // Offered sequences per second, one step each, in order. Empty: `rate`, then each step
  // `step_factor` times the last, `steps` in all; a system's curve ends at its first saturated
  // step (LoadStep::saturated).
  std::vector<double> rates;
  double rate = 50;
  int steps = 1;
  double step_factor = 1.5;
  double seconds = 2;  // per step and system

  // The key space: `objects` pages of `page_bytes`, as prompts of `prompt_pages` pages.
  uint64_t objects = 16384;
  uint64_t page_bytes = uint64_t{64} << 10;
  int prompt_pages = 128;
  int probe_pages = 128;  // SGLang HiCache's batch_exists
  int get_batch = 32;     // pages per get call
  int write_batch = 16;   // new pages per write sequence
  double zipf = 0.99;     // popularity exponent of the prompts (0: uniform)
  // Weights of the sequences (load_mix.h); need not sum to 1.
  double lmcache_weight = 0.45;
  double hicache_weight = 0.45;
  double write_weight = 0.1;
  uint64_t seed = 1;

  std::string ns = "load";     // kvport's namespace for the keys
  uint64_t node_capacity = 0;  // embedded node; 0: twice the keys' bytes
  unsigned node_threads = 0;   // embedded node I/O threads; 0: one per CPU
  bool redis = true;
  std::string redis_server = "redis-server";

  // The offered rates of the steps (`rates`, or the ones `rate` x `step_factor` give).
  std::vector<double> StepRates() const;
  // Prompts in the key space: objects / prompt_pages, at least 1.
  uint64_t prompts() const;
  // Slots of new pages that write sequences cycle through: a quarter of `objects`, at least
  // one write batch.
  uint64_t new_slots() const;
  // InvalidArgument naming the option that is out of range.
  Status Validate() const;
};

std::string_view ArrivalsName(Arrivals a);

}  // namespace kvport::bench
