// SPDX-License-Identifier: Apache-2.0
// The disk tier (store/disk_tier.h) on real files in a temporary folder: round trip, overwrite
// and delete surviving a restart, eviction of the oldest segments at the capacity, expiry, a
// corrupt value and a torn tail, a full disk and short writes through the file seam; compaction
// of mostly-dead segments (what it keeps, what it drops, across restarts, beside puts and
// deletes, under faults) and the index's memory estimate.
#include "store/disk_tier.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "faulty_file.h"
#include "store/disk_record.h"
#include "store/file_io.h"

namespace kvport::store {
namespace {

using testing::Bytes;
using testing::FaultyFile;
using testing::FaultyFolder;
using ::testing::HasSubstr;

constexpr uint64_t kSegment = 128 << 10;

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
    sequence_ = tier_->last_sequence();
  }

  // A new version of (ns, key), numbered as the memory store numbers them: above every one
  // before.
  Status Put(std::string_view key, const std::vector<char>& value, std::string_view meta = "",
             uint64_t expiry_ms = 0, std::string_view ns = "ns") {
    return tier_->Put(ns, key, meta, value, expiry_ms, ++sequence_);
  }
  // A delete of (ns, key): it ends every version before it.
  Status Erase(std::string_view ns, std::string_view key) {
    return tier_->Erase(ns, key, ++sequence_);
  }

  size_t SegmentFiles() const {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      n += e.path().extension() == ".seg" ? 1 : 0;
    return n;
  }

  // Flips the byte at `offset` of segment `number`, as a bad disk would.
  void FlipByte(uint64_t number, uint64_t offset) {
    Result<std::unique_ptr<File>> file = OpenPosixFile(folder_->PathOf(number), false);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    char byte = 0;
    ASSERT_EQ((*file)->ReadAt(offset, &byte, 1).value(), 1u);
    byte = static_cast<char>(byte ^ 0x5a);
    ASSERT_TRUE((*file)->WriteAt(offset, &byte, 1).ok());
  }

  // Compaction steps of `max_bytes` until there is nothing more to do; what they moved, and
  // how many segments they finished, into the out parameters.
  void CompactAll(uint64_t max_bytes, uint64_t* moved = nullptr, uint64_t* finished = nullptr) {
    uint64_t total = 0, segments = 0;
    for (int step = 0; step < 10000; ++step) {
      Result<CompactionProgress> progress = tier_->CompactStep(max_bytes, kNow);
      ASSERT_TRUE(progress.ok()) << progress.status().ToString();
      EXPECT_LE(progress->moved_bytes, std::max<uint64_t>(max_bytes, kRecord));
      total += progress->moved_bytes;
      segments += progress->finished_segment ? 1 : 0;
      if (!progress->more) break;
    }
    if (moved != nullptr) *moved = total;
    if (finished != nullptr) *finished = segments;
  }

  // Objects of one 8 KiB record each (a block of header and names, a block of value; 16 to a
  // segment): key "k<i>", value Bytes(seed, 3000).
  static constexpr uint64_t kRecord = 8192;
  static constexpr uint64_t kNow = 1000;
  static std::string K(int i) { return "k" + std::to_string(i); }
  Status PutSmall(int i, char seed) { return Put(K(i), Bytes(seed, 3000)); }
  // Whether every (key, seed) reads back bytes-equal.
  void ExpectValues(const std::vector<std::pair<int, char>>& expected) {
    for (const auto& [i, seed] : expected) {
      Result<DiskObject> got = tier_->Get("ns", K(i), kNow);
      ASSERT_TRUE(got.ok()) << K(i) << ": " << got.status().ToString();
      EXPECT_EQ(got->value, Bytes(seed, 3000)) << K(i);
    }
  }

  std::string dir_;
  FaultyFolder* folder_ = nullptr;
  std::unique_ptr<DiskTier> tier_;
  uint64_t sequence_ = 0;  // the last sequence number given (Put, Erase)
};

TEST_F(DiskTierTest, ObjectsSurviveARestartWithTheirLatestValueAndDeletesStayDeleted) {
  Open();
  ASSERT_TRUE(Put("a", Bytes('a', 10000), "meta-a").ok());
  ASSERT_TRUE(Put("b", Bytes('b', 1)).ok());
  ASSERT_TRUE(Put("c", Bytes('c', 30000)).ok());
  ASSERT_TRUE(Put("a", Bytes('A', 20000), "meta-A").ok());  // overwritten
  ASSERT_TRUE(Erase("ns", "b").ok());
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

TEST_F(DiskTierTest, NamespacesOfAKeyAreListedInOrderAcrossARestart) {
  Open();
  ASSERT_TRUE(Put("k", Bytes('b', 10), "", 0, "b").ok());
  ASSERT_TRUE(Put("k", Bytes('d', 10), "", 0, "").ok());
  ASSERT_TRUE(Put("k", Bytes('a', 10), "", 0, "a").ok());
  ASSERT_TRUE(Put("k", Bytes('x', 10), "", 500, "expired").ok());
  ASSERT_TRUE(Put("other", Bytes('o', 10), "", 0, "c").ok());
  for (int restart = 0; restart < 2; ++restart) {
    EXPECT_EQ(tier_->NamespacesOf("k", 1000), (std::vector<std::string>{"", "a", "b"}));
    EXPECT_EQ(tier_->NamespacesOf("other", 1000), (std::vector<std::string>{"c"}));
    EXPECT_TRUE(tier_->NamespacesOf("none", 1000).empty());
    Open();
  }
  ASSERT_TRUE(Erase("a", "k").ok());
  EXPECT_EQ(tier_->NamespacesOf("k", 1000), (std::vector<std::string>{"", "b"}));
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
    ASSERT_TRUE((*file)->WriteAt(6000, &bad, 1).ok());  // its value: blocks 1 to 3
  }
  Result<DiskObject> victim = tier_->Get("ns", "victim", 1000);
  EXPECT_EQ(victim.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(victim.status().message(), HasSubstr("checksum"));
  EXPECT_EQ(tier_->stats().dropped_records, 1u);
  EXPECT_FALSE(tier_->Contains("ns", "victim", 1000));
  EXPECT_EQ(tier_->Get("ns", "bystander", 1000)->value, Bytes('b', 9000));
}

TEST_F(DiskTierTest, PutManyWritesRunsThatFitAndFailsOnlyTheRunAWriteFailed) {
  Open();
  // 20 records of 8 KiB: 16 fill segment 1 (one write), 4 go to segment 2 (another).
  std::vector<std::string> keys;
  std::vector<std::vector<char>> values;
  for (int i = 0; i < 20; ++i) {
    keys.push_back(K(i));
    values.push_back(Bytes(static_cast<char>('a' + i), 3000));
  }
  std::vector<DiskPut> puts;
  for (int i = 0; i < 20; ++i)
    puts.push_back({"ns", keys[i], "", values[i], 0, ++sequence_});
  std::vector<Status> statuses = tier_->PutMany(puts);
  for (int i = 0; i < 20; ++i)
    EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].ToString();
  EXPECT_EQ(tier_->stats().segments, 2u);
  // The newest segment's next write fails: the run it carries (the 12 that fit after the 4
  // already there) fails; the other 4, the next run, are written.
  folder_->newest()->FailNextWrite(FaultyFile::Fault::kShortWrite);
  std::vector<DiskPut> more;
  std::vector<std::vector<char>> more_values;
  for (int i = 0; i < 16; ++i)
    more_values.push_back(Bytes(static_cast<char>('A' + i), 3000));
  for (int i = 0; i < 16; ++i)
    more.push_back({"ns", keys[i], "", more_values[i], 0, ++sequence_});
  statuses = tier_->PutMany(more);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(statuses[i].code(), StatusCode::kIoError) << i;
  for (int i = 12; i < 16; ++i)
    EXPECT_TRUE(statuses[i].ok()) << i;
  for (int restart = 0; restart < 2; ++restart) {
    SCOPED_TRACE(restart == 0 ? "before the restart" : "after the restart");
    for (int i = 0; i < 20; ++i) {  // a failed put keeps the previous value
      const char seed = static_cast<char>(i >= 12 && i < 16 ? 'A' + i : 'a' + i);
      EXPECT_EQ(tier_->Get("ns", K(i), kNow)->value, Bytes(seed, 3000)) << i;
    }
    Open();
  }
}

TEST_F(DiskTierTest, AnEioOnReadIsAMissAndCounted) {
  Open();
  ASSERT_TRUE(Put("victim", Bytes('v', 9000)).ok());
  ASSERT_TRUE(Put("bystander", Bytes('b', 9000)).ok());
  folder_->newest()->FailNextRead();
  Result<DiskObject> victim = tier_->Get("ns", "victim", 1000);
  EXPECT_EQ(victim.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(victim.status().message(), HasSubstr("EIO"));
  EXPECT_EQ(tier_->stats().read_errors, 1u);
  EXPECT_EQ(tier_->Get("ns", "bystander", 1000)->value, Bytes('b', 9000));
  // The dropped record was killed in place: a restart, where the read may well succeed, does
  // not bring back a version that a newer one, written while the index held none, replaced.
  EXPECT_EQ(tier_->stats().killed_records, 1u);
  Open();
  EXPECT_FALSE(tier_->Contains("ns", "victim", 1000));
  EXPECT_EQ(tier_->Get("ns", "bystander", 1000)->value, Bytes('b', 9000));
}

TEST_F(DiskTierTest, AFileCutShortUnderTheTierIsAMissNeverWrongBytes) {
  Open();
  ASSERT_TRUE(Put("whole", Bytes('w', 9000)).ok());
  ASSERT_TRUE(Put("cut", Bytes('c', 9000)).ok());  // at 16 KiB: its value from 20 KiB on
  std::filesystem::resize_file(folder_->PathOf(1), 20 * 1024 + 4000);  // under the tier
  EXPECT_EQ(tier_->Get("ns", "cut", 1000).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tier_->stats().dropped_records, 1u);
  EXPECT_EQ(tier_->Get("ns", "whole", 1000)->value, Bytes('w', 9000));
  Open();  // the cut record is a torn tail now
  EXPECT_FALSE(tier_->Contains("ns", "cut", 1000));
  EXPECT_EQ(tier_->Get("ns", "whole", 1000)->value, Bytes('w', 9000));
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

// A damaged record with records after it (a bad disk, not a crash) is counted apart from a torn
// tail, loses what follows it, and its segment is not written over: the next record starts a
// new one.
TEST_F(DiskTierTest, ADamagedRecordIsToldFromATornTailAndItsSegmentIsNotWrittenOver) {
  Open();
  ASSERT_TRUE(Put("a", Bytes('a', 5000)).ok());
  const uint64_t b_at = tier_->stats().disk_bytes;
  ASSERT_TRUE(Put("b", Bytes('b', 5000)).ok());
  ASSERT_TRUE(Put("c", Bytes('c', 5000)).ok());
  FlipByte(1, b_at + 20);  // inside b's fixed part
  const std::string path = folder_->PathOf(1);
  const auto segment_bytes = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  tier_.reset();
  // No index checkpoint, as after a crash: the restart scans the segments.
  std::filesystem::remove(dir_ + "/CHECKPOINT");
  Open();
  const std::string before = segment_bytes();
  EXPECT_EQ(tier_->stats().damaged_segments, 1u);
  EXPECT_EQ(tier_->stats().torn_tails, 0u);
  EXPECT_EQ(tier_->Get("ns", "a", kNow)->value, Bytes('a', 5000));
  EXPECT_FALSE(tier_->Contains("ns", "b", kNow));
  EXPECT_FALSE(tier_->Contains("ns", "c", kNow));
  ASSERT_TRUE(Put("d", Bytes('d', 5000)).ok());
  EXPECT_EQ(SegmentFiles(), 2u);
  EXPECT_EQ(segment_bytes(), before);
  Open();
  EXPECT_EQ(tier_->Get("ns", "d", kNow)->value, Bytes('d', 5000));
  EXPECT_EQ(tier_->Get("ns", "a", kNow)->value, Bytes('a', 5000));
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
  ASSERT_TRUE(Put("k", Bytes('3', 3000)).ok());
  Open();
  EXPECT_EQ(tier_->Get("ns", "k", 1000)->value, Bytes('3', 3000));
}

// A delete whose tombstone cannot be appended (the disk is full) kills the record in place,
// which needs no new block: the key stays deleted across a restart, and so does an older
// version of it that the killed one had replaced.
TEST_F(DiskTierTest, ADeleteOnAFullDiskKillsTheRecordInPlaceAndStaysDeletedAcrossARestart) {
  Open();
  ASSERT_TRUE(Put("k", Bytes('1', 3000)).ok());
  ASSERT_TRUE(Put("k", Bytes('2', 3000)).ok());
  ASSERT_TRUE(Put("other", Bytes('o', 3000)).ok());
  folder_->newest()->FailNextWrite(FaultyFile::Fault::kNoSpace);
  ASSERT_TRUE(Erase("ns", "k").ok());
  EXPECT_EQ(tier_->stats().killed_records, 1u);
  EXPECT_FALSE(tier_->Contains("ns", "k", 1000));
  for (int restart = 0; restart < 2; ++restart) {
    Open();
    EXPECT_FALSE(tier_->Contains("ns", "k", 1000)) << "restart " << restart;
    EXPECT_EQ(tier_->Get("ns", "other", 1000)->value, Bytes('o', 3000));
    // The scan moved past the killed record: what comes after it is read.
    EXPECT_EQ(tier_->stats().restored, 1u);
  }
  // A killed record is compacted as the tombstone it is.
  ASSERT_TRUE(Put("k", Bytes('3', 3000)).ok());
  Open();
  EXPECT_EQ(tier_->Get("ns", "k", 1000)->value, Bytes('3', 3000));
}

// The tombstones of a batch of changes are one group commit: appended together and synced once,
// and each is as durable as a tombstone synced on its own.
TEST_F(DiskTierTest, EraseManySyncsOnceForABatchAndEachKeyStaysDeletedAcrossARestart) {
  Open();
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(PutSmall(i, static_cast<char>('a' + i)).ok());
  const int syncs = folder_->newest()->syncs();
  const std::vector<std::string> keys = {K(0), K(1), K(2), K(3)};
  std::vector<DiskErase> erases;
  for (const std::string& key : keys)
    erases.push_back({"ns", key, ++sequence_});
  erases.push_back({"ns", "absent", ++sequence_});  // nothing to end: nothing written
  const std::string k4 = K(4);
  erases.push_back({"ns", k4, 1});  // below k4's version: it stays
  const std::vector<Status> erased = tier_->EraseMany(erases);
  ASSERT_EQ(erased.size(), erases.size());
  for (const Status& status : erased)
    EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(folder_->newest()->syncs(), syncs + 1);
  for (int restart = 0; restart < 2; ++restart) {
    for (int i = 0; i < 4; ++i)
      EXPECT_FALSE(tier_->Contains("ns", K(i), kNow)) << K(i) << ", restart " << restart;
    ExpectValues({{4, 'e'}, {5, 'f'}});
    Open();
  }
}

// A value's checksum as its writer computed it is the record's: a read from disk checks the
// writer's bytes end to end, and one whose bytes are not what its writer's checksum says is a
// miss, never those bytes. Without one, the tier computes its own.
TEST_F(DiskTierTest, TheWritersChecksumIsTheRecordsAndAWrongOneIsAMiss) {
  Open();
  const std::vector<char> value = Bytes('c', 9000);
  const uint64_t checksum = XXH3_64bits(value.data(), value.size());
  ASSERT_TRUE(tier_->Put("ns", "right", "", value, 0, ++sequence_, checksum).ok());
  ASSERT_TRUE(tier_->Put("ns", "wrong", "", value, 0, ++sequence_, checksum ^ 1).ok());
  ASSERT_TRUE(tier_->Put("ns", "none", "", value, 0, ++sequence_, 0).ok());
  for (int restart = 0; restart < 2; ++restart) {
    Result<DiskObject> right = tier_->Get("ns", "right", kNow);
    ASSERT_TRUE(right.ok()) << right.status().ToString();
    EXPECT_EQ(right->value_checksum, checksum);
    Result<DiskObject> none = tier_->Get("ns", "none", kNow);
    ASSERT_TRUE(none.ok());
    EXPECT_EQ(none->value_checksum, checksum);  // computed by the tier
    if (restart == 0) {
      Result<DiskObject> wrong = tier_->Get("ns", "wrong", kNow);
      EXPECT_EQ(wrong.status().code(), StatusCode::kNotFound);
      EXPECT_THAT(wrong.status().message(), HasSubstr("checksum"));
    } else {
      EXPECT_FALSE(tier_->Contains("ns", "wrong", kNow));  // dropped and killed
    }
    Open();
  }
}

// Versions, not arrival order: a record of a lower sequence written after a higher one (a late
// copy of an older version) is dead from the start, before and after a restart; a tombstone
// ends what is below its sequence and not the version it was written for.
TEST_F(DiskTierTest, TheHighestSequenceWinsWhateverTheOrderOfWrites) {
  Open();
  ASSERT_TRUE(tier_->Put("ns", "k", "", Bytes('n', 3000), 0, 20).ok());
  ASSERT_TRUE(tier_->Put("ns", "k", "", Bytes('o', 3000), 0, 10).ok());  // late, older
  EXPECT_EQ(tier_->Get("ns", "k", 1000)->value, Bytes('n', 3000));
  ASSERT_TRUE(tier_->Erase("ns", "k", 20).ok());  // nothing below 20 is left: a no-op
  EXPECT_EQ(tier_->Get("ns", "k", 1000)->value, Bytes('n', 3000));
  // A tombstone of 30, then the version 30 it was written for (an overwrite's erase can reach
  // the disk before the new version's copy does).
  ASSERT_TRUE(tier_->Erase("ns", "k", 30).ok());
  EXPECT_FALSE(tier_->Contains("ns", "k", 1000));
  ASSERT_TRUE(tier_->Put("ns", "k", "", Bytes('v', 3000), 0, 30).ok());
  EXPECT_EQ(tier_->last_sequence(), 30u);
  Open();
  EXPECT_EQ(tier_->Get("ns", "k", 1000)->value, Bytes('v', 3000));
  EXPECT_EQ(tier_->last_sequence(), 30u);
}

// A namespace may hold any byte, NUL too: ("a\0b", "c") and ("a", "b\0c") are two objects.
TEST_F(DiskTierTest, NamespacesWithANulDoNotCollideWithKeys) {
  Open();
  const std::string ns1("a\0b", 3), key1("c");
  const std::string ns2("a"), key2("b\0c", 3);
  ASSERT_TRUE(Put(key1, Bytes('1', 3000), "", 0, ns1).ok());
  ASSERT_TRUE(Put(key2, Bytes('2', 3000), "", 0, ns2).ok());
  for (int restart = 0; restart < 2; ++restart) {
    EXPECT_EQ(tier_->Get(ns1, key1, 1000)->value, Bytes('1', 3000));
    EXPECT_EQ(tier_->Get(ns2, key2, 1000)->value, Bytes('2', 3000));
    EXPECT_EQ(tier_->stats().objects, 2u);
    Open();
  }
}

TEST_F(DiskTierTest, CompactionMovesTheLiveRecordsOfAMostlyDeadSegmentAndFreesIt) {
  Open();
  std::vector<std::pair<int, char>> expected;
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(PutSmall(i, static_cast<char>('a' + i)).ok());
    expected.push_back({i, static_cast<char>('a' + i)});
  }
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(PutSmall(i, static_cast<char>('A' + i)).ok());
    expected[i].second = static_cast<char>('A' + i);
  }
  ASSERT_EQ(tier_->stats().segments, 2u);
  // Half of segment 1 is live: not below the threshold; segment 2 is being written.
  Result<CompactionProgress> step = tier_->CompactStep(1 << 20, kNow);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->moved_bytes, 0u);
  EXPECT_FALSE(step->finished_segment);
  EXPECT_FALSE(step->more);
  // One more overwrite: 7 of 16 live.
  ASSERT_TRUE(PutSmall(8, 'I').ok());
  expected[8].second = 'I';
  const DiskTierStats before = tier_->stats();
  EXPECT_EQ(before.disk_bytes, 25 * kRecord);
  step = tier_->CompactStep(1 << 20, kNow);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->moved_bytes, 7 * kRecord);
  EXPECT_TRUE(step->finished_segment);
  EXPECT_FALSE(step->more);
  const DiskTierStats after = tier_->stats();
  EXPECT_EQ(after.compacted_segments, 1u);
  EXPECT_EQ(after.compacted_bytes, 7 * kRecord);
  EXPECT_EQ(after.segments, 1u);
  EXPECT_EQ(SegmentFiles(), 1u);
  EXPECT_FALSE(std::filesystem::exists(folder_->PathOf(1)));
  EXPECT_EQ(after.disk_bytes, 16 * kRecord);  // 9 new values and the 7 moved
  EXPECT_EQ(after.objects, 16u);
  EXPECT_EQ(after.object_bytes, 16 * kRecord);
  EXPECT_EQ(after.evicted_segments, 0u);
  ExpectValues(expected);
  Open();
  EXPECT_EQ(tier_->stats().restored, 16u);
  EXPECT_EQ(tier_->stats().dropped_records, 0u);
  ExpectValues(expected);
  // Nothing left worth compacting.
  step = tier_->CompactStep(1 << 20, kNow);
  ASSERT_TRUE(step.ok());
  EXPECT_EQ(step->moved_bytes, 0u);
  EXPECT_FALSE(step->finished_segment);
}

TEST_F(DiskTierTest, CompactionStepsAreBoundedAndPutsAndDeletesBetweenThemWin) {
  Open();
  for (int i = 0; i < 16; ++i)
    ASSERT_TRUE(PutSmall(i, 'o').ok());
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(PutSmall(i, 'n').ok());
  Result<CompactionProgress> step = tier_->CompactStep(kRecord, kNow);  // moves k10
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->moved_bytes, kRecord);
  EXPECT_FALSE(step->finished_segment);
  EXPECT_TRUE(step->more);
  // Meanwhile: k11 rewritten, k12 deleted, k10 (already moved) rewritten too.
  ASSERT_TRUE(PutSmall(11, 'X').ok());
  ASSERT_TRUE(Erase("ns", K(12)).ok());
  ASSERT_TRUE(PutSmall(10, 'Y').ok());
  uint64_t moved = 0, finished = 0;
  CompactAll(kRecord, &moved, &finished);
  EXPECT_EQ(moved, 3 * kRecord);  // k13, k14, k15: not the rewritten or deleted ones
  EXPECT_EQ(finished, 1u);
  EXPECT_EQ(tier_->stats().compacted_bytes, 4 * kRecord);
  EXPECT_FALSE(std::filesystem::exists(folder_->PathOf(1)));
  const std::vector<std::pair<int, char>> expected = {{0, 'n'},  {9, 'n'},  {10, 'Y'}, {11, 'X'},
                                                      {13, 'o'}, {14, 'o'}, {15, 'o'}};
  for (int restart = 0; restart < 2; ++restart) {
    SCOPED_TRACE(restart == 0 ? "before the restart" : "after the restart");
    ExpectValues(expected);
    EXPECT_FALSE(tier_->Contains("ns", K(12), kNow));
    EXPECT_EQ(tier_->stats().objects, 15u);
    Open();
  }
}

TEST_F(DiskTierTest, ATombstoneIsCarriedForwardWhileAnOlderSegmentMayHoldItsKey) {
  Open();
  // Segment 1: "gone" and a1..a15, all live.
  ASSERT_TRUE(Put("gone", Bytes('g', 3000)).ok());
  for (int i = 1; i < 16; ++i)
    ASSERT_TRUE(PutSmall(100 + i, 'a').ok());
  // Segment 2: gone's tombstone, then b0..b14, which are rewritten at once (segment 3).
  ASSERT_TRUE(Erase("ns", "gone").ok());
  for (int i = 0; i < 15; ++i)
    ASSERT_TRUE(PutSmall(200 + i, 'b').ok());
  for (int i = 0; i < 15; ++i)
    ASSERT_TRUE(PutSmall(200 + i, 'B').ok());
  ASSERT_EQ(tier_->stats().segments, 3u);
  // Segment 2 needs only its tombstone (one block): moved forward, since segment 1 still holds
  // "gone".
  Result<CompactionProgress> step = tier_->CompactStep(1 << 20, kNow);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->moved_bytes, kDiskBlock);
  EXPECT_TRUE(step->finished_segment);
  EXPECT_FALSE(std::filesystem::exists(folder_->PathOf(2)));
  EXPECT_TRUE(std::filesystem::exists(folder_->PathOf(1)));
  Open();
  EXPECT_FALSE(tier_->Contains("ns", "gone", kNow));  // its old record in segment 1 stays dead
  EXPECT_EQ(tier_->stats().restored, 30u);
  // Rewrite a1..a15: segment 1 is all dead and the oldest; it goes without a copy.
  for (int i = 1; i < 16; ++i)
    ASSERT_TRUE(PutSmall(100 + i, 'A').ok());
  step = tier_->CompactStep(1 << 20, kNow);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->moved_bytes, 0u);
  EXPECT_TRUE(step->finished_segment);
  EXPECT_FALSE(std::filesystem::exists(folder_->PathOf(1)));
  // Delete b0..b14: segment 3 (their records and gone's carried tombstone) is the oldest and
  // all dead; the tombstone goes with it, nothing older being left for it to hide.
  for (int i = 0; i < 15; ++i)
    ASSERT_TRUE(Erase("ns", K(200 + i)).ok());
  step = tier_->CompactStep(1 << 20, kNow);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->moved_bytes, 0u);
  EXPECT_TRUE(step->finished_segment);
  EXPECT_FALSE(std::filesystem::exists(folder_->PathOf(3)));
  for (int restart = 0; restart < 2; ++restart) {
    SCOPED_TRACE(restart == 0 ? "before the restart" : "after the restart");
    EXPECT_FALSE(tier_->Contains("ns", "gone", kNow));
    for (int i = 0; i < 15; ++i)
      EXPECT_FALSE(tier_->Contains("ns", K(200 + i), kNow)) << i;
    for (int i = 1; i < 16; ++i)
      EXPECT_EQ(tier_->Get("ns", K(100 + i), kNow)->value, Bytes('A', 3000)) << i;
    EXPECT_EQ(tier_->stats().objects, 15u);
    Open();
  }
}

TEST_F(DiskTierTest, CompactionDropsACorruptRecordInsteadOfCopyingIt) {
  Open();
  for (int i = 0; i < 16; ++i)
    ASSERT_TRUE(PutSmall(i, 'o').ok());
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(PutSmall(i, 'n').ok());
  FlipByte(1, 12 * kRecord + kDiskBlock + 1000);    // inside k12's value (its second block)
  ASSERT_TRUE(tier_->Contains("ns", K(12), kNow));  // its header is fine: only a read can tell
  Result<CompactionProgress> step = tier_->CompactStep(1 << 20, kNow);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->moved_bytes, 5 * kRecord);
  EXPECT_TRUE(step->finished_segment);
  EXPECT_EQ(tier_->stats().dropped_records, 1u);
  EXPECT_EQ(tier_->stats().compacted_bytes, 5 * kRecord);
  for (int restart = 0; restart < 2; ++restart) {
    SCOPED_TRACE(restart == 0 ? "before the restart" : "after the restart");
    // Without compaction a restart would find k12 again (a header that checks out).
    EXPECT_FALSE(tier_->Contains("ns", K(12), kNow));
    ExpectValues({{0, 'n'}, {9, 'n'}, {10, 'o'}, {11, 'o'}, {13, 'o'}, {15, 'o'}});
    EXPECT_EQ(tier_->stats().objects, 15u);
    Open();
  }
  EXPECT_EQ(tier_->stats().dropped_records, 0u);
}

TEST_F(DiskTierTest, AFailingWriteDuringCompactionLeavesEveryLiveRecordReadable) {
  Open();
  for (int i = 0; i < 16; ++i)
    ASSERT_TRUE(PutSmall(i, 'o').ok());
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(PutSmall(i, 'n').ok());
  std::vector<std::pair<int, char>> expected;
  for (int i = 0; i < 16; ++i)
    expected.push_back({i, i < 10 ? 'n' : 'o'});
  Result<CompactionProgress> step = tier_->CompactStep(kRecord, kNow);  // moves k10
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  ASSERT_EQ(step->moved_bytes, kRecord);
  folder_->newest()->FailNextWrite(FaultyFile::Fault::kShortWrite);
  step = tier_->CompactStep(kRecord, kNow);
  EXPECT_EQ(step.status().code(), StatusCode::kIoError);
  ExpectValues(expected);
  folder_->newest()->FailNextWrite(FaultyFile::Fault::kNoSpace);
  step = tier_->CompactStep(kRecord, kNow);
  EXPECT_EQ(step.status().code(), StatusCode::kNoSpace);
  EXPECT_EQ(tier_->stats().write_errors, 2u);
  EXPECT_EQ(tier_->stats().compacted_segments, 0u);
  EXPECT_TRUE(std::filesystem::exists(folder_->PathOf(1)));
  ExpectValues(expected);
  // The next steps go on where the failed one stopped.
  uint64_t moved = 0, finished = 0;
  CompactAll(kRecord, &moved, &finished);
  EXPECT_EQ(moved, 5 * kRecord);
  EXPECT_EQ(finished, 1u);
  EXPECT_FALSE(std::filesystem::exists(folder_->PathOf(1)));
  ExpectValues(expected);
  Open();
  EXPECT_EQ(tier_->stats().torn_tails, 0u);
  EXPECT_EQ(tier_->stats().restored, 16u);
  ExpectValues(expected);
}

TEST_F(DiskTierTest, CompactionNeverEvictsAndGoesOnOnceAPutMadeRoom) {
  Open(3 * kSegment);
  for (int i = 0; i < 16; ++i)  // segment 1: all live
    ASSERT_TRUE(PutSmall(100 + i, 'a').ok());
  for (int i = 0; i < 16; ++i)  // segment 2: 6 of 16 live once k0..k9 are rewritten
    ASSERT_TRUE(PutSmall(i, 'o').ok());
  for (int i = 0; i < 10; ++i)  // segment 3, filled up by m0..m5
    ASSERT_TRUE(PutSmall(i, 'n').ok());
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(PutSmall(200 + i, 'm').ok());
  ASSERT_EQ(tier_->stats().segments, 3u);
  // The newest segment is full and a fourth would evict segment 1: compaction waits.
  Result<CompactionProgress> step = tier_->CompactStep(1 << 20, kNow);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->moved_bytes, 0u);
  EXPECT_FALSE(step->more);
  EXPECT_EQ(tier_->stats().evicted_segments, 0u);
  ExpectValues({{100, 'a'}, {115, 'a'}, {10, 'o'}, {15, 'o'}});
  // A put starts segment 4, evicting segment 1 as it would anyway; then there is room.
  ASSERT_TRUE(PutSmall(300, 'p').ok());
  ASSERT_EQ(tier_->stats().evicted_segments, 1u);
  uint64_t moved = 0, finished = 0;
  CompactAll(1 << 20, &moved, &finished);
  EXPECT_EQ(moved, 6 * kRecord);
  EXPECT_EQ(finished, 1u);
  EXPECT_EQ(tier_->stats().evicted_segments, 1u);
  EXPECT_EQ(tier_->stats().segments, 2u);
  EXPECT_LE(tier_->stats().disk_bytes, 3 * kSegment);
  const std::vector<std::pair<int, char>> expected = {{0, 'n'},  {9, 'n'},   {10, 'o'},
                                                      {15, 'o'}, {200, 'm'}, {300, 'p'}};
  ExpectValues(expected);
  Open(3 * kSegment);
  ExpectValues(expected);
}

TEST_F(DiskTierTest, PutsRacingCompactionKeepTheNewestValue) {
  Open(32 * kSegment);
  for (int i = 0; i < 16; ++i)
    ASSERT_TRUE(PutSmall(i, 'o').ok());
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(PutSmall(i, 'n').ok());
  constexpr int kRounds = 20;
  std::thread writer([&] {
    for (int round = 0; round < kRounds; ++round) {
      for (int i = 10; i < 16; ++i)
        ASSERT_TRUE(PutSmall(i, static_cast<char>('A' + round)).ok());
    }
  });
  CompactAll(kRecord);
  writer.join();
  CompactAll(kRecord);  // what the writer's rewrites left dead
  EXPECT_GE(tier_->stats().compacted_segments, 1u);
  std::vector<std::pair<int, char>> expected;
  for (int i = 0; i < 16; ++i)
    expected.push_back({i, i < 10 ? 'n' : static_cast<char>('A' + kRounds - 1)});
  ExpectValues(expected);
  EXPECT_EQ(tier_->stats().objects, 16u);
  Open(32 * kSegment);
  ExpectValues(expected);
}

TEST_F(DiskTierTest, IndexBytesCountEachEntrysStringsAndNode) {
  Open(64 * kSegment);
  const uint64_t empty = tier_->stats().index_bytes;
  const std::string long_key(100, 'x');
  const std::string meta(50, 'm');
  constexpr int kObjects = 200;
  for (int i = 0; i < kObjects; ++i)
    ASSERT_TRUE(Put(long_key + std::to_string(i), Bytes('v', 100), meta).ok());
  const uint64_t full = tier_->stats().index_bytes;
  // Per object at least its id (ns, NUL, key), its header's key and meta, and the segment's
  // copy of its id; at most a generous 2 KiB.
  EXPECT_GE(full - empty, kObjects * (3 * 103 + 50));
  EXPECT_LE(full - empty, kObjects * 2048);
  for (int i = 0; i < kObjects; ++i)
    ASSERT_TRUE(Erase("ns", long_key + std::to_string(i)).ok());
  const uint64_t erased = tier_->stats().index_bytes;
  // The entries go (their ids stay listed in their segments until those go).
  EXPECT_LE(erased, full - kObjects * (2 * 103 + 50));
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
