// SPDX-License-Identifier: Apache-2.0
// The disk tier's records and segments (store/disk_record.h, store/segment.h): round trip, a
// torn tail, corrupt names, a corrupt value, a full disk, EIO and short writes through the file
// seam, on a real file in a temporary directory.
#include "store/segment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "faulty_file.h"
#include "store/disk_record.h"
#include "store/file_io.h"

namespace kvport::store {
namespace {

using testing::FaultyFile;

using ::testing::HasSubstr;

constexpr uint64_t kSegment = 1 << 20;

std::string Bytes(char seed, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>(seed + i * 13 + (i >> 8));
  return s;
}

class SegmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "kvport_segment_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::remove(path_.c_str());
    Result<std::unique_ptr<File>> file = OpenPosixFile(path_, /*create=*/true);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    file_ = std::make_unique<FaultyFile>(std::move(file).value());
  }
  void TearDown() override { std::remove(path_.c_str()); }

  // Overwrites bytes of the file at `offset`, as a crash or a bad disk would.
  void Scribble(uint64_t offset, std::string_view bytes) {
    ASSERT_TRUE(file_->WriteAt(offset, bytes.data(), bytes.size()).ok());
  }

  SegmentScan Scan() {
    Result<SegmentScan> scan = ScanSegment(*file_, kSegment);
    EXPECT_TRUE(scan.ok()) << scan.status().ToString();
    return scan.ok() ? std::move(scan).value() : SegmentScan{};
  }

  std::string ValueOf(const ScannedRecord& record, Status* status = nullptr) {
    std::string out(record.header.value_bytes, '\0');
    Status read = ReadRecordValue(*file_, record, {out.data(), out.size()});
    if (status != nullptr) *status = read;
    return read.ok() ? out : std::string();
  }

  std::string path_;
  std::unique_ptr<FaultyFile> file_;
};

TEST_F(SegmentTest, RecordsComeBackAsTheyWereWritten) {
  SegmentWriter writer(file_.get(), kSegment, 0);
  const std::string big = Bytes('v', 100000), small = Bytes('s', 10);
  Result<uint64_t> a = writer.Append({1, 0, "ns", "chunk@1", "meta-blob", big});
  Result<uint64_t> b = writer.Append({2, 1700000000000, "", "k", "", small});
  Result<uint64_t> c = writer.Append({3, 0, "other", "empty-value", "", ""});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, 0u);
  EXPECT_EQ(*b % kDiskBlock, 0u);  // every record starts on a block
  EXPECT_EQ(writer.end() % kDiskBlock, 0u);

  SegmentScan scan = Scan();
  ASSERT_EQ(scan.records.size(), 3u);
  EXPECT_FALSE(scan.torn);
  EXPECT_EQ(scan.dropped, 0u);
  EXPECT_EQ(scan.end, writer.end());
  const DiskRecordHeader& h = scan.records[0].header;
  EXPECT_EQ(h.sequence, 1u);
  EXPECT_EQ(h.ns, "ns");
  EXPECT_EQ(h.key, "chunk@1");
  EXPECT_EQ(h.meta, "meta-blob");
  EXPECT_EQ(h.value_bytes, big.size());
  EXPECT_EQ(ValueOf(scan.records[0]), big);
  EXPECT_EQ(scan.records[1].header.expiry_ms, 1700000000000u);
  EXPECT_EQ(scan.records[1].header.ns, "");
  EXPECT_EQ(ValueOf(scan.records[1]), small);
  EXPECT_EQ(scan.records[2].header.key, "empty-value");
  EXPECT_EQ(ValueOf(scan.records[2]), "");

  // A writer reopened at the scan's end appends after the last record.
  SegmentWriter again(file_.get(), kSegment, scan.end);
  ASSERT_TRUE(again.Append({4, 0, "ns", "after", "", small}).ok());
  EXPECT_EQ(Scan().records.size(), 4u);
}

TEST_F(SegmentTest, ATornTailIsCutOff) {
  SegmentWriter writer(file_.get(), kSegment, 0);
  ASSERT_TRUE(writer.Append({1, 0, "ns", "a", "", Bytes('a', 5000)}).ok());
  Result<uint64_t> second = writer.Append({2, 0, "ns", "b", "", Bytes('b', 5000)});
  ASSERT_TRUE(second.ok());
  Scribble(*second + 20, "torn");  // inside the last record's fixed part: a crash mid-write

  SegmentScan scan = Scan();
  ASSERT_EQ(scan.records.size(), 1u);
  EXPECT_EQ(scan.records[0].header.key, "a");
  EXPECT_TRUE(scan.torn);
  EXPECT_FALSE(scan.damaged);
  EXPECT_EQ(scan.end, *second);  // the next record overwrites the torn one
}

TEST_F(SegmentTest, ADamagedRecordWithRecordsAfterItIsToldFromATornTailAndNothingAfterIsBelieved) {
  SegmentWriter writer(file_.get(), kSegment, 0);
  ASSERT_TRUE(writer.Append({1, 0, "ns", "a", "", Bytes('a', 5000)}).ok());
  Result<uint64_t> second = writer.Append({2, 0, "ns", "b", "", Bytes('b', 5000)});
  ASSERT_TRUE(second.ok());
  // A record after the damage, whose bytes are intact, must not be trusted either.
  ASSERT_TRUE(writer.Append({3, 0, "ns", "c", "", Bytes('c', 5000)}).ok());
  Scribble(*second + 20, "rot!");  // inside the second record's fixed part: a flipped block

  SegmentScan scan = Scan();
  ASSERT_EQ(scan.records.size(), 1u);
  EXPECT_EQ(scan.records[0].header.key, "a");
  EXPECT_TRUE(scan.damaged);
  EXPECT_FALSE(scan.torn);
  EXPECT_EQ(scan.end, *second);
}

TEST_F(SegmentTest, AValueThatLooksLikeARecordIsNeverReadAsOne) {
  // A client stores bytes that are a perfectly valid record of another namespace, aligned.
  std::vector<char> forged(DiskRecordBytes(5, 6, 0, 100));
  ASSERT_TRUE(EncodeDiskRecord({99, 0, "admin", "forged", "", Bytes('f', 100)}, forged).ok());
  // A value starts on a block (DiskValueOffset), so the forged record does too: where a
  // scanner that resynced after damage would look for the next header.
  const std::string value(forged.data(), forged.size());
  SegmentWriter writer(file_.get(), kSegment, 0);
  ASSERT_TRUE(writer.Append({1, 0, "user", "innocent", "", value}).ok());
  SegmentScan intact = Scan();
  ASSERT_EQ(intact.records.size(), 1u);
  EXPECT_EQ(intact.records[0].header.key, "innocent");
  // Even with the real header destroyed, the scan stops there instead of resyncing (the forged
  // record after it only makes the stop a damaged record rather than a torn tail).
  Scribble(0, std::string(kFixedBytes, '\xff'));
  SegmentScan scan = Scan();
  EXPECT_TRUE(scan.records.empty());
  EXPECT_TRUE(scan.damaged);
}

TEST_F(SegmentTest, ARecordWithCorruptNamesIsDroppedAndCountedAndTheScanGoesOn) {
  SegmentWriter writer(file_.get(), kSegment, 0);
  Result<uint64_t> first = writer.Append({1, 0, "ns", "first-key", "", Bytes('a', 3000)});
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(writer.Append({2, 0, "ns", "second-key", "", Bytes('b', 3000)}).ok());
  Scribble(*first + kFixedBytes + 3, "X");  // a byte of the first key

  SegmentScan scan = Scan();
  EXPECT_EQ(scan.dropped, 1u);
  ASSERT_EQ(scan.records.size(), 1u);
  EXPECT_EQ(scan.records[0].header.key, "second-key");
  EXPECT_FALSE(scan.torn);
  EXPECT_EQ(scan.end, writer.end());
}

TEST_F(SegmentTest, ACorruptValueIsCorruptionNeverWrongBytes) {
  SegmentWriter writer(file_.get(), kSegment, 0);
  const std::string value = Bytes('v', 20000);
  ASSERT_TRUE(writer.Append({1, 0, "ns", "k", "", value}).ok());
  SegmentScan scan = Scan();
  ASSERT_EQ(scan.records.size(), 1u);
  Scribble(scan.records[0].offset + scan.records[0].header.value_offset() + 12345, "!");
  Status read;
  EXPECT_EQ(ValueOf(scan.records[0], &read), "");
  EXPECT_EQ(read.code(), StatusCode::kCorruption);
  EXPECT_THAT(read.message(), HasSubstr("does not match its checksum"));
}

TEST_F(SegmentTest, AFullDiskOrAFailedWriteLeavesNothingServedAndTheNextRecordTakesItsPlace) {
  SegmentWriter writer(file_.get(), kSegment, 0);
  ASSERT_TRUE(writer.Append({1, 0, "ns", "kept", "", Bytes('k', 6000)}).ok());
  const uint64_t end = writer.end();
  for (auto fault :
       {FaultyFile::Fault::kNoSpace, FaultyFile::Fault::kIoError, FaultyFile::Fault::kShortWrite}) {
    file_->FailNextWrite(fault);
    Result<uint64_t> failed = writer.Append({2, 0, "ns", "lost", "", Bytes('l', 9000)});
    EXPECT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(),
              fault == FaultyFile::Fault::kNoSpace ? StatusCode::kNoSpace : StatusCode::kIoError);
    EXPECT_EQ(writer.end(), end);
    // A half-written record's header is intact but its value is not: scanned, never served.
    SegmentScan scan = Scan();
    for (const ScannedRecord& r : scan.records) {
      if (r.header.key != "lost") continue;
      Status read;
      EXPECT_EQ(ValueOf(r, &read), "");
      EXPECT_EQ(read.code(), StatusCode::kCorruption);
    }
  }
  Result<uint64_t> next = writer.Append({3, 0, "ns", "next", "", Bytes('n', 100)});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, end);
  SegmentScan scan = Scan();
  ASSERT_EQ(scan.records.size(), 2u);
  EXPECT_EQ(scan.records[1].header.key, "next");
  EXPECT_EQ(ValueOf(scan.records[1]), Bytes('n', 100));
}

TEST_F(SegmentTest, ASegmentRefusesWhatDoesNotFitAndRecordsRefuseOversizedNames) {
  // A record is its header block and its value's blocks: 3 of the 5 here, then 2 are left.
  SegmentWriter writer(file_.get(), 5 * kDiskBlock, 0);
  ASSERT_TRUE(writer.Append({1, 0, "", "a", "", std::string(2 * kDiskBlock, 'a')}).ok());
  Result<uint64_t> full = writer.Append({2, 0, "", "b", "", std::string(2 * kDiskBlock, 'b')});
  EXPECT_EQ(full.status().code(), StatusCode::kNoSpace);
  EXPECT_EQ(writer.Append({3, 0, "", "", "", "v"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(writer.Append({3, 0, std::string(300, 'n'), "k", "", "v"}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(SegmentTest, AFileTruncatedUnderTheNodeEndsTheScanAndFailsTheReadOfWhatIsGone) {
  SegmentWriter writer(file_.get(), kSegment, 0);
  ASSERT_TRUE(writer.Append({1, 0, "ns", "a", "", Bytes('a', 5000)}).ok());
  ASSERT_TRUE(writer.Append({2, 0, "ns", "b", "", Bytes('b', 50000)}).ok());
  SegmentScan before = Scan();
  ASSERT_EQ(before.records.size(), 2u);
  ASSERT_EQ(::truncate(path_.c_str(), static_cast<off_t>(before.records[1].offset + 100)), 0);
  Status read;
  EXPECT_EQ(ValueOf(before.records[1], &read), "");
  EXPECT_EQ(read.code(), StatusCode::kCorruption);
  SegmentScan after = Scan();
  ASSERT_EQ(after.records.size(), 1u);
  EXPECT_TRUE(after.torn);
}

}  // namespace
}  // namespace kvport::store
