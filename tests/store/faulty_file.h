// SPDX-License-Identifier: Apache-2.0
// The disk tier's fault injection through its file seam (store/file_io.h): a file whose next
// write fails as told, whose next read fails with EIO, or whose next reservations find a full
// disk; and a real folder whose files are such files, with faults of its own on demand.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/file_io.h"

namespace kvport::store::testing {

class FaultyFile final : public File {
 public:
  explicit FaultyFile(std::unique_ptr<File> file) : file_(std::move(file)) {}
  enum class Fault { kNone, kNoSpace, kIoError, kShortWrite };
  void FailNextWrite(Fault fault) { fault_ = fault; }
  void FailNextRead() { fail_read_ = true; }
  // The next `times` Allocate calls fail with NoSpace (a full disk at the reservation).
  void FailAllocate(int times) { fail_allocates_ = times; }

  Status WriteAt(uint64_t offset, const void* data, size_t bytes) override {
    const Fault fault = fault_;
    fault_ = Fault::kNone;
    switch (fault) {
      case Fault::kNone:
        return file_->WriteAt(offset, data, bytes);
      case Fault::kNoSpace:
        return Status::NoSpace("injected: the disk is full");
      case Fault::kIoError:
        return Status::IoError("injected: EIO");
      case Fault::kShortWrite: {
        // Half the bytes reach the file (the fixed part among them), then the write fails.
        KVPORT_RETURN_IF_ERROR(file_->WriteAt(offset, data, bytes / 2));
        return Status::IoError("injected: short write");
      }
    }
    return Status::Internal("unreachable");
  }
  Result<size_t> ReadAt(uint64_t offset, void* data, size_t bytes) override {
    if (fail_read_) {
      fail_read_ = false;
      return Status::IoError("injected: EIO on read");
    }
    return file_->ReadAt(offset, data, bytes);
  }
  Status Sync() override {
    ++syncs_;
    return file_->Sync();
  }
  // How many times the file was synced.
  int syncs() const { return syncs_; }
  Status Truncate(uint64_t size) override { return file_->Truncate(size); }
  Result<uint64_t> Size() override { return file_->Size(); }
  Status Allocate(uint64_t offset, uint64_t bytes) override {
    if (fail_allocates_ > 0) {
      --fail_allocates_;
      return Status::NoSpace("injected: the disk is full (fallocate)");
    }
    return file_->Allocate(offset, bytes);
  }

 private:
  std::unique_ptr<File> file_;
  Fault fault_ = Fault::kNone;
  bool fail_read_ = false;
  int fail_allocates_ = 0;
  int syncs_ = 0;
};

// The real folder, its files wrapped in FaultyFiles: the newest one made or opened is at hand
// (newest()), opening a segment may fail with EIO, the first read of one may fail (its scan),
// and the reservations of the next segments created may find a full disk.
class FaultyFolder final : public SegmentFolder {
 public:
  explicit FaultyFolder(std::unique_ptr<SegmentFolder> real) : real_(std::move(real)) {}
  void FailOpen(uint64_t number) { fail_open_ = number; }
  void FailFirstRead(uint64_t number) { fail_read_ = number; }
  void FailAllocates(int times) { fail_allocates_ = times; }
  FaultyFile* newest() { return newest_; }

  Result<std::vector<uint64_t>> List() override { return real_->List(); }
  Result<std::unique_ptr<File>> Open(uint64_t number, bool create) override {
    if (number == fail_open_) return Status::IoError("injected: EIO at open");
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<File> file, real_->Open(number, create));
    auto faulty = std::make_unique<FaultyFile>(std::move(file));
    if (number == fail_read_) faulty->FailNextRead();
    if (create) {
      faulty->FailAllocate(fail_allocates_);
      fail_allocates_ = 0;
    }
    newest_ = faulty.get();
    return std::unique_ptr<File>(std::move(faulty));
  }
  Status Remove(uint64_t number) override { return real_->Remove(number); }
  Status Quarantine(uint64_t number) override { return real_->Quarantine(number); }
  Status SyncDir() override { return real_->SyncDir(); }
  Result<std::string> ReadSuperblock() override { return real_->ReadSuperblock(); }
  Status WriteSuperblock(std::string_view bytes) override { return real_->WriteSuperblock(bytes); }
  Result<std::unique_ptr<File>> OpenCheckpoint() override { return real_->OpenCheckpoint(); }
  Result<std::unique_ptr<File>> CreateCheckpoint() override {
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<File> file, real_->CreateCheckpoint());
    auto faulty = std::make_unique<FaultyFile>(std::move(file));
    if (fail_checkpoint_write_) faulty->FailNextWrite(FaultyFile::Fault::kIoError);
    return std::unique_ptr<File>(std::move(faulty));
  }
  Status PublishCheckpoint() override { return real_->PublishCheckpoint(); }
  Status RemoveCheckpoint() override { return real_->RemoveCheckpoint(); }
  Result<uint64_t> FreeBytes() override { return real_->FreeBytes(); }
  std::string dir() const override { return real_->dir(); }
  std::string PathOf(uint64_t number) const override { return real_->PathOf(number); }
  // The next checkpoint's first write fails with EIO.
  void FailCheckpointWrite() { fail_checkpoint_write_ = true; }

 private:
  std::unique_ptr<SegmentFolder> real_;
  FaultyFile* newest_ = nullptr;  // owned by the tier
  bool fail_checkpoint_write_ = false;
  uint64_t fail_open_ = 0;
  uint64_t fail_read_ = 0;
  int fail_allocates_ = 0;
};

// `n` bytes that follow from `seed` and not repeating within a block: a value whose misplaced
// or stale bytes show.
inline std::vector<char> Bytes(char seed, size_t n) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>(seed + i * 7 + (i >> 9));
  return v;
}

}  // namespace kvport::store::testing
