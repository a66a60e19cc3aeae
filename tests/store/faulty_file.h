// SPDX-License-Identifier: Apache-2.0
// A file whose next write fails as told, or whose next read fails with EIO: the disk tier's
// fault injection through its file seam (store/file_io.h).
#pragma once

#include <memory>

#include "store/file_io.h"

namespace kvport::store::testing {

class FaultyFile final : public File {
 public:
  explicit FaultyFile(std::unique_ptr<File> file) : file_(std::move(file)) {}
  enum class Fault { kNone, kNoSpace, kIoError, kShortWrite };
  void FailNextWrite(Fault fault) { fault_ = fault; }
  void FailNextRead() { fail_read_ = true; }

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
  Status Sync() override { return file_->Sync(); }
  Status Truncate(uint64_t size) override { return file_->Truncate(size); }
  Result<uint64_t> Size() override { return file_->Size(); }

 private:
  std::unique_ptr<File> file_;
  Fault fault_ = Fault::kNone;
  bool fail_read_ = false;
};

}  // namespace kvport::store::testing
