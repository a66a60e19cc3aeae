// SPDX-License-Identifier: Apache-2.0
// A disk that stalls on demand, through the disk tier's file seam (store/file_io.h): the real
// folder, whose files' writes and syncs (or reads) wait at a gate while it is closed, as they
// would on a disk that stopped answering. For tests of what must not wait for the disk.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "store/file_io.h"

namespace kvport::store::testing {

// Where stalled calls wait. Closed: a call that reaches it waits until Open.
class StallGate {
 public:
  void Close() {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  void Open() {
    std::lock_guard lock(mu_);
    closed_ = false;
    changed_.notify_all();
  }
  // Called by a stalled file: waits while the gate is closed.
  void Pass() {
    std::unique_lock lock(mu_);
    if (!closed_) return;
    ++waiting_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return !closed_; });
    --waiting_;
  }
  // Waits (at most 30 s: a bound on a broken test, not an expectation) until a call waits at
  // the gate.
  bool WaitForACall() {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(30), [this] { return waiting_ > 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool closed_ = false;
  int waiting_ = 0;
};

class StallingFile final : public File {
 public:
  StallingFile(std::unique_ptr<File> file, StallGate* writes, StallGate* reads)
      : file_(std::move(file)), writes_(writes), reads_(reads) {}
  Status WriteAt(uint64_t offset, const void* data, size_t bytes) override {
    writes_->Pass();
    return file_->WriteAt(offset, data, bytes);
  }
  Result<size_t> ReadAt(uint64_t offset, void* data, size_t bytes) override {
    reads_->Pass();
    return file_->ReadAt(offset, data, bytes);
  }
  Status Sync() override {
    writes_->Pass();
    return file_->Sync();
  }
  Status Truncate(uint64_t size) override { return file_->Truncate(size); }
  Result<uint64_t> Size() override { return file_->Size(); }
  Status Allocate(uint64_t offset, uint64_t bytes) override {
    return file_->Allocate(offset, bytes);
  }
  std::string io_mode() const override { return file_->io_mode(); }

 private:
  std::unique_ptr<File> file_;
  StallGate* writes_;
  StallGate* reads_;
};

// The real folder `dir`, its segments' writes and syncs passing `writes`, their reads `reads`.
// The gates must outlive it.
class StallingFolder final : public SegmentFolder {
 public:
  StallingFolder(std::unique_ptr<SegmentFolder> real, StallGate* writes, StallGate* reads)
      : real_(std::move(real)), writes_(writes), reads_(reads) {}

  Result<std::vector<uint64_t>> List() override { return real_->List(); }
  Result<std::unique_ptr<File>> Open(uint64_t number, bool create) override {
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<File> file, real_->Open(number, create));
    return std::unique_ptr<File>(std::make_unique<StallingFile>(std::move(file), writes_, reads_));
  }
  Status Remove(uint64_t number) override { return real_->Remove(number); }
  Status Quarantine(uint64_t number) override { return real_->Quarantine(number); }
  Status SyncDir() override { return real_->SyncDir(); }
  Result<std::string> ReadSuperblock() override { return real_->ReadSuperblock(); }
  Status WriteSuperblock(std::string_view bytes) override { return real_->WriteSuperblock(bytes); }
  Result<uint64_t> FreeBytes() override { return real_->FreeBytes(); }
  std::string dir() const override { return real_->dir(); }
  std::string PathOf(uint64_t number) const override { return real_->PathOf(number); }
  std::string io_mode() const override { return real_->io_mode(); }

 private:
  std::unique_ptr<SegmentFolder> real_;
  StallGate* writes_;
  StallGate* reads_;
};

}  // namespace kvport::store::testing
