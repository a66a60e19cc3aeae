// SPDX-License-Identifier: Apache-2.0
#include "bench/load_generator.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace kvport::bench {

using Clock = std::chrono::steady_clock;

namespace {

uint64_t NanosSince(Clock::time_point start) {
  const auto d = Clock::now() - start;
  return d.count() <= 0 ? 0
                        : static_cast<uint64_t>(
                              std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

// Latencies of workers w, w + kShards, ... go to shard w % kShards.
constexpr size_t kShards = 16;

}  // namespace

void LoadLatencies::Merge(const LoadLatencies& other) {
  sequence.Merge(other.sequence);
  probe.Merge(other.probe);
  meta.Merge(other.meta);
  get.Merge(other.get);
  put.Merge(other.put);
}

bool LoadStep::saturated() const {
  if (unstarted * 100 > intended() + 100) return true;
  return step_seconds > 0 && achieved() < 0.9 * static_cast<double>(intended()) / step_seconds;
}

struct LoadWorker::Tally {
  uint64_t sequences = 0, unstarted = 0, pages_read = 0, bytes_read = 0, bytes_written = 0;
  uint64_t misses = 0, wrong = 0, failed = 0;
  std::string error;
  std::atomic<uint64_t>* completed = nullptr;  // the step's, for the progress line
  std::atomic<uint64_t>* failed_total = nullptr;

  void Fail(const Status& status, uint64_t keys) {
    failed += keys;
    failed_total->fetch_add(keys, std::memory_order_relaxed);
    if (error.empty()) error = status.ToString();
  }
  void Add(const Tally& t) {
    sequences += t.sequences;
    unstarted += t.unstarted;
    pages_read += t.pages_read;
    bytes_read += t.bytes_read;
    bytes_written += t.bytes_written;
    misses += t.misses;
    wrong += t.wrong;
    failed += t.failed;
    if (error.empty()) error = t.error;
  }
};

LoadWorker::LoadWorker(const LoadMix& mix, std::unique_ptr<LoadConnection> connection, int index)
    : mix_(mix),
      connection_(std::move(connection)),
      index_(index),
      random_(mix.options().seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index)),
      zipf_(mix.options().prompts(), mix.options().zipf) {
  const LoadOptions& o = mix.options();
  const size_t page = o.page_bytes;
  read_memory_.assign(page * static_cast<size_t>(o.get_batch), 0);
  // Every byte written (page faults are not part of any timing); the stamps are set per put.
  write_memory_.resize(page * static_cast<size_t>(o.write_batch));
  for (size_t i = 0; i < write_memory_.size(); ++i)
    write_memory_[i] = static_cast<uint8_t>(i * 131 + static_cast<size_t>(index));
  for (int i = 0; i < o.get_batch; ++i)
    reads_.emplace_back(read_memory_.data() + page * i, page);
  for (int i = 0; i < o.write_batch; ++i)
    writes_.emplace_back(write_memory_.data() + page * i, page);
}

Status LoadWorker::PutPages(const std::vector<std::string>& keys, std::vector<KeyAnswer>* answers) {
  std::vector<std::string> metas;
  metas.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    LoadMix::Stamp(keys[i], writes_[i]);
    metas.push_back(LoadMix::Meta(keys[i], mix_.options().page_bytes));
  }
  return connection_->Put(keys, std::span(writes_).first(keys.size()), metas, answers);
}

Status LoadWorker::Prefill(int stride) {
  const LoadOptions& o = mix_.options();
  std::vector<std::string> keys;
  std::vector<KeyAnswer> answers;
  for (uint64_t prompt = static_cast<uint64_t>(index_); prompt < o.prompts();
       prompt += static_cast<uint64_t>(stride)) {
    const int cached = mix_.CachedPages(prompt);
    for (int first = 0; first < cached; first += o.write_batch) {
      keys.clear();
      for (int page = first; page < std::min(cached, first + o.write_batch); ++page)
        keys.push_back(LoadMix::PageKey(prompt, page));
      KVPORT_RETURN_IF_ERROR(PutPages(keys, &answers));
      for (size_t i = 0; i < keys.size(); ++i) {
        if (answers[i] != KeyAnswer::kFound) {
          return Status::Internal("prefill: " + keys[i] + " was not stored");
        }
      }
    }
  }
  return Status::Ok();
}

void LoadWorker::Record(LatencyShard* shard, LatencyHistogram LoadLatencies::*which,
                        uint64_t nanos) {
  std::lock_guard<std::mutex> lock(shard->mu);
  (shard->latency.*which).Record(nanos);
}

void LoadWorker::ReadPages(const std::vector<std::string>& keys, size_t hits, LatencyShard* shard,
                           Tally* tally) {
  const LoadOptions& o = mix_.options();
  std::vector<std::string> batch;
  std::vector<KeyAnswer> answers;
  std::vector<uint64_t> lengths;
  for (size_t first = 0; first < hits; first += static_cast<size_t>(o.get_batch)) {
    const size_t n = std::min(hits - first, static_cast<size_t>(o.get_batch));
    batch.assign(keys.begin() + static_cast<ptrdiff_t>(first),
                 keys.begin() + static_cast<ptrdiff_t>(first + n));
    // A get that writes nothing into a buffer must not pass for the previous one's value.
    for (size_t i = 0; i < n; ++i) {
      std::memset(reads_[i].data(), 0, 16);
      std::memset(reads_[i].data() + reads_[i].size() - 16, 0, 16);
    }
    const Clock::time_point start = Clock::now();
    const Status s = connection_->Get(batch, std::span(reads_).first(n), &answers, &lengths);
    Record(shard, &LoadLatencies::get, NanosSince(start));
    if (!s.ok()) {
      tally->Fail(s, n);
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      if (answers[i] == KeyAnswer::kMissing) {
        ++tally->misses;
      } else if (answers[i] == KeyAnswer::kFailed) {
        tally->Fail(Status::IoError("get of " + batch[i] + " failed"), 1);
      } else if (lengths[i] <= reads_[i].size() &&
                 LoadMix::Verify(batch[i], reads_[i].first(lengths[i]), o.page_bytes)) {
        ++tally->pages_read;
        tally->bytes_read += lengths[i];
      } else {
        ++tally->wrong;
      }
    }
  }
}

void LoadWorker::RunSequence(LoadSequence sequence, Clock::time_point intended,
                             std::atomic<uint64_t>* next_new_slot, LatencyShard* shard,
                             Tally* tally) {
  const LoadOptions& o = mix_.options();
  std::vector<std::string> keys;
  std::vector<KeyAnswer> answers;
  if (sequence == LoadSequence::kWrite) {
    const uint64_t base = next_new_slot->fetch_add(static_cast<uint64_t>(o.write_batch));
    for (int i = 0; i < o.write_batch; ++i)
      keys.push_back(LoadMix::NewKey((base + static_cast<uint64_t>(i)) % o.new_slots()));
    const Status s = PutPages(keys, &answers);
    Record(shard, &LoadLatencies::put, NanosSince(intended));
    if (!s.ok()) {
      tally->Fail(s, keys.size());
    } else {
      for (size_t i = 0; i < keys.size(); ++i) {
        if (answers[i] == KeyAnswer::kFound) {
          tally->bytes_written += o.page_bytes;
        } else {
          tally->Fail(Status::IoError("put of " + keys[i] + " failed"), 1);
        }
      }
    }
  } else {
    const uint64_t prompt = zipf_.Sample(random_);
    const int cached = mix_.CachedPages(prompt);
    const int pages = sequence == LoadSequence::kLmcache ? o.prompt_pages : o.probe_pages;
    for (int page = 0; page < pages; ++page)
      keys.push_back(LoadMix::PageKey(prompt, page));
    const Status s = connection_->Exists(keys, &answers);
    Record(shard, &LoadLatencies::probe, NanosSince(intended));
    if (!s.ok()) {
      tally->Fail(s, keys.size());
      keys.clear();
    }
    size_t hits = 0;
    bool leading = true;
    for (size_t i = 0; i < keys.size(); ++i) {
      const bool written = static_cast<int>(i) < cached;
      if (answers[i] == KeyAnswer::kFailed) {
        tally->Fail(Status::IoError("exists of " + keys[i] + " failed"), 1);
      } else if (answers[i] == KeyAnswer::kFound && !written) {
        ++tally->wrong;
      } else if (answers[i] == KeyAnswer::kMissing && written) {
        ++tally->misses;
      }
      leading = leading && answers[i] == KeyAnswer::kFound && written;
      if (leading) hits = i + 1;
    }
    if (hits > 0 && sequence == LoadSequence::kLmcache) {
      // LMCache reads the leading hits' metadata (shapes, sizes) before their data.
      std::vector<std::string> meta_keys(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(hits));
      std::vector<std::string> metas;
      const Clock::time_point start = Clock::now();
      const Status m = connection_->GetMeta(meta_keys, &answers, &metas);
      Record(shard, &LoadLatencies::meta, NanosSince(start));
      if (!m.ok()) {
        tally->Fail(m, hits);
        hits = 0;
      }
      for (size_t i = 0; i < hits; ++i) {
        if (answers[i] == KeyAnswer::kMissing) {
          ++tally->misses;
        } else if (answers[i] == KeyAnswer::kFailed) {
          tally->Fail(Status::IoError("meta of " + keys[i] + " failed"), 1);
        } else if (metas[i] != LoadMix::Meta(keys[i], o.page_bytes)) {
          ++tally->wrong;
        }
      }
    }
    ReadPages(keys, hits, shard, tally);
  }
  Record(shard, &LoadLatencies::sequence, NanosSince(intended));
  ++tally->sequences;
  tally->completed->fetch_add(1, std::memory_order_relaxed);
}

LoadStep RunLoadStep(std::vector<std::unique_ptr<LoadWorker>>& workers, double rate,
                     std::atomic<uint64_t>* next_new_slot, const LoadProgressFn& progress) {
  LoadStep step;
  step.offered = rate;
  if (workers.empty()) return step;
  const LoadOptions& o = workers.front()->mix_.options();
  const double worker_rate = rate / static_cast<double>(workers.size());
  const auto step_length =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  // A common start a little ahead, so every thread is waiting when it comes.
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(20);
  const Clock::time_point end = start + step_length;

  std::vector<LoadWorker::LatencyShard> shards(std::min(kShards, workers.size()));
  std::vector<LoadWorker::Tally> tallies(workers.size());
  std::atomic<uint64_t> completed{0}, failed{0}, running{workers.size()};
  std::vector<Clock::time_point> last_answer(workers.size(), start);
  std::vector<std::thread> threads;
  threads.reserve(workers.size());
  for (size_t w = 0; w < workers.size(); ++w) {
    threads.emplace_back([&, w] {
      LoadWorker& worker = *workers[w];
      LoadWorker::Tally& tally = tallies[w];
      tally.completed = &completed;
      tally.failed_total = &failed;
      std::exponential_distribution<double> poisson_gap(worker_rate);
      auto gap = [&] {
        const double seconds =
            o.arrivals == Arrivals::kFixed ? 1.0 / worker_rate : poisson_gap(worker.random_);
        return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
      };
      // Fixed arrivals: worker w's first start is w / rate, so the workers' starts interleave.
      Clock::time_point next =
          start + (o.arrivals == Arrivals::kFixed
                       ? std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(static_cast<double>(w) / rate))
                       : gap());
      while (next < end) {
        if (Clock::now() >= end) {
          for (; next < end; next += gap())
            ++tally.unstarted;
          break;
        }
        std::this_thread::sleep_until(next);
        worker.RunSequence(worker.mix_.Pick(worker.random_), next, next_new_slot,
                           &shards[w % shards.size()], &tally);
        next += gap();
      }
      last_answer[w] = Clock::now();
      running.fetch_sub(1);
    });
  }
  Clock::time_point last_progress = Clock::now();
  while (running.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (progress && Clock::now() - last_progress >= std::chrono::milliseconds(500)) {
      last_progress = Clock::now();
      progress(LoadProgress{std::chrono::duration<double>(Clock::now() - start).count(),
                            completed.load(), failed.load()});
    }
  }
  for (std::thread& t : threads)
    t.join();

  LoadWorker::Tally total;
  for (const LoadWorker::Tally& t : tallies)
    total.Add(t);
  for (LoadWorker::LatencyShard& shard : shards)
    step.latency.Merge(shard.latency);
  const Clock::time_point finished = *std::max_element(last_answer.begin(), last_answer.end());
  step.step_seconds = o.seconds;
  step.seconds = std::max(std::chrono::duration<double>(finished - start).count(), o.seconds);
  step.sequences = total.sequences;
  step.unstarted = total.unstarted;
  step.pages_read = total.pages_read;
  step.bytes_read = total.bytes_read;
  step.bytes_written = total.bytes_written;
  step.misses = total.misses;
  step.wrong = total.wrong;
  step.failed = total.failed;
  step.error = total.error;
  return step;
}

}  // namespace kvport::bench
