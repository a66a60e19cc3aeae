// SPDX-License-Identifier: Apache-2.0
#include "store/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#if KVPORT_HAVE_LIBURING
#include <liburing.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "kvport/log.h"
#include "store/disk_record.h"

namespace kvport::store {
namespace {

static_assert(kFileAlign == kDiskBlock, "O_DIRECT I/O is in the disk tier's blocks");

constexpr uint64_t AlignDown(uint64_t v) {
  return v & ~(uint64_t{kFileAlign} - 1);
}
constexpr uint64_t AlignUp(uint64_t v) {
  return AlignDown(v + kFileAlign - 1);
}
bool Aligned(uint64_t v) {
  return v % kFileAlign == 0;
}
bool Aligned(const void* p) {
  return Aligned(reinterpret_cast<uintptr_t>(p));
}

// One operation's length at most (a read or write may move fewer bytes; the loops go on).
constexpr size_t kMaxOp = size_t{1} << 30;

#if KVPORT_HAVE_LIBURING
// Bumped in a forked child: a ring made before the fork is the parent's, never used again there.
std::atomic<uint64_t> fork_generation{0};

// Held while a ring is made, and taken for a moment before one is unmapped. A ring's memory is
// mapped by the kernel, so a thread's new ring may land where a finished thread's was; the
// kernel orders the unmap before the map, and this mutex says so to ThreadSanitizer, which
// cannot see it (it would report the two threads' writes to the ring as a race).
std::mutex ring_lifetimes;

int InitRing(unsigned entries, io_uring* ring) {
  std::lock_guard lock(ring_lifetimes);
  return io_uring_queue_init(entries, ring, 0);
}

void ExitRing(io_uring* ring) {
  { std::lock_guard lock(ring_lifetimes); }
  io_uring_queue_exit(ring);
}

// The calling thread's ring: I/O threads read concurrently, each on its own ring, and the
// disk tier's writer writes on its own; nothing is shared, so nothing is locked. One request in
// flight at a time (the callers are synchronous).
class Ring {
 public:
  ~Ring() { Close(); }

  // 0, or -errno when this thread cannot have a ring.
  int Open() {
    const uint64_t generation = fork_generation.load(std::memory_order_relaxed);
    if (ready_ && generation_ == generation) return 0;
    Close();  // a forked child's copy of its parent's ring: the child's fd and mappings only
    const int rc = InitRing(4, &ring_);
    if (rc < 0) return rc;
    ready_ = true;
    generation_ = generation;
    return 0;
  }

  // One read or write: the bytes moved, or -errno.
  ssize_t Do(bool write, int fd, void* buffer, size_t bytes, uint64_t offset) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return -EBUSY;  // cannot happen: one request at a time
    const auto n = static_cast<unsigned>(std::min(bytes, kMaxOp));
    if (write) {
      io_uring_prep_write(sqe, fd, buffer, n, offset);
    } else {
      io_uring_prep_read(sqe, fd, buffer, n, offset);
    }
    int rc = 0;
    do {
      rc = io_uring_submit(&ring_);
    } while (rc == -EINTR);
    io_uring_cqe* cqe = nullptr;
    if (rc >= 0) {
      do {
        rc = io_uring_wait_cqe(&ring_, &cqe);
      } while (rc == -EINTR);
    }
    if (rc < 0) {
      // The request may still sit in the ring: drop the ring, so that it never runs later on
      // memory that is gone; the next call makes a new one.
      Close();
      return rc;
    }
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    return res;
  }

 private:
  void Close() {
    if (ready_) ExitRing(&ring_);
    ready_ = false;
  }
  io_uring ring_{};
  bool ready_ = false;
  uint64_t generation_ = 0;
};

thread_local Ring this_thread_ring;
#endif

// Whether io_uring works in this process, found once: a ring made, and the read and write
// operations offered.
const std::string& UringUnavailable() {
  static const std::string* why = [] {
#if KVPORT_HAVE_LIBURING
    io_uring ring{};
    const int rc = InitRing(1, &ring);
    if (rc < 0) {
      return new std::string("io_uring_queue_init: " + std::string(std::strerror(-rc)));
    }
    io_uring_probe* probe = io_uring_get_probe_ring(&ring);
    const bool ops = probe != nullptr && io_uring_opcode_supported(probe, IORING_OP_READ) &&
                     io_uring_opcode_supported(probe, IORING_OP_WRITE);
    if (probe != nullptr) io_uring_free_probe(probe);
    ExitRing(&ring);
    if (!ops) return new std::string("the kernel's io_uring has no read and write operations");
    // ring_lifetimes held across a fork, so that a child never inherits it locked.
    pthread_atfork([] { ring_lifetimes.lock(); }, [] { ring_lifetimes.unlock(); },
                   [] {
                     ring_lifetimes.unlock();
                     fork_generation.fetch_add(1, std::memory_order_relaxed);
                   });
    return new std::string();
#else
    return new std::string("built without liburing");
#endif
  }();
  return *why;
}

// A fallback is logged once per process, with its reason.
void LogOnce(std::atomic<bool>& logged, const std::string& message) {
  if (!logged.exchange(true)) log::Warn("disk tier: {}", message);
}
std::atomic<bool> logged_no_uring{false};
std::atomic<bool> logged_thread_ring{false};
std::atomic<bool> logged_no_direct{false};

// Aligned scratch for the requests that cannot go direct: the calling thread's, reused up to
// kKeepBounce bytes, a buffer of the request's own above that.
constexpr size_t kKeepBounce = size_t{1} << 20;
class Bounce {
 public:
  explicit Bounce(size_t bytes) {
    thread_local FileAlignedBytes kept;
    if (bytes <= kKeepBounce) {
      if (kept.size() < bytes) kept.resize(std::max(bytes, size_t{64} << 10));
      data_ = kept.data();
    } else {
      own_.resize(bytes);
      data_ = own_.data();
    }
  }
  char* data() { return data_; }

 private:
  FileAlignedBytes own_;
  char* data_ = nullptr;
};

class PosixFile final : public File {
 public:
  PosixFile(int fd, std::string path, bool direct, bool uring, std::string mode)
      : fd_(fd), path_(std::move(path)), direct_(direct), uring_(uring), mode_(std::move(mode)) {}
  ~PosixFile() override { ::close(fd_); }

  Status WriteAt(uint64_t offset, const void* data, size_t bytes) override {
    if (bytes == 0) return Status::Ok();
    if (!direct_ || (Aligned(offset) && Aligned(bytes) && Aligned(data))) {
      size_t done = 0;
      const int err = Transfer(true, const_cast<void*>(data), bytes, offset, &done);
      return err == 0 ? Status::Ok() : WriteError(offset, bytes, done, err);
    }
    // Part of a block, or memory that is not aligned: the covering blocks, in aligned memory,
    // the partial first and last read first so that their other bytes stay.
    const uint64_t start = AlignDown(offset), end = AlignUp(offset + bytes);
    const size_t span = end - start;
    Bounce bounce(span);
    KVPORT_ASSIGN_OR_RETURN(const uint64_t size, Size());
    if (start != offset) KVPORT_RETURN_IF_ERROR(ReadBlock(start, bounce.data()));
    if (end != offset + bytes && (end - kFileAlign != start || start == offset)) {
      KVPORT_RETURN_IF_ERROR(ReadBlock(end - kFileAlign, bounce.data() + span - kFileAlign));
    }
    std::memcpy(bounce.data() + (offset - start), data, bytes);
    size_t done = 0;
    if (const int err = Transfer(true, bounce.data(), span, start, &done); err != 0) {
      const size_t head = offset - start;
      return WriteError(offset, bytes, std::min<size_t>(done > head ? done - head : 0, bytes), err);
    }
    // The blocks went whole; the file ends where a buffered write would have left it.
    const uint64_t new_size = std::max<uint64_t>(size, offset + bytes);
    if (end > new_size) return Truncate(new_size);
    return Status::Ok();
  }

  Result<size_t> ReadAt(uint64_t offset, void* data, size_t bytes) override {
    if (bytes == 0) return size_t{0};
    if (!direct_ || (Aligned(offset) && Aligned(bytes) && Aligned(data))) {
      size_t done = 0;
      if (const int err = Transfer(false, data, bytes, offset, &done); err != 0) {
        return ReadError(offset, bytes, err);
      }
      return done;
    }
    const uint64_t start = AlignDown(offset), end = AlignUp(offset + bytes);
    Bounce bounce(end - start);
    size_t got = 0;
    if (const int err = Transfer(false, bounce.data(), end - start, start, &got); err != 0) {
      return ReadError(offset, bytes, err);
    }
    const size_t head = offset - start;
    if (got <= head) return size_t{0};
    const size_t n = std::min(bytes, got - head);
    std::memcpy(data, bounce.data() + head, n);
    return n;
  }

  Status Sync() override {
    if (::fdatasync(fd_) == 0) return Status::Ok();
    return Status::FromErrno("fdatasync of " + path_, errno);
  }

  Status Truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) == 0) return Status::Ok();
    return Status::FromErrno("ftruncate of " + path_, errno);
  }

  Result<uint64_t> Size() override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return Status::FromErrno("fstat of " + path_, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  std::string io_mode() const override { return mode_; }

 private:
  // One read or write: the bytes moved or -errno, through this thread's ring or pread/pwrite.
  ssize_t Once(bool write, void* buffer, size_t bytes, uint64_t offset) {
    bytes = std::min(bytes, kMaxOp);
#if KVPORT_HAVE_LIBURING
    if (uring_) {
      const int rc = this_thread_ring.Open();
      if (rc == 0) return this_thread_ring.Do(write, fd_, buffer, bytes, offset);
      LogOnce(logged_thread_ring, "a thread could not make its io_uring ring (" +
                                      std::string(std::strerror(-rc)) +
                                      "): its reads and writes use pread/pwrite");
    }
#endif
    const ssize_t n = write ? ::pwrite(fd_, buffer, bytes, static_cast<off_t>(offset))
                            : ::pread(fd_, buffer, bytes, static_cast<off_t>(offset));
    return n < 0 ? -errno : n;
  }

  // All `bytes`, or fewer at the end of the file (a read); *done says how many moved. 0, or the
  // errno of the failure (EIO for a write that made no progress).
  int Transfer(bool write, void* buffer, size_t bytes, uint64_t offset, size_t* done) {
    *done = 0;
    while (*done < bytes) {
      const ssize_t n =
          Once(write, static_cast<char*>(buffer) + *done, bytes - *done, offset + *done);
      if (n == -EINTR || n == -EAGAIN) continue;
      if (n < 0) return static_cast<int>(-n);
      if (n == 0) return write ? EIO : 0;  // a read: the end of the file
      *done += static_cast<size_t>(n);
      // With O_DIRECT the next request must start on a block: a read that ended inside one
      // reached the end of the file; a write that did is short.
      if (direct_ && !Aligned(*done) && *done < bytes) return write ? EIO : 0;
    }
    return 0;
  }

  // The block at `offset` into `out`, zeros past the end of the file.
  Status ReadBlock(uint64_t offset, char* out) {
    size_t got = 0;
    if (const int err = Transfer(false, out, kFileAlign, offset, &got); err != 0) {
      return ReadError(offset, kFileAlign, err);
    }
    std::memset(out + got, 0, kFileAlign - got);
    return Status::Ok();
  }

  Status WriteError(uint64_t offset, size_t bytes, size_t done, int err) const {
    const std::string what = "write of " + std::to_string(bytes) + " bytes at " +
                             std::to_string(offset) + " of " + path_ + " (" + std::to_string(done) +
                             " written)";
    return err == ENOSPC || err == EDQUOT ? Status::NoSpace(what + ": the disk is full")
                                          : Status::FromErrno(what, err);
  }

  Status ReadError(uint64_t offset, size_t bytes, int err) const {
    return Status::FromErrno(
        "read of " + std::to_string(bytes) + " bytes at " + std::to_string(offset) + " of " + path_,
        err);
  }

  const int fd_;
  const std::string path_;
  const bool direct_;
  const bool uring_;
  const std::string mode_;
};

std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

class PosixSegmentFolder final : public SegmentFolder {
 public:
  PosixSegmentFolder(std::string dir, const FileOptions& options, std::string mode)
      : dir_(std::move(dir)), options_(options), mode_(std::move(mode)) {}

  Result<std::vector<uint64_t>> List() override {
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return Status::FromErrno("opendir " + dir_, errno);
    std::vector<uint64_t> numbers;
    while (const dirent* e = ::readdir(d)) {
      const std::string_view name = e->d_name;
      if (name.size() != 20 || !name.ends_with(".seg")) continue;
      uint64_t n = 0;
      bool hex = true;
      for (char c : name.substr(0, 16)) {
        const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (digit < 0) hex = false;
        n = n * 16 + static_cast<uint64_t>(std::max(digit, 0));
      }
      if (hex) numbers.push_back(n);
    }
    ::closedir(d);
    std::sort(numbers.begin(), numbers.end());
    return numbers;
  }

  Result<std::unique_ptr<File>> Open(uint64_t number, bool create) override {
    if (!create && ::access(PathOf(number).c_str(), F_OK) != 0 && errno == ENOENT) {
      return Status::NotFound(PathOf(number) + " does not exist");
    }
    return OpenPosixFile(PathOf(number), create, options_);
  }

  Status Remove(uint64_t number) override {
    if (::unlink(PathOf(number).c_str()) == 0 || errno == ENOENT) return Status::Ok();
    return Status::FromErrno("unlink " + PathOf(number), errno);
  }

  std::string PathOf(uint64_t number) const override {
    return fmt::format("{}/{:016x}.seg", dir_, number);
  }

  std::string io_mode() const override { return mode_; }

 private:
  const std::string dir_;
  const FileOptions options_;
  const std::string mode_;
};

}  // namespace

std::string IoUringUnavailableReason() {
  return UringUnavailable();
}

Result<std::unique_ptr<SegmentFolder>> OpenSegmentFolder(const std::string& dir,
                                                         const FileOptions& options) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno("the disk tier's folder " + dir + " cannot be created", errno);
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno("stat " + dir, errno);
  if (!S_ISDIR(st.st_mode)) {
    return Status::IoError("the disk tier's folder " + dir + " is not a folder");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Status::FromErrno("the disk tier's folder " + dir + " is not writable", errno);
  }
  // How its segments will be read and written, found with a file of its own before there is any
  // segment, so that the start line can say it.
  const std::string probe_path = dir + "/.kvport-io-probe";
  Result<std::unique_ptr<File>> probe = OpenPosixFile(probe_path, /*create=*/true, options);
  ::unlink(probe_path.c_str());
  if (!probe.ok()) {
    return Status::IoError("the disk tier's folder " + dir +
                           " cannot hold a file: " + probe.status().ToString());
  }
  return std::unique_ptr<SegmentFolder>(new PosixSegmentFolder(dir, options, (*probe)->io_mode()));
}

Result<std::unique_ptr<File>> OpenPosixFile(const std::string& path, bool create,
                                            const FileOptions& options) {
  const int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0);
  int fd = -1;
  bool direct = options.direct;
  std::string mode;
  if (direct) {
    fd = ::open(path.c_str(), flags | O_DIRECT, 0600);
    if (fd < 0 && errno == EINVAL) {
      direct = false;
      mode = "pread (buffered: " + DirOf(path) + "'s filesystem refuses O_DIRECT)";
      LogOnce(logged_no_direct, DirOf(path) +
                                    "'s filesystem refuses O_DIRECT (open: EINVAL): its files "
                                    "are read and written buffered, with pread/pwrite");
    }
  }
  if (!direct) fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  bool uring = false;
  if (direct && options.use_io_uring) {
    const std::string& why = UringUnavailable();
    uring = why.empty();
    if (!uring) {
      LogOnce(logged_no_uring, "io_uring is unavailable (" + why +
                                   "): O_DIRECT files are read and written with pread/pwrite");
    }
  }
  if (mode.empty()) {
    mode = direct ? (uring ? "io_uring+O_DIRECT" : "pread+O_DIRECT") : "pread (buffered)";
  }
  return std::unique_ptr<File>(new PosixFile(fd, path, direct, uring, std::move(mode)));
}

}  // namespace kvport::store
