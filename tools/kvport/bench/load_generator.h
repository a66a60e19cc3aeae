// SPDX-License-Identifier: Apache-2.0
// The open-loop load of `kvport load`: one step at a given offered rate against one system.
//
// Each LoadWorker is an engine worker: a connection of its own (LoadConnection), driven by a
// thread of its own during a step. A step offers `rate` sequences per second over all workers:
// worker w gets rate / workers of them, at a fixed interval (staggered, so together they arrive
// evenly) or as a Poisson process (the sum of the workers' is then Poisson at `rate`). A worker
// sleeps until its next intended start; when its previous sequence ran past it, it starts at
// once, and the delay counts in the latency: the first call of a sequence (the probe of a read,
// the put of a write) and the sequence as a whole are timed from the intended start
// (coordinated omission corrected); the calls after the first are timed from their own start.
// At the end of the step a worker starts nothing more; intended starts it did not reach are
// counted (unstarted), the calls in flight are let finish.
//
// Every answer is checked (load_mix.h): a value or metadata that is not its key's, or a hit for
// a page never written, is wrong; a page that should be there and is not is a miss; an error
// code or a failed call is a failure.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "bench/latency_histogram.h"
#include "bench/load_connection.h"
#include "bench/load_mix.h"
#include "bench/zipf.h"

namespace kvport::bench {

struct LoadLatencies {
  LatencyHistogram sequence;  // a sequence, from its intended start to its last answer
  LatencyHistogram probe;     // an exists call (from the sequence's intended start)
  LatencyHistogram meta;      // a meta-only get
  LatencyHistogram get;       // a get of at most get_batch pages
  LatencyHistogram put;       // a put of write_batch pages (from the intended start)
  void Merge(const LoadLatencies& other);
};

struct LoadStep {
  std::string system;
  double offered = 0;       // sequences per second
  double step_seconds = 0;  // the step's length: starts are meant within it
  double seconds = 0;       // from the step's start to its last answer (at least the step)
  uint64_t sequences = 0;   // completed
  uint64_t unstarted = 0;   // intended starts within the step that were not reached
  uint64_t pages_read = 0;  // pages read and verified
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t misses = 0;  // pages that should have been there and were not
  uint64_t wrong = 0;   // answers that cannot be right
  uint64_t failed = 0;  // keys answered with an error, and failed calls
  std::string error;    // the first failed call's status
  LoadLatencies latency;

  double achieved() const { return seconds > 0 ? sequences / seconds : 0; }
  double gb_per_second() const {
    return seconds > 0 ? (bytes_read + bytes_written) / seconds / 1e9 : 0;
  }
  // Sequences meant to start within the step: arrivals as they fell (Poisson arrivals vary
  // by the square root of their number), so `achieved` is compared with these, not `offered`.
  uint64_t intended() const { return sequences + unstarted; }
  // Fell behind: more than one and 1% of the intended starts not reached, or under 90% of the
  // intended sequences per second of the step done (a backlog drained past its end).
  bool saturated() const;
};

// What a step has done so far, for a progress line.
struct LoadProgress {
  double elapsed = 0;  // seconds since the step's start
  uint64_t sequences = 0;
  uint64_t failed = 0;
};
using LoadProgressFn = std::function<void(const LoadProgress&)>;

class LoadWorker {
 public:
  // `index` seeds its random streams (with the options' seed); buffers of get_batch and
  // write_batch pages are allocated and written here, once.
  LoadWorker(const LoadMix& mix, std::unique_ptr<LoadConnection> connection, int index);

  // Writes the leading CachedPages of prompts index, index + stride, ... (untimed). The first
  // failure, or a page not stored, is returned.
  Status Prefill(int stride);

 private:
  friend LoadStep RunLoadStep(std::vector<std::unique_ptr<LoadWorker>>& workers, double rate,
                              std::atomic<uint64_t>* next_new_slot, const LoadProgressFn& progress);
  struct Tally;
  // A step's latencies, shared by several workers (one lock each).
  struct LatencyShard {
    std::mutex mu;
    LoadLatencies latency;
  };
  void Record(LatencyShard* shard, LatencyHistogram LoadLatencies::*which, uint64_t nanos);
  void RunSequence(LoadSequence sequence, std::chrono::steady_clock::time_point intended,
                   std::atomic<uint64_t>* next_new_slot, LatencyShard* shard, Tally* tally);
  // Reads keys[0, hits) in gets of at most get_batch pages, checking each.
  void ReadPages(const std::vector<std::string>& keys, size_t hits, LatencyShard* shard,
                 Tally* tally);
  // Stamps the write buffers for `keys` and puts them (with their metadata).
  Status PutPages(const std::vector<std::string>& keys, std::vector<KeyAnswer>* answers);

  const LoadMix& mix_;
  std::unique_ptr<LoadConnection> connection_;
  int index_;
  std::mt19937_64 random_;
  ZipfSampler zipf_;
  std::vector<uint8_t> read_memory_;
  std::vector<uint8_t> write_memory_;
  std::vector<std::span<uint8_t>> reads_;   // get_batch pages
  std::vector<std::span<uint8_t>> writes_;  // write_batch pages
};

// Runs one step of `seconds` at `rate` over `workers` (one thread each). `next_new_slot` is
// where write sequences take their new pages (kept across steps). `progress`, when set, is
// called about twice a second from the calling thread.
LoadStep RunLoadStep(std::vector<std::unique_ptr<LoadWorker>>& workers, double rate,
                     std::atomic<uint64_t>* next_new_slot, const LoadProgressFn& progress);

}  // namespace kvport::bench
