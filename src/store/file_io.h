// SPDX-License-Identifier: Apache-2.0
// The file I/O seam under the disk tier: the few calls it makes on a file, behind an interface
// tests replace to make them fail (ENOSPC, EIO, a short write). LevelDB's Env idea, kept small.
//
// The real files are opened with O_DIRECT and read and written through io_uring, a ring per
// thread (docs/store.md, "The file seam"), falling back, each logged once with the reason, to
// pread/pwrite on the O_DIRECT file when io_uring is unavailable (ENOSYS under qemu-user, EPERM
// under seccomp, a build without liburing), and to buffered pread/pwrite when the filesystem
// refuses O_DIRECT (EINVAL at open).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
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
  // How its bytes move, for the start line and tests ("io_uring+O_DIRECT", "pread+O_DIRECT",
  // "pread (buffered: DIR's filesystem refuses O_DIRECT)"); empty for a file that does not say.
  virtual std::string io_mode() const { return {}; }
};

// What OpenPosixFile tries; each is the default and falls back on its own when refused. Tests
// turn one off to run the fallback's code on a machine where both work.
struct FileOptions {
  bool direct = true;        // O_DIRECT (buffered when the filesystem refuses it)
  bool use_io_uring = true;  // io_uring (pread/pwrite when unavailable, or when not `direct`)
};

// `path` opened for reading and writing, created (mode 0600) when `create` and absent. Any
// offset, length and buffer work: with O_DIRECT, a request that is not whole aligned blocks in
// aligned memory goes through an aligned bounce buffer covering its blocks (a write of part of a
// block reads the block first); one that is goes direct. Thread-safe for reads from many threads
// beside one writer.
Result<std::unique_ptr<File>> OpenPosixFile(const std::string& path, bool create,
                                            const FileOptions& options = {});

// Empty when io_uring works in this process (decided once, at the first call); otherwise why
// not ("io_uring_queue_init: Function not implemented", "built without liburing").
std::string IoUringUnavailableReason();

// Memory aligned to kFileAlign for the vectors whose bytes are written with O_DIRECT (a
// segment's record buffer), so that they go direct, without a bounce.
inline constexpr size_t kFileAlign = 4096;
template <typename T>
struct FileAlignedAllocator {
  using value_type = T;
  FileAlignedAllocator() = default;
  template <typename U>
  FileAlignedAllocator(const FileAlignedAllocator<U>&) {}  // NOLINT: implicit, as allocators are
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kFileAlign}));
  }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{kFileAlign}); }
  template <typename U>
  bool operator==(const FileAlignedAllocator<U>&) const {
    return true;
  }
};
using FileAlignedBytes = std::vector<char, FileAlignedAllocator<char>>;

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
  // How its segments' bytes move (File::io_mode); empty for a folder that does not say.
  virtual std::string io_mode() const { return {}; }
};

// The folder `dir`, created (mode 0700) when absent; its segments are the files named
// NNNNNNNNNNNNNNNN.seg (16 hex digits), anything else in it is left alone. IoError naming the
// folder when it cannot be created or is not a writable folder (or cannot hold a file). Its
// files are OpenPosixFile's with `options`; io_mode() says how they are read and written, found
// here with a probe file (.kvport-io-probe, removed at once).
Result<std::unique_ptr<SegmentFolder>> OpenSegmentFolder(const std::string& dir,
                                                         const FileOptions& options = {});

}  // namespace kvport::store
