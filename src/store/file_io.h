// SPDX-License-Identifier: Apache-2.0
// The file I/O seam under the disk tier: the few calls it makes on a file, behind an interface
// tests replace to make them fail (ENOSPC, EIO, a short write). LevelDB's Env idea, kept small.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
  // Cuts the file to `size` bytes (the disk tier drops a torn tail this way).
  virtual Status Truncate(uint64_t size) = 0;
  virtual Result<uint64_t> Size() = 0;
};

// `path` opened for reading and writing, created (mode 0600) when `create` and absent.
Result<std::unique_ptr<File>> OpenPosixFile(const std::string& path, bool create);

// The disk tier's folder: its numbered segment files. Tests replace it to hand out files that
// fail on demand.
class SegmentFolder {
 public:
  virtual ~SegmentFolder() = default;
  // The numbers of the segments present, ascending.
  virtual Result<std::vector<uint64_t>> List() = 0;
  // Segment `number`, created when `create` (NotFound when absent and not `create`).
  virtual Result<std::unique_ptr<File>> Open(uint64_t number, bool create) = 0;
  // Deletes segment `number`; a file still open keeps its bytes until it is closed.
  virtual Status Remove(uint64_t number) = 0;
  // "DIR/00000042.seg", for messages.
  virtual std::string PathOf(uint64_t number) const = 0;
};

// The folder `dir`, created (mode 0700) when absent; its segments are the files named
// NNNNNNNNNNNNNNNN.seg (16 hex digits), anything else in it is left alone. IoError naming the
// folder when it cannot be created or is not a writable folder.
Result<std::unique_ptr<SegmentFolder>> OpenSegmentFolder(const std::string& dir);

}  // namespace kvport::store
