// SPDX-License-Identifier: Apache-2.0
// `kvport load`'s generator: the short form against an embedded node (every answer checked),
// and its checks and coordinated-omission correction against an in-memory stand-in that can
// lie, lose pages or stall.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "bench/load_generator.h"
#include "bench/load_mix.h"
#include "bench/load_report.h"
#include "bench/load_run.h"

namespace kvport::bench {
namespace {

LoadOptions SmallOptions() {
  LoadOptions o;
  o.connections = 4;
  o.rates = {100, 200};
  o.seconds = 0.75;
  o.objects = 512;
  o.page_bytes = 4096;
  o.prompt_pages = 16;
  o.probe_pages = 8;
  o.get_batch = 4;
  o.write_batch = 4;
  o.redis = false;
  return o;
}

TEST(LoadRunTest, ShortRunAgainstAnEmbeddedNodeAnswersEverythingRight) {
  const LoadOptions o = SmallOptions();
  size_t progress_calls = 0;
  Result<LoadReport> report = RunLoad(
      o, nullptr, [&](std::string_view system, size_t, size_t, double, const LoadProgress&) {
        EXPECT_EQ(system, "kvport");
        ++progress_calls;
      });
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_FALSE(report->kvport.empty());
  EXPECT_TRUE(report->redis.empty());
  for (const LoadStep& s : report->kvport) {
    EXPECT_GT(s.sequences, 0u);
    EXPECT_GT(s.pages_read, 0u) << "reads verified by content";
    EXPECT_GT(s.bytes_written, 0u);
    EXPECT_GT(s.latency.probe.count(), 0u);
    EXPECT_GT(s.latency.meta.count(), 0u);
    EXPECT_GT(s.latency.get.count(), 0u);
    EXPECT_GT(s.latency.put.count(), 0u);
    EXPECT_EQ(s.latency.sequence.count(), s.sequences);
    EXPECT_EQ(s.wrong, 0u);
    EXPECT_EQ(s.failed, 0u) << s.error;
    // The node holds every key (capacity twice the data): nothing written is missing.
    EXPECT_EQ(s.misses, 0u);
  }
  EXPECT_TRUE(report->AllCorrect());
  EXPECT_GT(progress_calls, 0u);
  const std::string text = FormatLoadText(*report);
  EXPECT_NE(text.find("kvport"), std::string::npos);
  const std::string csv = FormatLoadCsv(*report);
  EXPECT_EQ(static_cast<size_t>(std::count(csv.begin(), csv.end(), '\n')),
            1 + report->kvport.size());
}

TEST(LoadRunTest, RejectsOptionsOutOfRange) {
  LoadOptions o = SmallOptions();
  o.connections = 1025;
  EXPECT_EQ(RunLoad(o, nullptr, nullptr).status().code(), StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.probe_pages = o.prompt_pages + 1;
  EXPECT_EQ(RunLoad(o, nullptr, nullptr).status().code(), StatusCode::kInvalidArgument);
}

// An in-memory system with faults to order.
struct FakeStore {
  std::mutex mu;
  std::map<std::string, std::pair<std::vector<uint8_t>, std::string>> pages;
  bool corrupt_values = false;    // flips a byte of every value read
  bool claim_everything = false;  // exists says yes to every key
  bool lose_reads = false;        // gets miss every key
  std::chrono::milliseconds exists_delay{0};
};

class FakeConnection : public LoadConnection {
 public:
  explicit FakeConnection(FakeStore* store) : s_(store) {}

  Status Exists(const std::vector<std::string>& keys, std::vector<KeyAnswer>* answers) override {
    std::this_thread::sleep_for(s_->exists_delay);
    std::lock_guard<std::mutex> lock(s_->mu);
    answers->clear();
    for (const std::string& k : keys) {
      answers->push_back(s_->claim_everything || s_->pages.count(k) ? KeyAnswer::kFound
                                                                    : KeyAnswer::kMissing);
    }
    return Status::Ok();
  }
  Status GetMeta(const std::vector<std::string>& keys, std::vector<KeyAnswer>* answers,
                 std::vector<std::string>* metas) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    answers->clear();
    metas->clear();
    for (const std::string& k : keys) {
      auto it = s_->pages.find(k);
      answers->push_back(it == s_->pages.end() ? KeyAnswer::kMissing : KeyAnswer::kFound);
      metas->push_back(it == s_->pages.end() ? "" : it->second.second);
    }
    return Status::Ok();
  }
  Status Get(const std::vector<std::string>& keys, std::span<const std::span<uint8_t>> buffers,
             std::vector<KeyAnswer>* answers, std::vector<uint64_t>* lengths) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    answers->clear();
    lengths->clear();
    for (size_t i = 0; i < keys.size(); ++i) {
      auto it = s_->pages.find(keys[i]);
      if (it == s_->pages.end() || s_->lose_reads) {
        answers->push_back(KeyAnswer::kMissing);
        lengths->push_back(0);
        continue;
      }
      std::memcpy(buffers[i].data(), it->second.first.data(), it->second.first.size());
      if (s_->corrupt_values) buffers[i][3] ^= 1;
      answers->push_back(KeyAnswer::kFound);
      lengths->push_back(it->second.first.size());
    }
    return Status::Ok();
  }
  Status Put(const std::vector<std::string>& keys, std::span<const std::span<uint8_t>> values,
             const std::vector<std::string>& metas, std::vector<KeyAnswer>* answers) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    for (size_t i = 0; i < keys.size(); ++i)
      s_->pages[keys[i]] = {std::vector<uint8_t>(values[i].begin(), values[i].end()), metas[i]};
    answers->assign(keys.size(), KeyAnswer::kFound);
    return Status::Ok();
  }

 private:
  FakeStore* s_;
};

// Workers on the fake, prefilled, with reads only (no writes change the store).
std::vector<std::unique_ptr<LoadWorker>> FakeWorkers(const LoadMix& mix, FakeStore* store) {
  std::vector<std::unique_ptr<LoadWorker>> workers;
  for (int w = 0; w < mix.options().connections; ++w)
    workers.push_back(
        std::make_unique<LoadWorker>(mix, std::make_unique<FakeConnection>(store), w));
  for (auto& w : workers)
    EXPECT_TRUE(w->Prefill(static_cast<int>(workers.size())).ok());
  return workers;
}

LoadOptions FakeOptions() {
  LoadOptions o = SmallOptions();
  o.connections = 2;
  o.seconds = 0.3;
  o.write_weight = 0;
  return o;
}

LoadStep FakeStep(FakeStore* store, const LoadOptions& o, double rate) {
  const LoadMix mix(o);
  std::vector<std::unique_ptr<LoadWorker>> workers = FakeWorkers(mix, store);
  std::atomic<uint64_t> next_new_slot{0};
  return RunLoadStep(workers, rate, &next_new_slot, nullptr);
}

TEST(LoadGeneratorTest, AnHonestStoreIsAllRight) {
  FakeStore store;
  const LoadStep s = FakeStep(&store, FakeOptions(), 200);
  EXPECT_GT(s.pages_read, 0u);
  EXPECT_EQ(s.wrong, 0u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.failed, 0u);
}

TEST(LoadGeneratorTest, ACorruptValueIsWrong) {
  FakeStore store;
  store.corrupt_values = true;
  const LoadStep s = FakeStep(&store, FakeOptions(), 200);
  EXPECT_GT(s.wrong, 0u);
  EXPECT_EQ(s.pages_read, 0u);
}

TEST(LoadGeneratorTest, AHitForAPageNeverWrittenIsWrong) {
  FakeStore store;
  store.claim_everything = true;
  const LoadStep s = FakeStep(&store, FakeOptions(), 200);
  EXPECT_GT(s.wrong, 0u);
}

TEST(LoadGeneratorTest, ALostPageIsAMissNotAnError) {
  FakeStore store;
  store.lose_reads = true;
  const LoadStep s = FakeStep(&store, FakeOptions(), 200);
  EXPECT_GT(s.misses, 0u);
  EXPECT_EQ(s.wrong, 0u);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_EQ(s.pages_read, 0u);
}

TEST(LoadGeneratorTest, LatencyCountsFromTheIntendedStart) {
  // One worker offered 100 sequences/s for a second by a store whose probe takes at least
  // 50 ms: the sequences queue behind each other, sequence k (meant at 10k ms) starting at 50k ms
  // or later. Timed from their own start, every probe would take about 50 ms; from the intended
  // start, the fifth (k = 4) alone took at least 210 ms.
  FakeStore store;
  store.exists_delay = std::chrono::milliseconds(50);
  LoadOptions o = FakeOptions();
  o.connections = 1;
  o.arrivals = Arrivals::kFixed;
  o.seconds = 1;
  const LoadStep s = FakeStep(&store, o, 100);
  EXPECT_GE(s.latency.probe.max(), 200'000'000u);
  EXPECT_GT(s.unstarted, 0u);
  EXPECT_TRUE(s.saturated());
}

TEST(LoadMixTest, StampsTellKeysAndLengthsApart) {
  std::vector<uint8_t> page(64, 7);
  LoadMix::Stamp("p1.2", page);
  EXPECT_TRUE(LoadMix::Verify("p1.2", page, 64));
  EXPECT_FALSE(LoadMix::Verify("p1.3", page, 64));
  EXPECT_FALSE(LoadMix::Verify("p1.2", std::span(page).first(48), 64));
  page[60] ^= 1;
  EXPECT_FALSE(LoadMix::Verify("p1.2", page, 64));
}

TEST(LoadMixTest, CachedPagesAreQuartersOfThePrompt) {
  LoadOptions o;
  o.prompt_pages = 16;
  const LoadMix mix(o);
  std::set<int> seen;
  for (uint64_t p = 0; p < 200; ++p)
    seen.insert(mix.CachedPages(p));
  EXPECT_EQ(seen, (std::set<int>{4, 8, 12, 16}));
}

}  // namespace
}  // namespace kvport::bench
