// SPDX-License-Identifier: Apache-2.0
// The disk tier (store/disk_tier.h) on real files in a temporary folder: round trip, overwrite
// and delete surviving a restart, eviction of the oldest segments at the capacity, expiry, a
// corrupt value and a torn tail, a full disk and short writes through the file seam.
#include "store/disk_tier.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "faulty_file.h"
#include "store/disk_record.h"
#include "store/file_io.h"

namespace kvport::store {
namespace {

using testing::FaultyFile;
using ::testing::HasSubstr;

constexpr uint64_t kSegment = 64 << 10;

std::vector<char> Bytes(char seed, size_t n) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>(seed + i * 7 + (i >> 9));
  return v;
}

// The real folder, its files wrapped so that the test can make the newest one's writes fail.
class FaultyFolder final : public SegmentFolder {
 public:
  explicit FaultyFolder(std::unique_ptr<SegmentFolder> real) : real_(std::move(real)) {}
  Result<std::vector<uint64_t>> List() override { return real_->List(); }
  Result<std::unique_ptr<File>> Open(uint64_t number, bool create) override {
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<File> file, real_->Open(number, create));
    auto faulty = std::make_unique<FaultyFile>(std::move(file));
    newest_ = faulty.get();
    return std::unique_ptr<File>(std::move(faulty));
  }
  Status Remove(uint64_t number) override { return real_->Remove(number); }
  std::string PathOf(uint64_t number) const override { return real_->PathOf(number); }
  FaultyFile* newest() { return newest_; }

 private:
  std::unique_ptr<SegmentFolder> real_;
  FaultyFile* newest_ = nullptr;  // owned by the tier
};

class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "kvport_disk_tier_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    tier_.reset();
    std::filesystem::remove_all(dir_);
  }

  // (Re)opens the tier over the folder, as a restarted node does.
  void Open(uint64_t capacity = 16 * kSegment, uint64_t now_ms = 1000) {
    tier_.reset();
    Result<std::unique_ptr<SegmentFolder>> real = OpenSegmentFolder(dir_);
    ASSERT_TRUE(real.ok()) << real.status().ToString();
    auto folder = std::make_unique<FaultyFolder>(std::move(real).value());
    folder_ = folder.get();
    DiskTierOptions options;
    options.capacity_bytes = capacity;
    options.segment_bytes = kSegment;
    Result<std::unique_ptr<DiskTier>> tier = DiskTier::Open(std::move(folder), options, now_ms);
    ASSERT_TRUE(tier.ok()) << tier.status().ToString();
    tier_ = std::move(tier).value();
  }

  Status Put(std::string_view key, const std::vector<char>& value, std::string_view meta = "",
             uint64_t expiry_ms = 0, std::string_view ns = "ns") {
    return tier_->Put(ns, key, meta, value, expiry_ms);
  }

  size_t SegmentFiles() const {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      n += e.path().extension() == ".seg" ? 1 : 0;
    return n;
  }

  std::string dir_;
  FaultyFolder* folder_ = nullptr;
  std::unique_ptr<DiskTier> tier_;
};

TEST_F(DiskTierTest, ObjectsSurviveARestartWithTheirLatestValueAndDeletesStayDeleted) {
  Open();
  ASSERT_TRUE(Put("a", Bytes('a', 10000), "meta-a").ok());
  ASSERT_TRUE(Put("b", Bytes('b', 1)).ok());
  ASSERT_TRUE(Put("c", Bytes('c', 30000)).ok());
  ASSERT_TRUE(Put("a", Bytes('A', 20000), "meta-A").ok());  // overwritten
  ASSERT_TRUE(tier_->Erase("ns", "b").ok());
  ASSERT_TRUE(Put("c", Bytes('x', 5), "", 0, "other").ok());  // same key, another namespace
  ASSERT_TRUE(Put("empty", {}).ok());

  for (int restart = 0; restart < 2; ++restart) {
    SCOPED_TRACE(restart == 0 ? "before the restart" : "after the restart");
    Result<DiskObject> a = tier_->Get("ns", "a", 1000);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->value, Bytes('A', 20000));
    EXPECT_EQ(a->meta, "meta-A");
    EXPECT_EQ(tier_->Get("ns", "b", 1000).status().code(), StatusCode::kNotFound);
    EXPECT_EQ(tier_->Get("ns", "c", 1000)->value, Bytes('c', 30000));
    EXPECT_EQ(tier_->Get("other", "c", 1000)->value, Bytes('x', 5));
    EXPECT_TRUE(tier_->Get("ns", "empty", 1000)->value.empty());
    EXPECT_TRUE(tier_->Contains("ns", "a", 1000));
    EXPECT_FALSE(tier_->Contains("ns", "b", 1000));
    EXPECT_EQ(tier_->stats().objects, 4u);
    Open();
  }
  EXPECT_EQ(tier_->stats().restored, 4u);
  EXPECT_EQ(tier_->stats().dropped_records, 0u);
}

TEST_F(DiskTierTest, TheOldestSegmentsGoAtTheCapacity) {
  Open(4 * kSegment);
  // 40 values of 12 KiB (16 KiB records): 10 segments' worth into room for 4.
  for (int i = 0; i < 40; ++i)
    ASSERT_TRUE(Put("k" + std::to_string(i), Bytes(static_cast<char>(i), 12 << 10)).ok()) << i;
  const DiskTierStats s = tier_->stats();
  EXPECT_LE(s.segments, 4u);
  EXPECT_LE(SegmentFiles(), 4u);
  EXPECT_LE(s.disk_bytes, 4 * kSegment);
  EXPECT_GT(s.evicted_segments, 0u);
  EXPECT_EQ(s.objects + s.evicted_objects, 40u);
  EXPECT_EQ(tier_->Get("ns", "k0", 1000).status().code(), StatusCode::kNotFound);  // oldest
  Result<DiskObject> last = tier_->Get("ns", "k39", 1000);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ(last->value, Bytes(39, 12 << 10));
  // A value rewritten late lives on although its first record went with an old segment.
  ASSERT_TRUE(Put("k1", Bytes('r', 100)).ok());
  for (int i = 40; i < 50; ++i)
    ASSERT_TRUE(Put("k" + std::to_string(i), Bytes(static_cast<char>(i), 12 << 10)).ok());
  EXPECT_EQ(tier_->Get("ns", "k1", 1000)->value, Bytes('r', 100));
  const uint64_t live = tier_->stats().objects;
  Open(4 * kSegment);
  EXPECT_EQ(tier_->stats().restored, live);
  EXPECT_EQ(tier_->Get("ns", "k1", 1000)->value, Bytes('r', 100));
  // Larger than a segment: refused, nothing else lost.
  EXPECT_EQ(Put("huge", Bytes('h', kSegment)).code(), StatusCode::kNoSpace);
  EXPECT_EQ(tier_->stats().objects, live);
}

TEST_F(DiskTierTest, ExpiredObjectsAreMissesAndStayGoneAfterARestart) {
  Open();
  ASSERT_TRUE(Put("short", Bytes('s', 100), "", /*expiry_ms=*/1500).ok());
  ASSERT_TRUE(Put("long", Bytes('l', 100), "", /*expiry_ms=*/9000).ok());
  EXPECT_TRUE(tier_->Get("ns", "short", 1000).ok());
  EXPECT_EQ(tier_->Get("ns", "short", 2000).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(tier_->Contains("ns", "short", 2000));
  Open(16 * kSegment, /*now_ms=*/2000);
  EXPECT_FALSE(tier_->Contains("ns", "short", 2000));
  EXPECT_EQ(tier_->Get("ns", "long", 2000)->value, Bytes('l', 100));
  EXPECT_EQ(tier_->stats().restored, 1u);
}

TEST_F(DiskTierTest, ACorruptValueIsAMissNeverWrongBytes) {
  Open();
  ASSERT_TRUE(Put("victim", Bytes('v', 9000)).ok());
  ASSERT_TRUE(Put("bystander", Bytes('b', 9000)).ok());
  // A flipped byte in the middle of the first record's value, as a bad disk would.
  {
    Result<std::unique_ptr<File>> file = OpenPosixFile(folder_->PathOf(1), false);
    ASSERT_TRUE(file.ok());
    const char bad = 0x5a;
    ASSERT_TRUE((*file)->WriteAt(4000, &bad, 1).ok());
  }
  Result<DiskObject> victim = tier_->Get("ns", "victim", 1000);
  EXPECT_EQ(victim.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(victim.status().message(), HasSubstr("checksum"));
  EXPECT_EQ(tier_->stats().dropped_records, 1u);
  EXPECT_FALSE(tier_->Contains("ns", "victim", 1000));
  EXPECT_EQ(tier_->Get("ns", "bystander", 1000)->value, Bytes('b', 9000));
}

TEST_F(DiskTierTest, ATornTailIsCutOffAtARestartAndWrittenOver) {
  Open();
  ASSERT_TRUE(Put("kept", Bytes('k', 5000)).ok());
  const uint64_t end = tier_->stats().disk_bytes;
  const std::string segment = folder_->PathOf(1);
  tier_.reset();  // and folder_ with it
  // A crash in the middle of the next record's write: half of it reached the disk.
  {
    const std::vector<char> value = Bytes('t', 20000);
    DiskRecord torn{99, 0, "ns", "torn", "", std::string_view(value.data(), value.size())};
    std::vector<char> encoded(DiskRecordBytes(2, 4, 0, value.size()));
    ASSERT_TRUE(EncodeDiskRecord(torn, encoded).ok());
    Result<std::unique_ptr<File>> file = OpenPosixFile(segment, false);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->WriteAt(end, encoded.data(), encoded.size() / 2).ok());
  }
  Open();
  EXPECT_EQ(tier_->stats().torn_tails, 1u);
  EXPECT_EQ(tier_->stats().restored, 1u);
  EXPECT_FALSE(tier_->Contains("ns", "torn", 1000));
  // The next record goes where the torn one began, and reads back after another restart, which
  // finds no torn tail any more.
  ASSERT_TRUE(Put("after", Bytes('n', 7000)).ok());
  Open();
  EXPECT_EQ(tier_->stats().torn_tails, 0u);
  EXPECT_EQ(tier_->Get("ns", "after", 1000)->value, Bytes('n', 7000));
  EXPECT_EQ(tier_->Get("ns", "kept", 1000)->value, Bytes('k', 5000));
}

TEST_F(DiskTierTest, AShortWriteFailsThePutAndLeavesNothingBehind) {
  Open();
  ASSERT_TRUE(Put("kept", Bytes('k', 5000)).ok());
  folder_->newest()->FailNextWrite(FaultyFile::Fault::kShortWrite);
  EXPECT_EQ(Put("short", Bytes('s', 20000)).code(), StatusCode::kIoError);
  EXPECT_EQ(tier_->stats().write_errors, 1u);
  EXPECT_FALSE(tier_->Contains("ns", "short", 1000));
  EXPECT_EQ(std::filesystem::file_size(folder_->PathOf(1)), tier_->stats().disk_bytes);
  ASSERT_TRUE(Put("after", Bytes('n', 7000)).ok());
  Open();
  EXPECT_EQ(tier_->stats().torn_tails, 0u);
  EXPECT_EQ(tier_->stats().restored, 2u);
  EXPECT_EQ(tier_->Get("ns", "after", 1000)->value, Bytes('n', 7000));
}

TEST_F(DiskTierTest, AFullDiskFailsThePutAndKeepsThePreviousValue) {
  Open();
  ASSERT_TRUE(Put("k", Bytes('1', 3000)).ok());
  folder_->newest()->FailNextWrite(FaultyFile::Fault::kNoSpace);
  EXPECT_EQ(Put("k", Bytes('2', 3000)).code(), StatusCode::kNoSpace);
  EXPECT_EQ(tier_->Get("ns", "k", 1000)->value, Bytes('1', 3000));
  folder_->newest()->FailNextWrite(FaultyFile::Fault::kIoError);
  Status erased = tier_->Erase("ns", "k");
  EXPECT_EQ(erased.code(), StatusCode::kIoError);
  EXPECT_THAT(erased.message(), HasSubstr("may come back at a restart"));
  EXPECT_FALSE(tier_->Contains("ns", "k", 1000));  // gone for now, as asked
  ASSERT_TRUE(Put("k", Bytes('3', 3000)).ok());
  Open();
  EXPECT_EQ(tier_->Get("ns", "k", 1000)->value, Bytes('3', 3000));
}

TEST(DiskTierOptionsTest, BadOptionsAndFoldersAreRefusedWithTheReason) {
  const std::string dir =
      ::testing::TempDir() + "kvport_disk_tier_options_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  Result<std::unique_ptr<SegmentFolder>> folder = OpenSegmentFolder(dir);
  ASSERT_TRUE(folder.ok()) << folder.status().ToString();
  DiskTierOptions tiny;
  tiny.segment_bytes = kSegment;
  tiny.capacity_bytes = kSegment;  // one segment
  Result<std::unique_ptr<DiskTier>> refused = DiskTier::Open(std::move(folder).value(), tiny, 0);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("fewer than two segments"));
  // A folder whose path is a file.
  const std::string file = dir + "/not-a-folder";
  {
    Result<std::unique_ptr<File>> f = OpenPosixFile(file, true);
    ASSERT_TRUE(f.ok());
  }
  Result<std::unique_ptr<SegmentFolder>> not_folder = OpenSegmentFolder(file);
  EXPECT_EQ(not_folder.status().code(), StatusCode::kIoError);
  EXPECT_THAT(not_folder.status().message(), HasSubstr("is not a folder"));
  Result<std::unique_ptr<SegmentFolder>> missing_parent = OpenSegmentFolder(file + "/below");
  EXPECT_FALSE(missing_parent.ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvport::store
