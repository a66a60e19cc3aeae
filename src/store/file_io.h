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
#include <string_view>
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
  // Reserves the disk space of [offset, offset + bytes), so that writes inside it do not fail
  // for want of space (fallocate with FALLOC_FL_KEEP_SIZE: the file's size still follows what
  // is written, so that a record torn by a crash still ends past the end of the file, which is
  // how a restart's scan knows it for torn). NoSpace when the filesystem has no room for it;
  // OK, reserving nothing, where the filesystem cannot reserve (EOPNOTSUPP, logged once).
  virtual Status Allocate(uint64_t offset, uint64_t bytes) = 0;
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

// The disk tier's folder: its numbered segment files, its superblock, its lock. Tests replace
// it to hand out files that fail on demand, or to model a power loss.
//
// Directory changes (a segment created, removed or quarantined) are made durable by SyncDir
// only: until it returns OK, a power loss may undo any of them (a created file vanishes, a
// removed one comes back). The disk tier calls it where it relies on one: after creating a
// segment, before writing to it; after removing segments, before dropping a tombstone that
// hid their records.
class SegmentFolder {
 public:
  virtual ~SegmentFolder() = default;
  // The numbers of the segments present, ascending: every entry named like a segment, whatever
  // it is (Open refuses what is not a regular file).
  virtual Result<std::vector<uint64_t>> List() = 0;
  // Segment `number`. When `create`, a new file (IoError when the name is taken, by anything:
  // an entry there is never reused nor followed). Otherwise the existing one: NotFound when
  // absent, IoError when it is not a regular file of one link (a symbolic link, a folder, a
  // device is never opened).
  virtual Result<std::unique_ptr<File>> Open(uint64_t number, bool create) = 0;
  // Deletes segment `number` (OK when absent); a file still open keeps its bytes until it is
  // closed.
  virtual Status Remove(uint64_t number) = 0;
  // Renames segment `number` aside, to NNNNNNNNNNNNNNNN.seg.quarantined (.quarantined.1, ...
  // when taken), so that it is no longer listed and nothing is lost: for a segment that cannot
  // be opened or scanned, left for the operator to look at.
  virtual Status Quarantine(uint64_t number) = 0;
  // Makes the folder's entries as they are now (creates, removes, renames) durable.
  virtual Status SyncDir() = 0;
  // The superblock's bytes (NotFound when the folder has none), and its replacement, atomic
  // and durable when OK (a temporary file synced, renamed over it, the folder synced): a power
  // loss leaves the old bytes or the new, never a mix.
  virtual Result<std::string> ReadSuperblock() = 0;
  virtual Status WriteSuperblock(std::string_view bytes) = 0;
  // The index checkpoint (index_checkpoint.h), written at a clean stop and read at the next
  // start: the file CHECKPOINT, opened to be read (NotFound when absent; IoError when it is not
  // a regular file of one link); a new empty temporary file to write the next one into
  // (CHECKPOINT.tmp, a leftover there removed first); that temporary renamed over CHECKPOINT;
  // and both removed (OK when absent). The rename and the removal are directory changes:
  // durable only after SyncDir. A folder that keeps no checkpoint answers NotFound, NotSupported,
  // NotSupported and OK (the defaults): its tier scans its segments at every start.
  virtual Result<std::unique_ptr<File>> OpenCheckpoint() {
    return Status::NotFound("this folder keeps no index checkpoint");
  }
  virtual Result<std::unique_ptr<File>> CreateCheckpoint() {
    return Status::NotSupported("this folder keeps no index checkpoint");
  }
  virtual Status PublishCheckpoint() {
    return Status::NotSupported("this folder keeps no index checkpoint");
  }
  virtual Status RemoveCheckpoint() { return Status::Ok(); }
  // Bytes free to this process on the folder's filesystem (statvfs's f_bavail).
  virtual Result<uint64_t> FreeBytes() = 0;
  // The folder, and "DIR/00000042.seg", for messages.
  virtual std::string dir() const = 0;
  virtual std::string PathOf(uint64_t number) const = 0;
  // How its segments' bytes move (File::io_mode); empty for a folder that does not say.
  virtual std::string io_mode() const { return {}; }
};

// The folder `dir`, created (mode 0700) when absent; its segments are the files named
// NNNNNNNNNNNNNNNN.seg (16 hex digits), its superblock the file SUPERBLOCK, its index checkpoint
// the file CHECKPOINT, its lock the file LOCK; anything else in it is left alone. Every file in it
// is opened relative to the folder's descriptor without following a link (O_NOFOLLOW), and created
// with O_EXCL; `dir` itself may be a link (the operator's configuration names it).
//
// Refused, each with the reason and the fix: a path that cannot be created or is not a
// folder (IoError); a folder that is group- or world-writable or owned by another user than
// the process's effective one (PermissionDenied: another user could plant or swap its files);
// a folder another process, or another SegmentFolder of this one, holds (Unavailable, naming
// the holder's pid). The lock is an flock on LOCK, which holds this process's pid, kept until
// the folder is destroyed (and released by the kernel when the process dies, kill -9 too).
//
// Its files are OpenPosixFile's with `options`; io_mode() says how they are read and written,
// found here with a probe file (.kvport-io-probe, removed at once). The first call also sets
// SIGXFSZ to be ignored when it is at its default (a write past RLIMIT_FSIZE then fails with
// EFBIG, which the tier reports, instead of killing the process without a word).
Result<std::unique_ptr<SegmentFolder>> OpenSegmentFolder(const std::string& dir,
                                                         const FileOptions& options = {});

}  // namespace kvport::store
