// SPDX-License-Identifier: Apache-2.0
// kill -9 and power losses at every point of a compaction and of a clean stop (its flush of
// what memory holds, then the tier's own stop: syncs, the index checkpoint, the superblock),
// through the power-loss model of the folder (power_loss_folder.h): the same seeded workload is
// replayed, the process dies at its n-th changing file operation, for every n the phase has, and
// the restarted tier answers every key as the reference says. Seeded, the seed printed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "faulty_file.h"
#include "power_loss_folder.h"
#include "store/disk_tier.h"
#include "store/file_io.h"

namespace kvport::store {
namespace {

using testing::Bytes;
using testing::PowerLossFolder;

constexpr uint64_t kSegment = 128 << 10;
constexpr uint64_t kNow = 1000;
constexpr int kHotKeys = 8;           // overwritten and deleted over and over
constexpr int kKeys = kHotKeys + 16;  // and 16 written once, one every 10 steps

std::vector<char> ValueOf(uint64_t version) {
  return Bytes(static_cast<char>(version), 3000 + (version % 3) * 4096);
}
std::string K(int i) {
  return "k" + std::to_string(i);
}

enum class Phase { kCompaction, kStop };
enum class Death { kKill, kPowerLoss };

// What every key may read as after the phase.
struct Reference {
  // The version each key read as when the phase began (0: a miss), all of it durable.
  std::vector<uint64_t> durable = std::vector<uint64_t>(kKeys, 0);
  // A version committed after that (its older versions ended, durably), held in memory only:
  // the stop's flush writes it. 0: none.
  std::vector<uint64_t> in_memory = std::vector<uint64_t>(kKeys, 0);
};

class DiskCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "kvport_disk_crash_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::remove_all(dir_ + ".start");
  }
  void TearDown() override {
    tier_.reset();
    std::filesystem::remove_all(dir_);
    std::filesystem::remove_all(dir_ + ".start");
  }

  void Open() {
    tier_.reset();
    Result<std::unique_ptr<SegmentFolder>> real = OpenSegmentFolder(dir_);
    ASSERT_TRUE(real.ok()) << real.status().ToString();
    auto folder = std::make_unique<PowerLossFolder>(std::move(real).value());
    power_ = folder.get();
    DiskTierOptions options;
    options.segment_bytes = kSegment;
    options.capacity_bytes = 8 * kSegment;
    Result<std::unique_ptr<DiskTier>> tier = DiskTier::Open(std::move(folder), options, kNow);
    ASSERT_TRUE(tier.ok()) << tier.status().ToString();
    tier_ = std::move(tier).value();
    sequence_ = std::max(sequence_, tier_->last_sequence());
  }

  // From an empty folder: overwrites and deletes as a node makes them (a commit ends the older
  // versions at once and writes its own on eviction), so that segments go mostly dead; a clean
  // stop; then a few commits memory still holds. The same for the same seed, file operation for
  // file operation.
  void Workload(uint32_t seed, Reference* reference) {
    tier_.reset();
    std::filesystem::remove_all(dir_);
    sequence_ = 0;
    std::mt19937 random(seed);
    ASSERT_NO_FATAL_FAILURE(Open());
    std::vector<uint64_t> in_memory(kKeys, 0);
    for (int step = 0; step < 160; ++step) {
      if (step % 10 == 0) {  // a cold key, written once: live in a segment that goes dead
        const int cold = kHotKeys + step / 10;
        const uint64_t v = ++sequence_;
        ASSERT_TRUE(tier_->Erase("ns", K(cold), v).ok());
        ASSERT_TRUE(tier_->Put("ns", K(cold), "", ValueOf(v), 0, v).ok());
        continue;
      }
      const int i = static_cast<int>(random() % kHotKeys);
      const uint32_t op = random() % 100;
      if (op < 30) {  // a commit
        const uint64_t v = ++sequence_;
        ASSERT_TRUE(tier_->Erase("ns", K(i), v).ok());
        in_memory[i] = v;
      } else if (op < 85) {  // an eviction writes what memory holds
        if (in_memory[i] == 0) continue;
        const uint64_t v = std::exchange(in_memory[i], 0);
        ASSERT_TRUE(tier_->Put("ns", K(i), "", ValueOf(v), 0, v).ok());
      } else {  // a delete
        ASSERT_TRUE(tier_->Erase("ns", K(i), ++sequence_).ok());
        in_memory[i] = 0;
      }
    }
    // A clean stop without the flush (memory's versions are lost, as a miss): all of the rest
    // durable from here.
    ASSERT_NO_FATAL_FAILURE(Open());
    for (int i = 0; i < kKeys; ++i) {
      Result<DiskObject> got = tier_->Get("ns", K(i), kNow);
      reference->durable[i] = got.ok() ? got->sequence : 0;
    }
    for (int i = 0; i < kKeys; i += 3) {  // commits after it, in memory only
      const uint64_t v = ++sequence_;
      ASSERT_TRUE(tier_->Erase("ns", K(i), v).ok());  // synced: durable
      reference->durable[i] = 0;
      reference->in_memory[i] = v;
    }
  }

  // The phase, whatever its calls answer once the process is dead.
  void RunPhase(Phase phase, const Reference& reference) {
    const PowerLossFolder::Handle model = power_->handle();
    if (phase == Phase::kCompaction) {
      for (int step = 0; step < 64; ++step) {
        Result<CompactionProgress> progress = tier_->CompactStep(24 << 10, kNow);
        if (!progress.ok() || !progress->more) break;
      }
      operations_after_ = model.operations();
      return;
    }
    std::vector<DiskPut> flush;
    std::vector<std::vector<char>> values;
    values.reserve(kKeys);
    for (int i = 0; i < kKeys; ++i) {
      if (reference.in_memory[i] == 0) continue;
      values.push_back(ValueOf(reference.in_memory[i]));
      flush.push_back({"ns", keys_[i], "", values.back(), 0, reference.in_memory[i], 0});
    }
    (void)tier_->PutMany(flush);
    tier_.reset();  // the tier's own stop
    operations_after_ = model.operations();
  }

  // Every key as the reference allows: the durable version exactly (nothing the phase did may
  // lose or revive one), or for a key committed after it a miss or that commit's version;
  // never wrong bytes.
  void Check(Phase phase, const Reference& reference, const std::string& when) {
    for (int i = 0; i < kKeys; ++i) {
      Result<DiskObject> got = tier_->Get("ns", K(i), kNow);
      const uint64_t v = got.ok() ? got->sequence : 0;
      if (reference.in_memory[i] != 0) {
        const bool flushed = phase == Phase::kStop && v == reference.in_memory[i];
        ASSERT_TRUE(v == 0 || flushed) << K(i) << " reads as version " << v << " " << when;
      } else {
        ASSERT_EQ(v, reference.durable[i]) << K(i) << " " << when;
      }
      if (got.ok()) {
        ASSERT_TRUE(got->value == ValueOf(v)) << K(i) << ": wrong bytes " << when;
      }
    }
  }

  // For every changing file operation of `phase` (a run without a crash counts them) and each
  // death: the workload replayed, the process dead at that operation, the tier reopened and
  // checked; then stopped cleanly and reopened from its checkpoint, and checked again.
  void CrashEverywhere(Phase phase) {
    keys_.clear();
    for (int i = 0; i < kKeys; ++i)
      keys_.push_back(K(i));
    const uint32_t seed = std::random_device{}();
    std::printf("seed %u\n", seed);
    SCOPED_TRACE("seed " + std::to_string(seed));
    Reference reference;
    ASSERT_NO_FATAL_FAILURE(Workload(seed, &reference));
    // The folder as the workload left it, the tier running: every run starts from a copy, as a
    // restart (a scan) would.
    std::filesystem::copy(dir_, dir_ + ".start", std::filesystem::copy_options::recursive);
    auto start = [&] {
      tier_.reset();
      std::filesystem::remove_all(dir_);
      std::filesystem::copy(dir_ + ".start", dir_, std::filesystem::copy_options::recursive);
      Open();
    };
    ASSERT_NO_FATAL_FAILURE(start());
    const uint64_t before = power_->operations();
    const DiskTierStats stats_before = tier_->stats();
    ASSERT_NO_FATAL_FAILURE(RunPhase(phase, reference));
    if (phase == Phase::kCompaction) {
      // The phase has work: segments were compacted (its file operations are what is tested).
      ASSERT_GT(tier_->stats().compacted_segments, stats_before.compacted_segments);
    }
    // The folder's model outlives the tier (a stop destroys it): counted through a handle.
    const uint64_t operations = operations_after_ - before;
    ASSERT_NO_FATAL_FAILURE(Open());
    if (phase == Phase::kStop) {
      ASSERT_TRUE(tier_->stats().restored_from_checkpoint);
    }
    ASSERT_NO_FATAL_FAILURE(Check(phase, reference, "after the phase without a crash"));
    ASSERT_GT(operations, 4u);
    std::printf("%llu file operations to crash at\n", static_cast<unsigned long long>(operations));
    std::mt19937 random(seed);
    for (uint64_t n = 1; n <= operations; ++n) {
      for (Death death : {Death::kKill, Death::kPowerLoss}) {
        const std::string when =
            std::string(death == Death::kKill ? "after a kill" : "after a power loss") +
            " at operation " + std::to_string(n) + " of " + std::to_string(operations);
        SCOPED_TRACE(when);
        ASSERT_NO_FATAL_FAILURE(start());
        // The model outlives the folder, which the tier's stop destroys.
        PowerLossFolder::Handle dying = power_->handle();
        power_->CrashAtOperation(n);
        ASSERT_NO_FATAL_FAILURE(RunPhase(phase, reference));
        ASSERT_TRUE(dying.dead()) << "the phase ended before its operation " << n;
        tier_.reset();  // what is left of the process: its calls all fail
        if (death == Death::kPowerLoss) dying.SimulatePowerLoss(random());
        ASSERT_NO_FATAL_FAILURE(Open());
        EXPECT_FALSE(tier_->stats().restored_from_checkpoint);
        ASSERT_NO_FATAL_FAILURE(Check(phase, reference, when));
        ASSERT_NO_FATAL_FAILURE(Open());  // a clean stop: from the checkpoint now
        EXPECT_TRUE(tier_->stats().restored_from_checkpoint);
        ASSERT_NO_FATAL_FAILURE(Check(phase, reference, when + ", then a clean stop"));
      }
    }
  }

  std::string dir_;
  PowerLossFolder* power_ = nullptr;
  std::unique_ptr<DiskTier> tier_;
  uint64_t sequence_ = 0;
  std::vector<std::string> keys_;  // K(i), kept for the flush's views
  uint64_t operations_after_ = 0;  // the model's count when the last phase ended
};

TEST_F(DiskCrashTest, AKillOrPowerLossAtAnyOperationOfACompactionLosesAndRevivesNothing) {
  CrashEverywhere(Phase::kCompaction);
}

TEST_F(DiskCrashTest, AKillOrPowerLossAtAnyOperationOfACleanStopLeavesEachKeyRight) {
  CrashEverywhere(Phase::kStop);
}

}  // namespace
}  // namespace kvport::store
