// SPDX-License-Identifier: Apache-2.0
// The file I/O seam under the disk tier: the few calls it makes on a file, behind an interface
// tests replace to make them fail (ENOSPC, EIO, a short write). LevelDB's Env idea, kept small.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kvport/status.h"

namespace kvport::store {

class File {
 public:
  virtual ~File() = default;
  // Writes all `bytes` at `offset`, or fails: NoSpace for a full disk, IoError otherwise (a short
  // write names how much was written; what was is not to be trusted).
  virtual Status WriteAt(uint64_t offset, const void* data, size_t bytes) = 0;
  // Reads up to `bytes` at `offset`: fewer only at the end of the file.
  virtual Result<size_t> ReadAt(uint64_t offset, void* data, size_t bytes) = 0;
  // Makes what was written durable.
  virtual Status Sync() = 0;
  virtual Result<uint64_t> Size() = 0;
};

// `path` opened for reading and writing, created (mode 0600) when `create` and absent.
Result<std::unique_ptr<File>> OpenPosixFile(const std::string& path, bool create);

}  // namespace kvport::store
