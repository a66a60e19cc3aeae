// SPDX-License-Identifier: Apache-2.0
// The disk tier's folder as an on-disk format (docs/store.md, "The folder"): links and entries
// that are not regular files never opened, unsafe folders refused, one holder at a time, the
// superblock (its segment size kept across an option change, its clean flag, a foreign one
// refused), quarantine of unreadable segments, preallocation that evicts the tier's own oldest
// segments on a full disk, a file size limit that fails a put instead of killing the process,
// and a deleted key that stays deleted across a simulated power loss.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "faulty_file.h"
#include "power_loss_folder.h"
#include "store/disk_record.h"
#include "store/disk_tier.h"
#include "store/file_io.h"
#include "store/superblock.h"
#include "store_test_util.h"

namespace kvport::store {
namespace {

using testing::Bytes;
using testing::FaultyFile;
using testing::FaultyFolder;
using ::testing::HasSubstr;
using testing::PowerLossFolder;

constexpr uint64_t kSegment = 128 << 10;
constexpr uint64_t kNow = 1000;

using testing::ReadAll;
using testing::WriteAll;

class DiskFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "kvport_disk_folder_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::remove_all(dir_ + ".outside");
  }
  void TearDown() override {
    tier_.reset();
    std::filesystem::remove_all(dir_);
    std::filesystem::remove_all(dir_ + ".outside");
  }

  // (Re)opens the tier over the folder, as a restarted node does; the folder's faults are set
  // by `setup` before the tier opens.
  Result<std::unique_ptr<DiskTier>> TryOpen(uint64_t segment = kSegment,
                                            uint64_t capacity = 16 * kSegment,
                                            const std::function<void(FaultyFolder&)>& setup = {}) {
    tier_.reset();
    folder_ = nullptr;
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<SegmentFolder> real, OpenSegmentFolder(dir_));
    auto folder = std::make_unique<FaultyFolder>(std::move(real));
    if (setup) setup(*folder);
    FaultyFolder* raw = folder.get();
    DiskTierOptions options;
    options.capacity_bytes = capacity;
    options.segment_bytes = segment;
    Result<std::unique_ptr<DiskTier>> tier = DiskTier::Open(std::move(folder), options, kNow);
    if (tier.ok()) {
      folder_ = raw;
      sequence_ = (*tier)->last_sequence();
    }
    return tier;
  }
  void Open(uint64_t segment = kSegment, uint64_t capacity = 16 * kSegment,
            const std::function<void(FaultyFolder&)>& setup = {}) {
    Result<std::unique_ptr<DiskTier>> tier = TryOpen(segment, capacity, setup);
    ASSERT_TRUE(tier.ok()) << tier.status().ToString();
    tier_ = std::move(tier).value();
  }

  // Objects of one 8 KiB record each (16 to a 128 KiB segment): key "k<i>", value
  // Bytes(seed, 3000).
  static std::string K(int i) { return "k" + std::to_string(i); }
  Status PutSmall(int i, char seed) {
    const std::vector<char> value = Bytes(seed, 3000);
    return tier_->Put("ns", K(i), "", value, 0, ++sequence_);
  }
  Status Erase(const std::string& key) { return tier_->Erase("ns", key, ++sequence_); }
  bool Holds(int i, char seed) {
    Result<DiskObject> got = tier_->Get("ns", K(i), kNow);
    return got.ok() && got->value == Bytes(seed, 3000);
  }

  size_t SegmentFiles() const {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      n += e.path().extension() == ".seg" ? 1 : 0;
    return n;
  }
  std::string SegmentPath(uint64_t number) const {
    char name[32];
    std::snprintf(name, sizeof(name), "/%016llx.seg", static_cast<unsigned long long>(number));
    return dir_ + name;
  }

  // (Re)opens the tier of `capacity` over a power-loss model of the folder (*power), as a
  // restarted node does: its versions numbered above everything on disk.
  void OpenOverPowerLossModel(uint64_t capacity, PowerLossFolder** power) {
    tier_.reset();
    Result<std::unique_ptr<SegmentFolder>> real = OpenSegmentFolder(dir_);
    ASSERT_TRUE(real.ok()) << real.status().ToString();
    auto folder = std::make_unique<PowerLossFolder>(std::move(real).value());
    *power = folder.get();
    DiskTierOptions options;
    options.segment_bytes = kSegment;
    options.capacity_bytes = capacity;
    Result<std::unique_ptr<DiskTier>> tier = DiskTier::Open(std::move(folder), options, kNow);
    ASSERT_TRUE(tier.ok()) << tier.status().ToString();
    tier_ = std::move(tier).value();
    sequence_ = std::max(sequence_, tier_->last_sequence());
  }

  // In a child: puts past a file size limit; exits 0 when one failed (and the process lived).
  void PutPastTheFileSizeLimit() {
    const rlimit limit{kSegment / 2, kSegment / 2};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) std::_Exit(3);
    Open();
    if (tier_ == nullptr) std::_Exit(4);
    const std::vector<char> value = Bytes('x', 3000);
    Status put = Status::Ok();
    for (int i = 0; i < 32 && put.ok(); ++i)  // past the limit
      put = tier_->Put("ns", K(i), "", value, 0, ++sequence_);
    std::fprintf(stderr, "put: %s\n", put.ToString().c_str());
    tier_.reset();
    // Failed for the limit (EFBIG), and the process lived to say so.
    std::_Exit(!put.ok() && put.message().find("File too large") != std::string::npos ? 0 : 1);
  }

  std::string dir_;
  FaultyFolder* folder_ = nullptr;
  std::unique_ptr<DiskTier> tier_;
  uint64_t sequence_ = 0;
};

TEST_F(DiskFolderTest, ALinkPlantedUnderASegmentsNameIsNeverFollowed) {
  Open();
  // Another file of the node's user, and a link to it where the tier's first segment goes.
  const std::string victim = dir_ + ".outside";
  WriteAll(victim, "precious bytes");
  ASSERT_EQ(::symlink(victim.c_str(), SegmentPath(1).c_str()), 0);
  const Status refused = PutSmall(0, 'a');
  EXPECT_EQ(refused.code(), StatusCode::kIoError);
  EXPECT_THAT(refused.message(), HasSubstr("already exists"));
  EXPECT_EQ(ReadAll(victim), "precious bytes");
  // The name is not tried again: the next segment takes the next one.
  ASSERT_TRUE(PutSmall(0, 'a').ok());
  EXPECT_TRUE(std::filesystem::exists(SegmentPath(2)));
  // At a restart the link is listed like a segment, refused, and moved aside.
  Open();
  EXPECT_EQ(tier_->stats().quarantined, 1u);
  EXPECT_TRUE(Holds(0, 'a'));
  EXPECT_EQ(ReadAll(victim), "precious bytes");
  EXPECT_TRUE(std::filesystem::is_symlink(SegmentPath(1) + ".quarantined"));
  ASSERT_TRUE(PutSmall(1, 'b').ok());
  EXPECT_EQ(ReadAll(victim), "precious bytes");
}

TEST_F(DiskFolderTest, AFolderNamedLikeASegmentIsQuarantinedAndTheTierOpensWithTheRest) {
  Open();
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(PutSmall(i, 'a').ok());  // segments 1 and 2
  tier_.reset();
  ASSERT_TRUE(std::filesystem::create_directory(SegmentPath(7)));
  Open();
  EXPECT_EQ(tier_->stats().quarantined, 1u);
  EXPECT_EQ(tier_->stats().restored, 20u);
  for (int i = 0; i < 20; ++i)
    EXPECT_TRUE(Holds(i, 'a')) << i;
  EXPECT_TRUE(std::filesystem::is_directory(SegmentPath(7) + ".quarantined"));
  // A new segment takes a number above every one seen.
  for (int i = 20; i < 40; ++i)
    ASSERT_TRUE(PutSmall(i, 'b').ok());
  EXPECT_TRUE(std::filesystem::exists(SegmentPath(8)));
  Open();
  EXPECT_EQ(tier_->stats().quarantined, 0u);
  EXPECT_EQ(tier_->stats().restored, 40u);
}

TEST_F(DiskFolderTest, SegmentsThatCannotBeOpenedOrScannedAreQuarantinedNotFatal) {
  Open();
  for (int i = 0; i < 48; ++i)
    ASSERT_TRUE(PutSmall(i, 'a').ok());  // segments 1, 2, 3: k0..k15, k16..k31, k32..k47
  tier_.reset();
  Open(kSegment, 16 * kSegment, [](FaultyFolder& folder) {
    folder.FailOpen(1);       // EIO at open
    folder.FailFirstRead(2);  // EIO in its scan
  });
  const DiskTierStats stats = tier_->stats();
  EXPECT_EQ(stats.quarantined, 2u);
  EXPECT_EQ(stats.restored, 16u);
  for (int i = 0; i < 32; ++i)
    EXPECT_FALSE(tier_->Contains("ns", K(i), kNow)) << i;
  for (int i = 32; i < 48; ++i)
    EXPECT_TRUE(Holds(i, 'a')) << i;
  EXPECT_FALSE(std::filesystem::exists(SegmentPath(1)));
  EXPECT_TRUE(std::filesystem::exists(SegmentPath(1) + ".quarantined"));
  EXPECT_TRUE(std::filesystem::exists(SegmentPath(2) + ".quarantined"));
  ASSERT_TRUE(PutSmall(100, 'n').ok());
  EXPECT_TRUE(Holds(100, 'n'));
}

TEST_F(DiskFolderTest, AFolderOthersCanWriteIsRefusedWithTheFix) {
  ASSERT_TRUE(OpenSegmentFolder(dir_).ok());
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  Result<std::unique_ptr<SegmentFolder>> refused = OpenSegmentFolder(dir_);
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.status().message(), HasSubstr("writable by its group and others"));
  EXPECT_THAT(refused.status().message(), HasSubstr("chmod 0700 " + dir_));
  ASSERT_EQ(::chmod(dir_.c_str(), 0720), 0);
  EXPECT_THAT(OpenSegmentFolder(dir_).status().message(), HasSubstr("writable by its group"));
  ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);
  Result<std::unique_ptr<SegmentFolder>> accepted = OpenSegmentFolder(dir_);
  EXPECT_TRUE(accepted.ok()) << accepted.status().ToString();
  if (::geteuid() == 0) {  // only root can give a folder away
    accepted = Status::Internal("closed");
    ASSERT_EQ(::chown(dir_.c_str(), 65534, 65534), 0);
    refused = OpenSegmentFolder(dir_);
    EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
    EXPECT_THAT(refused.status().message(), HasSubstr("belongs to uid 65534"));
  }
}

TEST_F(DiskFolderTest, ASecondHolderOfTheFolderIsRefusedNamingThePid) {
  Result<std::unique_ptr<SegmentFolder>> first = OpenSegmentFolder(dir_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  Result<std::unique_ptr<SegmentFolder>> second = OpenSegmentFolder(dir_);
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(dir_));
  EXPECT_THAT(second.status().message(), HasSubstr("pid " + std::to_string(::getpid())));
  first = Status::Internal("closed");  // the lock goes with it
  second = OpenSegmentFolder(dir_);
  EXPECT_TRUE(second.ok()) << second.status().ToString();
}

TEST_F(DiskFolderTest, EachSegmentIsReservedAndAFullDiskEvictsTheTiersOwnOldestFirst) {
  Open();
  for (int i = 0; i < 40; ++i)
    ASSERT_TRUE(PutSmall(i, 'a').ok());  // segments 1, 2 full, 3 half
  {
    // Segment 3's blocks are reserved whole, its size what was written.
    struct stat st {};
    ASSERT_EQ(::stat(SegmentPath(3).c_str(), &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), kSegment / 2);
    EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, kSegment);
  }
  for (int i = 40; i < 48; ++i)
    ASSERT_TRUE(PutSmall(i, 'a').ok());  // segment 3 full
  // The next segment's reservation finds the disk full twice: segments 1 and 2 make room.
  tier_.reset();
  Open(kSegment, 16 * kSegment, [](FaultyFolder& folder) { folder.FailAllocates(2); });
  ASSERT_TRUE(PutSmall(48, 'b').ok());
  DiskTierStats stats = tier_->stats();
  EXPECT_EQ(stats.evicted_segments, 2u);
  EXPECT_EQ(stats.segments, 2u);
  for (int i = 0; i < 32; ++i)
    EXPECT_FALSE(tier_->Contains("ns", K(i), kNow)) << i;
  for (int i = 32; i < 48; ++i)
    EXPECT_TRUE(Holds(i, 'a')) << i;
  EXPECT_TRUE(Holds(48, 'b'));
  EXPECT_EQ(SegmentFiles(), 2u);
}

TEST_F(DiskFolderTest, AFullDiskWithNothingToEvictFailsThePutAndLeavesNoSegment) {
  Open(kSegment, 16 * kSegment, [](FaultyFolder& folder) { folder.FailAllocates(1); });
  EXPECT_EQ(PutSmall(0, 'a').code(), StatusCode::kNoSpace);
  EXPECT_EQ(tier_->stats().write_errors, 1u);
  EXPECT_EQ(tier_->stats().segments, 0u);
  EXPECT_EQ(SegmentFiles(), 0u);
  ASSERT_TRUE(PutSmall(0, 'a').ok());
  EXPECT_TRUE(Holds(0, 'a'));
}

TEST_F(DiskFolderTest, ALowerSegmentSizeInTheOptionsLosesNothingAtARestart) {
  Open(kSegment, 16 * kSegment);
  for (int i = 0; i < 40; ++i)
    ASSERT_TRUE(PutSmall(i, 'a').ok());  // three segments of 128 KiB, the third half full
  // A lower capacity made the node derive a smaller segment size: the folder's stays.
  Open(kSegment / 4, 8 * kSegment);
  DiskTierStats stats = tier_->stats();
  EXPECT_EQ(stats.restored, 40u);
  EXPECT_EQ(stats.torn_tails, 0u);
  EXPECT_EQ(stats.dropped_records, 0u);
  for (int i = 0; i < 40; ++i)
    EXPECT_TRUE(Holds(i, 'a')) << i;
  for (int i = 40; i < 50; ++i)
    ASSERT_TRUE(PutSmall(i, 'b').ok());  // the third segment filled at 128 KiB
  Open(kSegment / 4, 8 * kSegment);
  EXPECT_EQ(tier_->stats().restored, 50u);
  for (int i = 40; i < 50; ++i)
    EXPECT_TRUE(Holds(i, 'b')) << i;
  // A capacity below two of the folder's segments is refused, saying why.
  Result<std::unique_ptr<DiskTier>> refused = TryOpen(kSegment / 4, kSegment);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("fewer than two segments of 131072 bytes"));
  EXPECT_THAT(refused.status().message(), HasSubstr("SUPERBLOCK"));
  // An emptied folder starts over at the options' size.
  tier_.reset();
  for (uint64_t n = 1; n <= 4; ++n)
    std::filesystem::remove(SegmentPath(n));
  Open(kSegment / 4, kSegment);
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE(PutSmall(i, 'c').ok());  // two segments of 32 KiB
  EXPECT_EQ(tier_->stats().segments, 2u);
}

TEST_F(DiskFolderTest, ASuperblockThisBuildCannotReadRefusesTheOpenAndTouchesNothing) {
  Open();
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(PutSmall(i, 'a').ok());
  tier_.reset();
  const std::string path = dir_ + "/SUPERBLOCK";
  const std::string good = ReadAll(path);
  const std::string segment = ReadAll(SegmentPath(1));
  ASSERT_TRUE(DecodeSuperblock(good).ok());
  std::string newer_bytes;
  {
    Superblock newer;
    newer.format_version = kSuperblockVersion + 1;
    newer.block_bytes = kDiskBlock;
    newer.segment_bytes = kSegment;
    newer_bytes = EncodeSuperblock(newer);
  }
  std::string flipped = good;
  flipped[16] = static_cast<char>(flipped[16] ^ 1);  // the segment size
  const std::map<std::string, std::pair<StatusCode, std::string>> cases = {
      {std::string(40, 'x'), {StatusCode::kCorruption, "not a kvport superblock"}},
      {flipped, {StatusCode::kCorruption, "checksum fails"}},
      {newer_bytes, {StatusCode::kNotSupported, "newer than this build's"}},
  };
  for (const auto& [bytes, expected] : cases) {
    SCOPED_TRACE(expected.second);
    WriteAll(path, bytes);
    Result<std::unique_ptr<DiskTier>> refused = TryOpen();
    EXPECT_EQ(refused.status().code(), expected.first) << refused.status().ToString();
    EXPECT_THAT(refused.status().message(), HasSubstr(expected.second));
    EXPECT_THAT(refused.status().message(), HasSubstr(path));
    EXPECT_EQ(ReadAll(path), bytes);
    EXPECT_EQ(ReadAll(SegmentPath(1)), segment);
    EXPECT_TRUE(std::filesystem::exists(SegmentPath(2)));
  }
  WriteAll(path, good);
  Open();
  EXPECT_EQ(tier_->stats().restored, 20u);
}

TEST_F(DiskFolderTest, AFolderWithoutASuperblockIsAdoptedAndGetsOne) {
  Open();
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(PutSmall(i, 'a').ok());
  tier_.reset();
  ASSERT_TRUE(std::filesystem::remove(dir_ + "/SUPERBLOCK"));  // as an earlier version left it
  Open();
  EXPECT_EQ(tier_->stats().restored, 20u);
  EXPECT_FALSE(tier_->stats().clean_start);  // not recorded
  Result<Superblock> written = DecodeSuperblock(ReadAll(dir_ + "/SUPERBLOCK"));
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->segment_bytes, kSegment);
  EXPECT_FALSE(written->clean);  // while the tier runs
  tier_.reset();
  written = DecodeSuperblock(ReadAll(dir_ + "/SUPERBLOCK"));
  ASSERT_TRUE(written.ok());
  EXPECT_TRUE(written->clean);
}

TEST_F(DiskFolderTest, CleanStartSaysWhetherTheLastStopWasClean) {
  Open();
  EXPECT_TRUE(tier_->stats().clean_start);  // a new folder
  ASSERT_TRUE(PutSmall(0, 'a').ok());
  Open();  // the destructor ran
  EXPECT_TRUE(tier_->stats().clean_start);
  // A kill -9: the process gone without its destructor, the superblock as the tier left it
  // while running.
  const std::string running = ReadAll(dir_ + "/SUPERBLOCK");
  tier_.reset();
  WriteAll(dir_ + "/SUPERBLOCK", running);
  Open();
  EXPECT_FALSE(tier_->stats().clean_start);
  EXPECT_TRUE(Holds(0, 'a'));
}

// A write past RLIMIT_FSIZE raises SIGXFSZ; the folder ignores it, so that the write fails
// (EFBIG: a failed put) and the process lives on. In a child, whose limit does not leak.
TEST_F(DiskFolderTest, AFileSizeLimitFailsThePutInsteadOfKillingTheProcess) {
  // In a child of its own, which keeps its file size limit to itself: forked without an exec
  // (which qemu-user, the aarch64 lane's, cannot do), and starting no thread.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) PutPastTheFileSizeLimit();  // exits
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "its put did not fail with EFBIG (see its stderr)";
}

// A deleted key whose tombstone compaction dropped, after the older segment holding its value
// was removed, never comes back after a power loss: whichever of the removals not yet synced a
// power loss undoes.
TEST_F(DiskFolderTest, ADeletedKeyNeverReturnsAfterAPowerLoss) {
  uint64_t cases = 1;
  for (uint64_t returning = 0; returning < cases; ++returning) {
    SCOPED_TRACE("power loss case " + std::to_string(returning));
    tier_.reset();
    std::filesystem::remove_all(dir_);
    PowerLossFolder* power = nullptr;
    auto open = [&] { OpenOverPowerLossModel(16 * kSegment, &power); };
    ASSERT_NO_FATAL_FAILURE(open());
    // Segment 1: "gone" and k1..k15. Segment 2: gone's tombstone and b0..b14.
    ASSERT_TRUE(tier_->Put("ns", "gone", "", Bytes('g', 3000), 0, ++sequence_).ok());
    for (int i = 1; i < 16; ++i)
      ASSERT_TRUE(PutSmall(i, 'a').ok());
    ASSERT_TRUE(Erase("gone").ok());
    for (int i = 0; i < 15; ++i)
      ASSERT_TRUE(PutSmall(200 + i, 'b').ok());
    ASSERT_NO_FATAL_FAILURE(open());  // a clean stop: all of it durable
    // Segment 3: k1..k15 again, so that segment 1 is all dead; then b0..b14 deleted (two
    // tombstones in segment 3, the rest in segment 4), so that segment 2 is all dead but for
    // gone's tombstone.
    for (int i = 1; i < 16; ++i)
      ASSERT_TRUE(PutSmall(i, 'A').ok());
    for (int i = 0; i < 15; ++i)
      ASSERT_TRUE(Erase(K(200 + i)).ok());
    // Compaction removes segment 1 (nothing live in it), then segment 2, the oldest now: its
    // tombstone of "gone" is dropped, nothing older being left.
    for (uint64_t removed = 1; removed <= 2; ++removed) {
      Result<CompactionProgress> step = tier_->CompactStep(1 << 20, kNow);
      ASSERT_TRUE(step.ok()) << step.status().ToString();
      ASSERT_TRUE(step->finished_segment);
      ASSERT_FALSE(std::filesystem::exists(SegmentPath(removed)));
    }
    ASSERT_EQ(tier_->stats().compacted_bytes, 0u);  // the tombstone was not carried forward
    ASSERT_FALSE(tier_->Contains("ns", "gone", kNow));
    cases = uint64_t{1} << power->UnsyncedRemovals();
    power->SimulatePowerLoss(returning);
    ASSERT_NO_FATAL_FAILURE(open());
    EXPECT_FALSE(tier_->Contains("ns", "gone", kNow));
    EXPECT_FALSE(tier_->Get("ns", "gone", kNow).ok());
  }
}

// The tier driven as a node drives it, against a model, through power losses, kills and clean
// stops at random points. A commit ends the key's older versions at once (Erase with the new
// version's number) and writes the version later, if at all (when memory evicts it); a delete
// ends them with a number of its own; compaction runs between. After every end each key reads
// as its newest version written or a miss: never one a commit or a delete ended, never wrong
// bytes. Seeded, the seeds printed.
TEST_F(DiskFolderTest, AfterPowerLossesKillsAndStopsEveryKeyIsItsNewestVersionOrAMiss) {
  constexpr int kKeys = 24;
  constexpr int kSteps = 500;
  auto value_of = [](uint64_t version) {
    return Bytes(static_cast<char>(version), 3000 + (version % 3) * 4096);
  };
  for (int run = 0; run < 3; ++run) {
    const uint32_t seed = std::random_device{}();
    std::printf("seed %u\n", seed);
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 random(seed);
    tier_.reset();
    std::filesystem::remove_all(dir_);
    PowerLossFolder* power = nullptr;
    auto open = [&] { OpenOverPowerLossModel(8 * kSegment, &power); };
    ASSERT_NO_FATAL_FAILURE(open());
    // Per key: the number below which every version ended (commits and deletes acknowledged),
    // the versions written to the tier, and the one memory holds (committed, not yet written).
    std::vector<uint64_t> ended_below(kKeys, 0);
    std::vector<std::set<uint64_t>> written(kKeys);
    std::vector<uint64_t> in_memory(kKeys, 0);
    uint64_t hits = 0;
    auto check = [&](const char* after) {
      for (int i = 0; i < kKeys; ++i) {
        Result<DiskObject> got = tier_->Get("ns", K(i), kNow);
        if (!got.ok()) continue;  // a miss is always allowed
        const uint64_t v = got->sequence;
        ASSERT_GE(v, ended_below[i])
            << K(i) << ": a version a commit or a delete ended, after " << after;
        ASSERT_TRUE(written[i].count(v) != 0) << K(i) << ": version " << v << " never written";
        ASSERT_TRUE(got->value == value_of(v)) << K(i) << ": wrong bytes after " << after;
        ++hits;
      }
    };
    for (int step = 0; step < kSteps; ++step) {
      const int i = static_cast<int>(random() % kKeys);
      const uint32_t op = random() % 100;
      if (op < 35) {  // a commit: older versions end now, this one is written on eviction
        const uint64_t v = ++sequence_;
        ASSERT_TRUE(tier_->Erase("ns", K(i), v).ok());
        ended_below[i] = v;
        in_memory[i] = v;
      } else if (op < 65) {  // memory evicts what it holds of the key
        if (in_memory[i] == 0) continue;
        const uint64_t v = std::exchange(in_memory[i], 0);
        Status put = tier_->Put("ns", K(i), "", value_of(v), 0, v);
        ASSERT_TRUE(put.ok()) << put.ToString();
        written[i].insert(v);
      } else if (op < 75) {  // a delete
        const uint64_t v = ++sequence_;
        ASSERT_TRUE(tier_->Erase("ns", K(i), v).ok());
        ended_below[i] = v;
        in_memory[i] = 0;
      } else if (op < 88) {
        Result<CompactionProgress> compacted = tier_->CompactStep(64 << 10, kNow);
        ASSERT_TRUE(compacted.ok()) << compacted.status().ToString();
      } else if (op < 92) {
        ASSERT_NO_FATAL_FAILURE(check("running"));
      } else {
        const uint32_t end = random() % 4;
        if (end == 0) {  // a power loss: whichever unsynced folder changes it undoes
          const uint64_t returning = random();
          power->SimulatePowerLoss(returning);
        } else if (end == 1 || end == 3) {  // a stop: memory's versions written first
          for (int k = 0; k < kKeys; ++k) {
            if (in_memory[k] == 0) continue;
            written[k].insert(in_memory[k]);
            ASSERT_TRUE(tier_->Put("ns", K(k), "", value_of(in_memory[k]), 0, in_memory[k]).ok());
          }
        } else {  // a kill: the process gone before the tier's stop wrote anything
          power->CrashAtOperation(1);
        }
        if (end == 3) {
          // A stop cut short by a kill at one of its first file operations (its syncs, the
          // checkpoint's, the superblock's), maybe a power loss after: the checkpoint of an
          // earlier stop must not be what the next start believes.
          PowerLossFolder::Handle model = power->handle();
          power->CrashAtOperation(1 + random() % 12);
          tier_.reset();
          if (random() % 2 == 0) model.SimulatePowerLoss(random());
        }
        std::fill(in_memory.begin(), in_memory.end(), 0);
        ASSERT_NO_FATAL_FAILURE(open());
        // A clean stop's checkpoint is what the start loads; after a crash, the scan.
        if (end == 1) {
          EXPECT_TRUE(tier_->stats().restored_from_checkpoint);
        } else if (end != 3) {
          EXPECT_FALSE(tier_->stats().restored_from_checkpoint);
        }
        ASSERT_NO_FATAL_FAILURE(check(end == 0   ? "a power loss"
                                      : end == 1 ? "a clean stop"
                                      : end == 2 ? "a kill"
                                                 : "a stop cut short"));
      }
    }
  }
}

}  // namespace
}  // namespace kvport::store
