// SPDX-License-Identifier: Apache-2.0
// The disk tier's files (store/file_io.h) on each of their paths: io_uring on an O_DIRECT file,
// pread/pwrite on an O_DIRECT file, buffered pread/pwrite. Each is forced through FileOptions, so
// the fallbacks' code runs on a machine where io_uring and O_DIRECT work. Round trips at aligned
// and unaligned offsets, lengths and buffers across block boundaries, reads past the end,
// Truncate, Size, a reopen, many readers beside a writer, the mode each reports.
#include "store/file_io.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "store/disk_record.h"

namespace kvport::store {
namespace {

struct Path {
  const char* name;
  FileOptions options;
};

std::string Bytes(char seed, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>(seed + i * 31 + (i >> 7));
  return s;
}

// Whether the filesystem of `dir` takes O_DIRECT (tmpfs before Linux 6.6 does not).
bool DirectWorks(const std::string& dir) {
  const std::string path = dir + "/direct-check";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600);
  ::unlink(path.c_str());
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

class FileIoTest : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name)
      if (c == '/') c = '_';
    dir_ = ::testing::TempDir() + "kvport_file_io_test_" + std::to_string(::getpid()) + "_" + name;
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/file";
    Reopen(/*create=*/true);
  }
  void TearDown() override {
    file_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Reopen(bool create) {
    file_.reset();
    Result<std::unique_ptr<File>> file = OpenPosixFile(path_, create, GetParam().options);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    file_ = std::move(file).value();
  }

  // What the file must say it does, given what this machine allows.
  std::string ExpectedMode() const {
    const FileOptions& o = GetParam().options;
    if (!o.direct) return "pread (buffered)";
    if (!DirectWorks(dir_)) return "pread (buffered: " + dir_ + "'s filesystem refuses O_DIRECT)";
    if (o.use_io_uring && IoUringUnavailableReason().empty()) return "io_uring+O_DIRECT";
    return "pread+O_DIRECT";
  }

  // Writes `bytes` at `offset` from a buffer `skew` bytes past a block boundary, into the file
  // and into `model`, the bytes a file must hold.
  void Write(uint64_t offset, const std::string& bytes, size_t skew) {
    FileAlignedBytes buffer(bytes.size() + skew + 1);
    std::copy(bytes.begin(), bytes.end(), buffer.begin() + static_cast<ptrdiff_t>(skew));
    Status s = file_->WriteAt(offset, buffer.data() + skew, bytes.size());
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (model_.size() < offset + bytes.size()) model_.resize(offset + bytes.size(), '\0');
    model_.replace(offset, bytes.size(), bytes);
  }

  // Reads `bytes` at `offset` into a buffer `skew` bytes past a block boundary and checks them
  // against the model: fewer only past its end.
  void CheckRead(uint64_t offset, size_t bytes, size_t skew) {
    SCOPED_TRACE("read of " + std::to_string(bytes) + " at " + std::to_string(offset) +
                 ", buffer skew " + std::to_string(skew));
    FileAlignedBytes buffer(bytes + skew + 1, '\x5a');
    Result<size_t> got = file_->ReadAt(offset, buffer.data() + skew, bytes);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const size_t expected =
        offset >= model_.size() ? 0 : std::min<size_t>(bytes, model_.size() - offset);
    ASSERT_EQ(*got, expected);
    EXPECT_EQ(std::string(buffer.data() + skew, *got),
              expected == 0 ? std::string() : model_.substr(offset, expected));
    // Nothing written past the bytes asked for (an O_DIRECT read into the caller's memory may
    // fill the rest of what was asked with zeros past the end of the file).
    EXPECT_EQ(buffer[skew + bytes], '\x5a');
  }

  void CheckAll() {
    Result<uint64_t> size = file_->Size();
    ASSERT_TRUE(size.ok()) << size.status().ToString();
    EXPECT_EQ(*size, model_.size());
    for (size_t skew : {size_t{0}, size_t{1}, size_t{512}}) {
      CheckRead(0, model_.size(), skew);
      CheckRead(0, 80, skew);  // a scan's header
      CheckRead(1, 4095, skew);
      CheckRead(4000, 200, skew);  // across a block boundary
      CheckRead(kDiskBlock, kDiskBlock, skew);
      CheckRead(kDiskBlock + 176, 3 * kDiskBlock + 5, skew);  // a value starting mid-block
      CheckRead(model_.size() - 10, 100, skew);               // past the end: fewer
      CheckRead(model_.size(), 10, skew);                     // at the end: none
      CheckRead(model_.size() + 5000, kDiskBlock, skew);      // beyond it: none
    }
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<File> file_;
  std::string model_;
};

TEST_P(FileIoTest, ReportsTheModeItChose) {
  EXPECT_EQ(file_->io_mode(), ExpectedMode());
  if (!IoUringUnavailableReason().empty()) {
    std::printf("io_uring unavailable here: %s\n", IoUringUnavailableReason().c_str());
  }
}

TEST_P(FileIoTest, RoundTripsAtAlignedAndUnalignedOffsetsLengthsAndBuffers) {
  Write(0, Bytes('a', 2 * kDiskBlock), 0);  // whole blocks in aligned memory: direct
  ASSERT_NO_FATAL_FAILURE(CheckAll());
  Write(2 * kDiskBlock, Bytes('b', kDiskBlock), 3);  // whole blocks, unaligned memory
  ASSERT_NO_FATAL_FAILURE(CheckAll());
  Write(100, Bytes('c', 50), 0);  // inside one block
  ASSERT_NO_FATAL_FAILURE(CheckAll());
  Write(4000, Bytes('d', 200), 7);  // across a block boundary
  ASSERT_NO_FATAL_FAILURE(CheckAll());
  Write(kDiskBlock - 2, Bytes('e', kDiskBlock + 4), 0);  // the ends of three blocks
  ASSERT_NO_FATAL_FAILURE(CheckAll());
  Write(3 * kDiskBlock, Bytes('f', 5000), 0);  // an aligned start, a partial last block: grows
  ASSERT_NO_FATAL_FAILURE(CheckAll());
  Write(model_.size() + 3 * kDiskBlock + 9, Bytes('g', 10), 1);  // past the end: a hole of zeros
  ASSERT_NO_FATAL_FAILURE(CheckAll());
  Write(10, Bytes('h', 3 * kDiskBlock), 4095);  // a large unaligned write over written bytes
  ASSERT_NO_FATAL_FAILURE(CheckAll());
  EXPECT_TRUE(file_->WriteAt(5, "", 0).ok());  // nothing: no change
  ASSERT_NO_FATAL_FAILURE(CheckAll());
}

TEST_P(FileIoTest, TruncateCutsAndSizeFollows) {
  Write(0, Bytes('t', 3 * kDiskBlock), 0);
  ASSERT_TRUE(file_->Truncate(5000).ok());
  model_.resize(5000);
  ASSERT_NO_FATAL_FAILURE(CheckAll());
  CheckRead(kDiskBlock, kDiskBlock, 0);               // an aligned read that the end cuts short
  ASSERT_TRUE(file_->Truncate(2 * kDiskBlock).ok());  // grows with zeros
  model_.resize(2 * kDiskBlock, '\0');
  ASSERT_NO_FATAL_FAILURE(CheckAll());
  ASSERT_TRUE(file_->Truncate(0).ok());
  model_.clear();
  Result<uint64_t> size = file_->Size();
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 0u);
  CheckRead(0, kDiskBlock, 0);
  CheckRead(3, 10, 1);
  // A write into the now empty file leaves it exactly as long as what was written.
  Write(7, Bytes('u', 9), 0);
  ASSERT_NO_FATAL_FAILURE(CheckAll());
}

TEST_P(FileIoTest, AReopenedFileReadsWhatWasWritten) {
  Write(0, Bytes('r', 5 * kDiskBlock), 0);
  Write(5 * kDiskBlock + 100, Bytes('s', 333), 2);
  ASSERT_TRUE(file_->Sync().ok());
  Reopen(/*create=*/false);
  EXPECT_EQ(file_->io_mode(), ExpectedMode());
  ASSERT_NO_FATAL_FAILURE(CheckAll());
  // Also through a file opened the other way: O_DIRECT and buffered see the same bytes.
  Result<std::unique_ptr<File>> other =
      OpenPosixFile(path_, false, {.direct = !GetParam().options.direct, .use_io_uring = true});
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  std::string back(model_.size(), '\0');
  Result<size_t> got = (*other)->ReadAt(0, back.data(), back.size());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, model_.size());
  EXPECT_EQ(back, model_);
}

TEST_P(FileIoTest, AMissingFileIsAnErrorNamingIt) {
  Result<std::unique_ptr<File>> file =
      OpenPosixFile(dir_ + "/absent", /*create=*/false, GetParam().options);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().ToString().find(dir_ + "/absent"), std::string::npos);
}

// The node's I/O threads read at once while the writer thread appends: each on its own ring.
TEST_P(FileIoTest, ManyReadersBesideOneWriter) {
  constexpr int kRecords = 64;
  constexpr size_t kRecord = 2 * kDiskBlock;
  std::vector<std::string> records;
  for (int i = 0; i < kRecords; ++i)
    records.push_back(Bytes(static_cast<char>('A' + i), kRecord));
  std::atomic<int> written{0};
  std::atomic<int> bad{0};
  std::thread writer([&] {
    FileAlignedBytes buffer(kRecord);
    for (int i = 0; i < kRecords; ++i) {
      std::copy(records[i].begin(), records[i].end(), buffer.begin());
      if (!file_->WriteAt(i * kRecord, buffer.data(), kRecord).ok()) ++bad;
      written.store(i + 1, std::memory_order_release);
    }
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      std::string out(kRecord, '\0');
      for (int round = 0; round < 200; ++round) {
        const int n = written.load(std::memory_order_acquire);
        if (n == 0) continue;
        const int i = (round * 7 + t) % n;
        // A value starts mid-record: an unaligned read through the thread's bounce buffer.
        const size_t skip = static_cast<size_t>(80 + t);
        Result<size_t> got = file_->ReadAt(i * kRecord + skip, out.data(), kRecord - skip);
        if (!got.ok() || *got != kRecord - skip ||
            std::string_view(out.data(), kRecord - skip) !=
                std::string_view(records[i]).substr(skip)) {
          ++bad;
        }
      }
    });
  }
  writer.join();
  for (std::thread& r : readers)
    r.join();
  EXPECT_EQ(bad.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, FileIoTest,
    ::testing::Values(Path{"io_uring_direct", {.direct = true, .use_io_uring = true}},
                      Path{"pread_direct", {.direct = true, .use_io_uring = false}},
                      Path{"buffered", {.direct = false, .use_io_uring = false}}),
    [](const ::testing::TestParamInfo<Path>& param) { return std::string(param.param.name); });

// The folder finds once how its files are opened, says so, and leaves no probe file behind.
TEST(SegmentFolderIoTest, TheFolderSaysHowItsSegmentsAreReadAndWritten) {
  const std::string dir =
      ::testing::TempDir() + "kvport_file_io_folder_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  for (const FileOptions& options : {FileOptions{}, FileOptions{.direct = false}}) {
    Result<std::unique_ptr<SegmentFolder>> folder = OpenSegmentFolder(dir, options);
    ASSERT_TRUE(folder.ok()) << folder.status().ToString();
    Result<std::unique_ptr<File>> file = (*folder)->Open(1, /*create=*/true);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    EXPECT_EQ((*folder)->io_mode(), (*file)->io_mode());
    if (!options.direct) {
      EXPECT_EQ((*folder)->io_mode(), "pread (buffered)");
    } else if (DirectWorks(dir)) {
      EXPECT_EQ((*folder)->io_mode(),
                IoUringUnavailableReason().empty() ? "io_uring+O_DIRECT" : "pread+O_DIRECT");
    }
    Result<std::vector<uint64_t>> listed = (*folder)->List();
    ASSERT_TRUE(listed.ok());
    EXPECT_EQ(*listed, std::vector<uint64_t>{1});
    EXPECT_FALSE(std::filesystem::exists(dir + "/.kvport-io-probe"));
    ASSERT_TRUE((*folder)->Remove(1).ok());
  }
  std::filesystem::remove_all(dir);
}

// Segment files are made new, never over or through something else, and only regular files
// are opened; a bad one is moved aside and no longer listed.
TEST(SegmentFolderIoTest, SegmentsAreMadeNewAndOnlyRegularFilesAreOpened) {
  const std::string dir =
      ::testing::TempDir() + "kvport_file_io_strict_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  Result<std::unique_ptr<SegmentFolder>> folder = OpenSegmentFolder(dir);
  ASSERT_TRUE(folder.ok()) << folder.status().ToString();
  SegmentFolder& f = **folder;
  ASSERT_TRUE(f.Open(1, /*create=*/true).ok());
  Result<std::unique_ptr<File>> again = f.Open(1, /*create=*/true);
  EXPECT_EQ(again.status().code(), StatusCode::kIoError);
  EXPECT_THAT(again.status().message(), ::testing::HasSubstr("already exists"));
  const std::string target = dir + "/target";
  { std::ofstream(target) << "x"; }
  ASSERT_EQ(::symlink(target.c_str(), f.PathOf(2).c_str()), 0);
  Result<std::unique_ptr<File>> link = f.Open(2, /*create=*/false);
  EXPECT_THAT(link.status().message(), ::testing::HasSubstr("is a symbolic link"));
  EXPECT_FALSE(f.Open(2, /*create=*/true).ok());
  ASSERT_TRUE(std::filesystem::create_directory(f.PathOf(3)));
  Result<std::unique_ptr<File>> folder_named = f.Open(3, /*create=*/false);
  EXPECT_THAT(folder_named.status().message(), ::testing::HasSubstr("is a folder"));
  ASSERT_EQ(::link(target.c_str(), f.PathOf(4).c_str()), 0);
  EXPECT_THAT(f.Open(4, /*create=*/false).status().message(), ::testing::HasSubstr("2 links"));
  EXPECT_EQ(f.Open(5, /*create=*/false).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*f.List(), (std::vector<uint64_t>{1, 2, 3, 4}));
  ASSERT_TRUE(f.Quarantine(2).ok());
  ASSERT_TRUE(f.Quarantine(3).ok());
  ASSERT_TRUE(f.SyncDir().ok());
  EXPECT_EQ(*f.List(), (std::vector<uint64_t>{1, 4}));
  EXPECT_TRUE(std::filesystem::is_symlink(f.PathOf(2) + ".quarantined"));
  EXPECT_TRUE(std::filesystem::is_directory(f.PathOf(3) + ".quarantined"));
  std::ifstream in(target);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "x");
  std::filesystem::remove_all(dir);
}

// Allocate reserves the blocks and leaves the size to the writes; the superblock is replaced
// whole; the free space is the filesystem's.
TEST(SegmentFolderIoTest, AllocateSuperblockAndFreeBytes) {
  const std::string dir =
      ::testing::TempDir() + "kvport_file_io_allocate_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  Result<std::unique_ptr<SegmentFolder>> folder = OpenSegmentFolder(dir);
  ASSERT_TRUE(folder.ok()) << folder.status().ToString();
  Result<std::unique_ptr<File>> file = (*folder)->Open(1, /*create=*/true);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_TRUE((*file)->Allocate(0, 256 << 10).ok());
  EXPECT_EQ(*(*file)->Size(), 0u);
  struct stat st {};
  ASSERT_EQ(::stat((*folder)->PathOf(1).c_str(), &st), 0);
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{256} << 10);
  const std::vector<char> block(4096, 'b');
  ASSERT_TRUE((*file)->WriteAt(0, block.data(), block.size()).ok());
  EXPECT_EQ(*(*file)->Size(), 4096u);
  EXPECT_EQ((*folder)->ReadSuperblock().status().code(), StatusCode::kNotFound);
  ASSERT_TRUE((*folder)->WriteSuperblock("first").ok());
  ASSERT_TRUE((*folder)->WriteSuperblock("second").ok());
  EXPECT_EQ(*(*folder)->ReadSuperblock(), "second");
  EXPECT_FALSE(std::filesystem::exists(dir + "/SUPERBLOCK.tmp"));
  Result<uint64_t> free_bytes = (*folder)->FreeBytes();
  ASSERT_TRUE(free_bytes.ok());
  EXPECT_GT(*free_bytes, 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvport::store
