// SPDX-License-Identifier: Apache-2.0
// The disk tier's index checkpoint (store/index_checkpoint.h): its format checked through
// against damage and hostile counts; a clean stop's checkpoint loaded at the next start with the
// very index a scan builds; never believed after the folder changed (removed at the start, the
// superblock's stamp cleared, the segments compared), nor when another build, a crash or a
// damaged file left it, each falling back to the scan with every key right.
#include "store/index_checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "faulty_file.h"
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

constexpr uint64_t kSegment = 128 << 10;
constexpr uint64_t kNow = 1000;

using testing::ReadAll;
using testing::WriteAll;

// What a tier says of every key it was given and of itself: two tiers that agree on it serve
// the same answers.
struct TierView {
  std::map<std::string, std::string> objects;  // key: "meta|sequence|expiry|value's first bytes"
  uint64_t objects_count = 0;
  uint64_t object_bytes = 0;
  uint64_t disk_bytes = 0;
  uint64_t segments = 0;
  uint64_t last_sequence = 0;
  bool operator==(const TierView&) const = default;
};

class DiskCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "kvport_disk_checkpoint_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::remove_all(dir_ + ".copy");
  }
  void TearDown() override {
    tier_.reset();
    std::filesystem::remove_all(dir_);
    std::filesystem::remove_all(dir_ + ".copy");
  }

  Result<std::unique_ptr<DiskTier>> OpenAt(const std::string& dir, FaultyFolder** faulty) {
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<SegmentFolder> real, OpenSegmentFolder(dir));
    auto folder = std::make_unique<FaultyFolder>(std::move(real));
    if (faulty != nullptr) *faulty = folder.get();
    DiskTierOptions options;
    options.capacity_bytes = 16 * kSegment;
    options.segment_bytes = kSegment;
    return DiskTier::Open(std::move(folder), options, kNow);
  }
  void Open() {
    tier_.reset();
    Result<std::unique_ptr<DiskTier>> tier = OpenAt(dir_, &folder_);
    ASSERT_TRUE(tier.ok()) << tier.status().ToString();
    tier_ = std::move(tier).value();
    sequence_ = std::max(sequence_, tier_->last_sequence());
  }
  // A kill -9 of the running tier: its destructor runs (nothing else can close the folder's
  // lock here), then the folder is put back as the process left it: the superblock as the
  // running tier wrote it (not clean), no checkpoint.
  void Kill() {
    const std::string running = ReadAll(dir_ + "/SUPERBLOCK");
    tier_.reset();
    WriteAll(dir_ + "/SUPERBLOCK", running);
    std::filesystem::remove(dir_ + "/CHECKPOINT");
  }

  static std::string K(int i) { return "k" + std::to_string(i); }
  Status Put(int i, char seed, uint64_t expiry_ms = 0) {
    return tier_->Put(i % 3 == 0 ? "" : "ns", K(i), i % 2 == 0 ? "meta" + K(i) : "",
                      Bytes(seed, 3000 + (i % 5) * 1500), expiry_ms, ++sequence_);
  }
  Status Erase(int i) { return tier_->Erase(i % 3 == 0 ? "" : "ns", K(i), ++sequence_); }

  // Several segments of puts, overwrites, deletes, an expired and an expiring object, and a
  // compaction part way through: every kind of index entry and segment.
  void Populate() {
    for (int i = 0; i < 60; ++i)
      ASSERT_TRUE(Put(i, 'a').ok());
    for (int i = 0; i < 60; i += 3)
      ASSERT_TRUE(Put(i, 'b').ok());
    for (int i = 1; i < 60; i += 4)
      ASSERT_TRUE(Erase(i).ok());
    ASSERT_TRUE(Put(61, 'e', /*expiry_ms=*/kNow - 1).ok());  // expired already
    ASSERT_TRUE(Put(62, 'f', /*expiry_ms=*/kNow + 1'000'000).ok());
    for (int i = 0; i < 30; ++i)  // the first segments mostly dead
      ASSERT_TRUE(Put(i, 'c').ok());
    Result<CompactionProgress> step = tier_->CompactStep(16 << 10, kNow);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
  }

  static TierView View(DiskTier& tier) {
    TierView view;
    for (int i = 0; i < 64; ++i) {
      const std::string ns = i % 3 == 0 ? "" : "ns";
      Result<DiskObject> got = tier.Get(ns, K(i), kNow);
      if (!got.ok()) continue;
      view.objects[K(i)] = got->meta + "|" + std::to_string(got->sequence) + "|" +
                           std::to_string(got->expiry_ms) + "|" +
                           std::string(got->value.begin(), got->value.end());
    }
    const DiskTierStats stats = tier.stats();
    view.objects_count = stats.objects;
    view.object_bytes = stats.object_bytes;
    view.disk_bytes = stats.disk_bytes;
    view.segments = stats.segments;
    view.last_sequence = tier.last_sequence();
    return view;
  }

  // The superblock as a build that does not know the checkpoint writes it at a clean stop.
  void WriteSuperblockWithoutStamp() {
    Result<Superblock> superblock = DecodeSuperblock(ReadAll(dir_ + "/SUPERBLOCK"));
    ASSERT_TRUE(superblock.ok());
    superblock->clean = true;
    superblock->checkpoint_stamp = 0;
    WriteAll(dir_ + "/SUPERBLOCK", EncodeSuperblock(*superblock));
  }

  std::string dir_;
  FaultyFolder* folder_ = nullptr;
  std::unique_ptr<DiskTier> tier_;
  uint64_t sequence_ = 0;
};

TEST_F(DiskCheckpointTest, ACleanStopsCheckpointIsLoadedWithTheIndexAScanBuilds) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_NO_FATAL_FAILURE(Populate());
  ASSERT_GT(tier_->stats().segments, 2u);
  tier_.reset();  // a clean stop
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/CHECKPOINT"));
  Result<Superblock> superblock = DecodeSuperblock(ReadAll(dir_ + "/SUPERBLOCK"));
  ASSERT_TRUE(superblock.ok());
  EXPECT_TRUE(superblock->clean);
  EXPECT_NE(superblock->checkpoint_stamp, 0u);
  // The same folder twice: one tier loads the checkpoint, the other (its superblock naming
  // none) scans.
  std::filesystem::copy(dir_, dir_ + ".copy", std::filesystem::copy_options::recursive);
  {
    Result<Superblock> copied = DecodeSuperblock(ReadAll(dir_ + ".copy/SUPERBLOCK"));
    ASSERT_TRUE(copied.ok());
    copied->checkpoint_stamp = 0;
    WriteAll(dir_ + ".copy/SUPERBLOCK", EncodeSuperblock(*copied));
  }
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_TRUE(tier_->stats().restored_from_checkpoint);
  EXPECT_TRUE(tier_->stats().clean_start);
  Result<std::unique_ptr<DiskTier>> scanned = OpenAt(dir_ + ".copy", nullptr);
  ASSERT_TRUE(scanned.ok()) << scanned.status().ToString();
  EXPECT_FALSE((*scanned)->stats().restored_from_checkpoint);
  const TierView loaded = View(*tier_);
  EXPECT_EQ(loaded, View(**scanned));
  EXPECT_EQ(loaded.objects.count(K(61)), 0u);  // expired
  EXPECT_EQ(loaded.objects.count(K(33)), 0u);  // deleted
  EXPECT_EQ(loaded.objects.count(K(62)), 1u);
  EXPECT_EQ(tier_->stats().restored, (*scanned)->stats().restored);
  EXPECT_EQ(tier_->NamespacesOf(K(3), kNow), (*scanned)->NamespacesOf(K(3), kNow));
  // Both go on alike: compaction picks from the same live and tombstone bytes, puts land at the
  // same place.
  for (DiskTier* t : {tier_.get(), scanned->get()}) {
    for (int round = 0; round < 8; ++round) {
      Result<CompactionProgress> step = t->CompactStep(1 << 20, kNow);
      ASSERT_TRUE(step.ok()) << step.status().ToString();
    }
    ASSERT_TRUE(t->Put("ns", K(63), "", Bytes('z', 5000), 0, sequence_ + 1).ok());
  }
  EXPECT_EQ(View(*tier_), View(**scanned));
  EXPECT_EQ(tier_->stats().compacted_segments, (*scanned)->stats().compacted_segments);
}

TEST_F(DiskCheckpointTest, OpenRemovesTheCheckpointAndClearsTheStampBeforeAnyWrite) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_NO_FATAL_FAILURE(Populate());
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_TRUE(tier_->stats().restored_from_checkpoint);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/CHECKPOINT"));
  Result<Superblock> superblock = DecodeSuperblock(ReadAll(dir_ + "/SUPERBLOCK"));
  ASSERT_TRUE(superblock.ok());
  EXPECT_FALSE(superblock->clean);
  EXPECT_EQ(superblock->checkpoint_stamp, 0u);
  // A kill after writes: the next start scans and finds them.
  ASSERT_TRUE(Put(7, 'k').ok());
  ASSERT_TRUE(Erase(8).ok());
  const TierView before = View(*tier_);
  Kill();
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_FALSE(tier_->stats().restored_from_checkpoint);
  EXPECT_FALSE(tier_->stats().clean_start);
  EXPECT_EQ(View(*tier_).objects, before.objects);
}

// A checkpoint left in the folder from before a crash (as a file system that lost its removal
// would leave it, or a restore of an older copy), beside a folder that changed since: never
// loaded, whatever the superblock the crash left says.
TEST_F(DiskCheckpointTest, AStaleCheckpointFromBeforeACrashIsNeverLoaded) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_NO_FATAL_FAILURE(Populate());
  tier_.reset();
  const std::string stale = ReadAll(dir_ + "/CHECKPOINT");
  const std::string stale_superblock = ReadAll(dir_ + "/SUPERBLOCK");
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_TRUE(tier_->stats().restored_from_checkpoint);
  ASSERT_TRUE(Erase(0).ok());  // a delete, and an overwrite, after the checkpoint
  ASSERT_TRUE(Put(2, 'n').ok());
  const TierView after = View(*tier_);
  ASSERT_EQ(after.objects.count(K(0)), 0u);
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    Kill();
    WriteAll(dir_ + "/CHECKPOINT", stale);
    if (variant == 1) {
      ASSERT_NO_FATAL_FAILURE(WriteSuperblockWithoutStamp());
    }
    // Even the superblock that named it back: the segments it describes have changed.
    if (variant == 2) WriteAll(dir_ + "/SUPERBLOCK", stale_superblock);
    ASSERT_NO_FATAL_FAILURE(Open());
    EXPECT_FALSE(tier_->stats().restored_from_checkpoint);
    EXPECT_EQ(View(*tier_).objects, after.objects);
  }
}

// A build that does not know the checkpoint runs over the folder after a clean stop that wrote
// one: it leaves the checkpoint there, and a clean superblock without a stamp. A record it
// killed in place (a delete on a full disk) changes no segment's size, yet the deleted key must
// not come back.
TEST_F(DiskCheckpointTest, ACheckpointAnEarlierBuildLeftBehindIsNotBelieved) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_NO_FATAL_FAILURE(Populate());
  tier_.reset();
  const std::string left_behind = ReadAll(dir_ + "/CHECKPOINT");
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_TRUE(tier_->Contains("", K(3), kNow));
  // Every segment's size as it was: the delete finds a full disk and kills the record.
  std::map<std::string, uintmax_t> sizes;
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    if (e.path().extension() == ".seg") sizes[e.path().string()] = e.file_size();
  folder_->newest()->FailNextWrite(FaultyFile::Fault::kNoSpace);
  ASSERT_TRUE(Erase(3).ok());
  ASSERT_GE(tier_->stats().killed_records, 1u);
  for (const auto& [path, size] : sizes)
    ASSERT_EQ(std::filesystem::file_size(path), size) << path;
  tier_.reset();
  // As the earlier build would leave the folder.
  WriteAll(dir_ + "/CHECKPOINT", left_behind);
  ASSERT_NO_FATAL_FAILURE(WriteSuperblockWithoutStamp());
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_FALSE(tier_->stats().restored_from_checkpoint);
  EXPECT_FALSE(tier_->Contains("", K(3), kNow));
  EXPECT_FALSE(tier_->Get("", K(3), kNow).ok());
}

// Segments added, removed, cut or grown since the checkpoint: the scan, and what it finds.
TEST_F(DiskCheckpointTest, ACheckpointThatDoesNotMatchTheSegmentsIsNotUsed) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_NO_FATAL_FAILURE(Populate());
  tier_.reset();
  std::vector<std::string> segments;
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    if (e.path().extension() == ".seg") segments.push_back(e.path().string());
  std::sort(segments.begin(), segments.end());
  ASSERT_GE(segments.size(), 3u);
  const std::string checkpoint = ReadAll(dir_ + "/CHECKPOINT");
  const std::string superblock = ReadAll(dir_ + "/SUPERBLOCK");
  std::filesystem::copy(dir_, dir_ + ".copy", std::filesystem::copy_options::recursive);
  auto reset = [&] {
    tier_.reset();
    std::filesystem::remove_all(dir_);
    std::filesystem::copy(dir_ + ".copy", dir_, std::filesystem::copy_options::recursive);
  };
  const std::vector<std::function<void()>> changes = {
      [&] { std::filesystem::remove(segments[0]); },  // evicted by someone else
      [&] {                                           // another segment appears
        std::filesystem::copy_file(segments[1], dir_ + "/00000000000000ff.seg");
      },
      [&] {  // grown: a record appended by someone else
        const std::string bytes = ReadAll(segments.back());
        WriteAll(segments.back(), bytes + std::string(kDiskBlock, '\0'));
      },
      [&] {  // cut short
        const std::string bytes = ReadAll(segments[1]);
        WriteAll(segments[1], bytes.substr(0, bytes.size() - kDiskBlock));
      },
  };
  for (size_t c = 0; c < changes.size(); ++c) {
    SCOPED_TRACE("change " + std::to_string(c));
    reset();
    ASSERT_EQ(ReadAll(dir_ + "/CHECKPOINT"), checkpoint);
    ASSERT_EQ(ReadAll(dir_ + "/SUPERBLOCK"), superblock);
    changes[c]();
    ASSERT_NO_FATAL_FAILURE(Open());
    EXPECT_FALSE(tier_->stats().restored_from_checkpoint);
    // What the scan makes of the changed folder: the same as a tier that never had the
    // checkpoint.
    const TierView scanned = View(*tier_);
    tier_.reset();
    reset();
    changes[c]();
    std::filesystem::remove(dir_ + "/CHECKPOINT");
    ASSERT_NO_FATAL_FAILURE(Open());
    EXPECT_EQ(View(*tier_).objects, scanned.objects);
  }
  // Unchanged, it is used.
  reset();
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_TRUE(tier_->stats().restored_from_checkpoint);
}

// Damage anywhere in the file (a flipped byte, a cut, bytes after it), or something else under
// its name: the scan, with every key right.
TEST_F(DiskCheckpointTest, ADamagedCheckpointFallsBackToTheScan) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_NO_FATAL_FAILURE(Populate());
  const TierView expected = View(*tier_);
  tier_.reset();
  const std::string good = ReadAll(dir_ + "/CHECKPOINT");
  const std::string superblock = ReadAll(dir_ + "/SUPERBLOCK");
  ASSERT_GT(good.size(), 200u);
  std::vector<std::pair<std::string, std::function<void()>>> damages;
  for (size_t at : {size_t{0}, size_t{13}, size_t{40}, size_t{70}, good.size() / 2, good.size() - 9,
                    good.size() - 1}) {
    damages.push_back({"byte " + std::to_string(at) + " flipped", [&, at] {
                         std::string bad = good;
                         bad[at] = static_cast<char>(bad[at] ^ 0x20);
                         WriteAll(dir_ + "/CHECKPOINT", bad);
                       }});
  }
  for (size_t size : {size_t{0}, size_t{10}, size_t{64}, good.size() / 3, good.size() - 1}) {
    damages.push_back({"cut to " + std::to_string(size),
                       [&, size] { WriteAll(dir_ + "/CHECKPOINT", good.substr(0, size)); }});
  }
  damages.push_back({"bytes after it", [&] { WriteAll(dir_ + "/CHECKPOINT", good + "x"); }});
  damages.push_back({"a folder", [&] {
                       std::filesystem::remove(dir_ + "/CHECKPOINT");
                       std::filesystem::create_directory(dir_ + "/CHECKPOINT");
                     }});
  damages.push_back({"a link", [&] {
                       std::filesystem::remove(dir_ + "/CHECKPOINT");
                       WriteAll(dir_ + ".copy", good);
                       std::filesystem::create_symlink(dir_ + ".copy", dir_ + "/CHECKPOINT");
                     }});
  damages.push_back({"gone", [&] { std::filesystem::remove(dir_ + "/CHECKPOINT"); }});
  for (const auto& [what, damage] : damages) {
    SCOPED_TRACE(what);
    tier_.reset();
    std::filesystem::remove_all(dir_ + "/CHECKPOINT");
    WriteAll(dir_ + "/SUPERBLOCK", superblock);
    damage();
    ASSERT_NO_FATAL_FAILURE(Open());
    EXPECT_FALSE(tier_->stats().restored_from_checkpoint);
    EXPECT_TRUE(tier_->stats().clean_start);
    EXPECT_EQ(View(*tier_).objects, expected.objects);
    // Removed, whatever it was (a folder under the name stays: it is not the tier's to remove).
    EXPECT_FALSE(std::filesystem::is_regular_file(dir_ + "/CHECKPOINT"));
  }
  std::filesystem::remove_all(dir_ + "/CHECKPOINT");
}

TEST_F(DiskCheckpointTest, ACheckpointThatCannotBeWrittenStillStopsCleanAndTheNextStartScans) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_NO_FATAL_FAILURE(Populate());
  const TierView expected = View(*tier_);
  folder_->FailCheckpointWrite();
  tier_.reset();
  Result<Superblock> superblock = DecodeSuperblock(ReadAll(dir_ + "/SUPERBLOCK"));
  ASSERT_TRUE(superblock.ok());
  EXPECT_TRUE(superblock->clean);
  EXPECT_EQ(superblock->checkpoint_stamp, 0u);
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_TRUE(tier_->stats().clean_start);
  EXPECT_FALSE(tier_->stats().restored_from_checkpoint);
  EXPECT_EQ(View(*tier_).objects, expected.objects);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/CHECKPOINT.tmp"));  // removed at the start
}

// The format on its own, over a real file: a round trip, and every hostile file refused before
// anything is allocated for what it claims.
class CheckpointFormatTest : public DiskCheckpointTest {
 protected:
  std::unique_ptr<File> Create(const std::string& bytes) {
    WriteAll(dir_ + ".copy", bytes);
    Result<std::unique_ptr<File>> file = OpenPosixFile(dir_ + ".copy", /*create=*/false);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    return file.ok() ? std::move(file).value() : nullptr;
  }
  std::string Encode(const IndexCheckpoint& checkpoint) {
    std::filesystem::remove(dir_ + ".copy");
    Result<std::unique_ptr<File>> file = OpenPosixFile(dir_ + ".copy", /*create=*/true);
    EXPECT_TRUE(file.ok());
    CheckpointWriter writer(file->get());
    EXPECT_TRUE(writer.Begin(checkpoint.header).ok());
    for (const CheckpointSegment& s : checkpoint.segments)
      EXPECT_TRUE(writer.AddSegment(s).ok());
    for (const CheckpointEntry& e : checkpoint.entries)
      EXPECT_TRUE(writer.AddEntry(e.segment, e.record).ok());
    EXPECT_TRUE(writer.Finish().ok());
    file->reset();
    return ReadAll(dir_ + ".copy");
  }
  static IndexCheckpoint Sample(int entries) {
    IndexCheckpoint c;
    c.header.stamp = 7;
    c.header.segment_bytes = kSegment;
    c.header.last_sequence = 1000;
    c.header.next_segment = 9;
    c.segments = {{2, kSegment, kSegment, 8192}, {5, 8 * kDiskBlock, 9 * kDiskBlock, 0}};
    for (int i = 0; i < entries; ++i) {
      CheckpointEntry e;
      e.segment = i % 2 == 0 ? 2 : 5;
      DiskRecordHeader& h = e.record.header;
      h.ns = i % 3 == 0 ? "" : "ns";
      h.key = "key" + std::to_string(i);
      h.meta = std::string(static_cast<size_t>(i % 4) * 100, 'm');
      h.value_bytes = 1000 + static_cast<uint64_t>(i);
      h.value_checksum = 0x1234 + static_cast<uint64_t>(i);
      h.sequence = 1 + static_cast<uint64_t>(i);
      h.expiry_ms = static_cast<uint64_t>(i) * 10;
      h.names_bytes = static_cast<uint32_t>(h.ns.size() + h.key.size() + h.meta.size());
      h.record_bytes = DiskRecordBytes(h.ns.size(), h.key.size(), h.meta.size(), h.value_bytes);
      e.record.offset = static_cast<uint64_t>(i / 2) * 2 * kDiskBlock;
      c.entries.push_back(e);
    }
    c.header.segment_count = c.segments.size();
    c.header.entry_count = c.entries.size();
    return c;
  }
};

TEST_F(CheckpointFormatTest, ARoundTripGivesBackEveryField) {
  const IndexCheckpoint sample = Sample(8);
  std::unique_ptr<File> file = Create(Encode(sample));
  ASSERT_NE(file, nullptr);
  Result<IndexCheckpoint> read = ReadCheckpoint(*file);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->header.stamp, 7u);
  EXPECT_EQ(read->header.last_sequence, 1000u);
  EXPECT_EQ(read->header.next_segment, 9u);
  ASSERT_EQ(read->segments.size(), 2u);
  EXPECT_EQ(read->segments[1].file_bytes, 9 * kDiskBlock);
  EXPECT_EQ(read->segments[0].tombstone_bytes, 8192u);
  ASSERT_EQ(read->entries.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const DiskRecordHeader& want = sample.entries[i].record.header;
    const DiskRecordHeader& got = read->entries[i].record.header;
    EXPECT_EQ(read->entries[i].segment, sample.entries[i].segment);
    EXPECT_EQ(read->entries[i].record.offset, sample.entries[i].record.offset);
    EXPECT_EQ(got.ns, want.ns);
    EXPECT_EQ(got.key, want.key);
    EXPECT_EQ(got.meta, want.meta);
    EXPECT_EQ(got.sequence, want.sequence);
    EXPECT_EQ(got.expiry_ms, want.expiry_ms);
    EXPECT_EQ(got.value_bytes, want.value_bytes);
    EXPECT_EQ(got.value_checksum, want.value_checksum);
    EXPECT_EQ(got.record_bytes, want.record_bytes);
    EXPECT_EQ(got.names_bytes, want.names_bytes);
    EXPECT_FALSE(got.tombstone);
  }
}

TEST_F(CheckpointFormatTest, EveryFlippedByteAndEveryCutIsRefused) {
  const std::string good = Encode(Sample(4));
  for (size_t at = 0; at < good.size(); ++at) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x01);
    std::unique_ptr<File> file = Create(bad);
    ASSERT_NE(file, nullptr);
    Result<IndexCheckpoint> read = ReadCheckpoint(*file);
    ASSERT_FALSE(read.ok()) << "byte " << at << " flipped was not noticed";
  }
  for (size_t size = 0; size < good.size(); ++size) {
    std::unique_ptr<File> file = Create(good.substr(0, size));
    ASSERT_NE(file, nullptr);
    Result<IndexCheckpoint> read = ReadCheckpoint(*file);
    ASSERT_FALSE(read.ok()) << "cut to " << size;
    EXPECT_EQ(read.status().code(), StatusCode::kCorruption) << read.status().ToString();
  }
}

// Files whose checksum is right but whose contents lie: each refused for what it is, never
// trusted for a size (a count of 2^60 entries allocates nothing).
TEST_F(CheckpointFormatTest, AConsistentButLyingFileIsRefused) {
  struct Lie {
    const char* what;
    std::function<void(IndexCheckpoint&)> tell;
  };
  const std::vector<Lie> lies = {
      {"more entries than the file holds",
       [](IndexCheckpoint& c) { c.header.entry_count = uint64_t{1} << 60; }},
      {"more segments than the file holds",
       [](IndexCheckpoint& c) { c.header.segment_count = uint64_t{1} << 61; }},
      {"an entry in a segment not listed", [](IndexCheckpoint& c) { c.entries[1].segment = 3; }},
      {"an entry past its segment's end",
       [](IndexCheckpoint& c) { c.entries[1].record.offset = 8 * kDiskBlock; }},
      {"an entry off the block", [](IndexCheckpoint& c) { c.entries[0].record.offset = 100; }},
      {"a value larger than a segment",
       [](IndexCheckpoint& c) { c.entries[0].record.header.value_bytes = uint64_t{1} << 62; }},
      {"a sequence past the last",
       [](IndexCheckpoint& c) { c.entries[2].record.header.sequence = 5000; }},
      {"segments out of order",
       [](IndexCheckpoint& c) { std::swap(c.segments[0], c.segments[1]); }},
      {"a segment end past its file",
       [](IndexCheckpoint& c) { c.segments[1].file_bytes = 4 * kDiskBlock; }},
      {"a segment numbered past the next", [](IndexCheckpoint& c) { c.header.next_segment = 5; }},
  };
  for (const Lie& lie : lies) {
    SCOPED_TRACE(lie.what);
    IndexCheckpoint c = Sample(4);
    lie.tell(c);
    const uint64_t segments = c.header.segment_count;
    const uint64_t entries = c.header.entry_count;
    // Written as told (the writer keeps to the counts, so the lying counts are written by hand).
    c.header.segment_count = c.segments.size();
    c.header.entry_count = c.entries.size();
    std::string bytes = Encode(c);
    if (segments != c.segments.size() || entries != c.entries.size()) {
      std::memcpy(bytes.data() + 40, &segments, 8);
      std::memcpy(bytes.data() + 48, &entries, 8);
      const uint64_t hash = XXH3_64bits(bytes.data(), bytes.size() - 8);
      std::memcpy(bytes.data() + bytes.size() - 8, &hash, 8);
    }
    std::unique_ptr<File> file = Create(bytes);
    ASSERT_NE(file, nullptr);
    Result<IndexCheckpoint> read = ReadCheckpoint(*file);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), StatusCode::kCorruption) << read.status().ToString();
  }
  // And the sample itself is fine: each refusal above is the lie's.
  std::unique_ptr<File> file = Create(Encode(Sample(4)));
  EXPECT_TRUE(ReadCheckpoint(*file).ok());
}

}  // namespace
}  // namespace kvport::store
