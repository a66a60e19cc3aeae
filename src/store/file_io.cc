// SPDX-License-Identifier: Apache-2.0
#include "store/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
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

// A fallback is logged once per process, with its reason.
void LogOnce(std::atomic<bool>& logged, const std::string& message) {
  if (!logged.exchange(true)) log::Warn("disk tier: {}", message);
}
std::atomic<bool> logged_no_uring{false};
std::atomic<bool> logged_thread_ring{false};
std::atomic<bool> logged_no_direct{false};
std::atomic<bool> logged_wait_failed{false};
std::atomic<bool> logged_no_fallocate{false};

std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

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
    if (disabled_) return -EIO;
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
    if (rc <= 0) {
      // Not taken by the kernel (a failed io_uring_enter consumes nothing): nothing is in
      // flight, so the ring can go; the next call makes a new one.
      Close();
      return rc < 0 ? rc : -EIO;
    }
    io_uring_cqe* cqe = nullptr;
    Wait(&cqe);
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    if (disabled_) Close();  // nothing in flight any more: the ring can go
    return res;
  }

 private:
  // Waits for the completion of the one request in flight. It never returns before the kernel
  // is done with the request: until then the kernel may still be moving bytes into or out of
  // the caller's buffer (O_DIRECT DMA), which the caller frees or reuses as soon as this
  // returns. Closing the ring would not do: its exit cancels requests in the background and
  // does not wait for them. So a wait that fails (other than EINTR, retried) is not given up
  // on: the completion is looked for in the ring's completion queue, which the kernel fills
  // in shared memory whether or not anyone waits in io_uring_enter, a short sleep between
  // looks (each sleep also runs the task work that posts completions). The ring is not trusted
  // again: this thread's later calls use pread/pwrite (Open fails), logged once.
  void Wait(io_uring_cqe** cqe) {
    for (int failures = 0;;) {
      const int rc = io_uring_wait_cqe(&ring_, cqe);
      if (rc == 0 && *cqe != nullptr) return;
      if (rc == -EINTR) continue;
      if ((rc == -EAGAIN || rc == -EBUSY) && ++failures < 100) continue;
      LogOnce(logged_wait_failed, "waiting for an io_uring completion failed (" +
                                      std::string(std::strerror(rc < 0 ? -rc : EIO)) +
                                      "): the request is waited for by polling its ring, and "
                                      "the thread's later reads and writes use pread/pwrite");
      break;
    }
    disabled_ = true;
    while (io_uring_peek_cqe(&ring_, cqe) != 0 || *cqe == nullptr) {
      const timespec pause{0, 100 * 1000};  // 100 us
      ::nanosleep(&pause, nullptr);
    }
  }

  void Close() {
    if (ready_) ExitRing(&ring_);
    ready_ = false;
  }
  io_uring ring_{};
  bool ready_ = false;
  bool disabled_ = false;  // a wait on it failed: never used again
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

  Status Allocate(uint64_t offset, uint64_t bytes) override {
    if (bytes == 0) return Status::Ok();
    int rc = 0;
    do {
      rc = ::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                       static_cast<off_t>(bytes));
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) return Status::Ok();
    const int err = errno;
    const std::string what = fmt::format("reserving {} bytes at {} of {}", bytes, offset, path_);
    if (err == EOPNOTSUPP || err == ENOSYS) {
      LogOnce(logged_no_fallocate,
              DirOf(path_) +
                  "'s filesystem cannot reserve space (fallocate: " + std::strerror(err) +
                  "): segments grow as they are written, and a full disk "
                  "fails the write that finds it");
      return Status::Ok();
    }
    if (err == ENOSPC || err == EDQUOT) return Status::NoSpace(what + ": the disk is full");
    return Status::FromErrno(what, err);
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

// A descriptor closed when it goes out of scope, unless released.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::string KindOf(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

// A file of the folder is used only as a regular file of one link: anything else (a link
// planted to make the node write through it, a folder or a device named like its file) is
// refused, never opened for writing.
Status CheckRegular(const struct stat& st, const std::string& path) {
  if (!S_ISREG(st.st_mode)) {
    return Status::IoError(path + " is " + KindOf(st.st_mode) +
                           ", not a regular file: never opened (nor followed)");
  }
  if (st.st_nlink != 1) {
    return Status::IoError(
        fmt::format("{} has {} links: another name could be written through it, so it is not used",
                    path, st.st_nlink));
  }
  return Status::Ok();
}

// `name` under `dirfd` (AT_FDCWD and a path for OpenPosixFile), opened for reading and
// writing. `strict` (a file of the folder): never through a link, created only new (O_EXCL),
// and only a regular file of one link; O_NONBLOCK at the open, so that a FIFO planted under the
// name does not block it, cleared before any I/O (io_uring would fail with EAGAIN what would
// block rather than wait).
Result<std::unique_ptr<File>> OpenFileAt(int dirfd, const std::string& name,
                                         const std::string& path, bool create,
                                         const FileOptions& options, bool strict) {
  int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0);
  if (strict) flags |= O_NOFOLLOW | O_NONBLOCK | (create ? O_EXCL : 0);
  int fd = -1;
  bool direct = options.direct;
  std::string mode;
  if (direct) {
    fd = ::openat(dirfd, name.c_str(), flags | O_DIRECT, 0600);
    if (fd < 0 && errno == EINVAL) {
      direct = false;
      mode = "pread (buffered: " + DirOf(path) + "'s filesystem refuses O_DIRECT)";
      LogOnce(logged_no_direct, DirOf(path) +
                                    "'s filesystem refuses O_DIRECT (open: EINVAL): its files "
                                    "are read and written buffered, with pread/pwrite");
      // The refusal comes after the file was made: an O_EXCL create that got this far made
      // it, so it is opened as it is now (checked below like any other).
      if ((flags & O_EXCL) != 0) flags &= ~(O_CREAT | O_EXCL);
    }
  }
  if (!direct) fd = ::openat(dirfd, name.c_str(), flags, 0600);
  if (fd < 0) {
    const int err = errno;
    if (strict && err == ELOOP) {
      return Status::IoError(path + " is a symbolic link: never followed");
    }
    if (strict && err == EEXIST) {
      return Status::IoError(path + " already exists: a new file is never made over another");
    }
    return Status::FromErrno("open " + path, err);
  }
  Fd guard(fd);
  if (strict) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return Status::FromErrno("fstat of " + path, errno);
    KVPORT_RETURN_IF_ERROR(CheckRegular(st, path));
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
      return Status::FromErrno("fcntl of " + path, errno);
    }
  }
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
  return std::unique_ptr<File>(
      new PosixFile(guard.release(), path, direct, uring, std::move(mode)));
}

constexpr const char* kSuperblockName = "SUPERBLOCK";
constexpr const char* kSuperblockTemp = "SUPERBLOCK.tmp";
constexpr const char* kCheckpointName = "CHECKPOINT";
constexpr const char* kCheckpointTemp = "CHECKPOINT.tmp";
constexpr const char* kLockName = "LOCK";
constexpr const char* kProbeName = ".kvport-io-probe";
constexpr size_t kMaxSuperblockBytes = 4096;

class PosixSegmentFolder final : public SegmentFolder {
 public:
  PosixSegmentFolder(std::string dir, int dir_fd, int lock_fd, const FileOptions& options,
                     std::string mode)
      : dir_(std::move(dir)),
        dir_fd_(dir_fd),
        lock_fd_(lock_fd),
        options_(options),
        mode_(std::move(mode)) {}
  // Closing LOCK's descriptor releases the lock.
  ~PosixSegmentFolder() override {
    ::close(lock_fd_);
    ::close(dir_fd_);
  }

  Result<std::vector<uint64_t>> List() override {
    // A descriptor of its own (a directory stream's position is its open file's).
    const int fd = ::openat(dir_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("opendir " + dir_, errno);
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      const int err = errno;
      ::close(fd);
      return Status::FromErrno("opendir " + dir_, err);
    }
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
    const std::string name = NameOf(number);
    if (!create) {
      struct stat st {};
      if (::fstatat(dir_fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return Status::NotFound(PathOf(number) + " does not exist");
        return Status::FromErrno("stat " + PathOf(number), errno);
      }
      KVPORT_RETURN_IF_ERROR(CheckRegular(st, PathOf(number)));
    }
    return OpenFileAt(dir_fd_, name, PathOf(number), create, options_, /*strict=*/true);
  }

  Status Remove(uint64_t number) override {
    if (::unlinkat(dir_fd_, NameOf(number).c_str(), 0) == 0 || errno == ENOENT) {
      return Status::Ok();
    }
    return Status::FromErrno("unlink " + PathOf(number), errno);
  }

  Status Quarantine(uint64_t number) override {
    const std::string name = NameOf(number);
    for (int i = 0; i < 100; ++i) {
      const std::string aside = name + ".quarantined" + (i == 0 ? "" : "." + std::to_string(i));
      struct stat st {};
      if (::fstatat(dir_fd_, aside.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) continue;  // taken
      if (::renameat(dir_fd_, name.c_str(), dir_fd_, aside.c_str()) == 0) return Status::Ok();
      return Status::FromErrno("rename " + PathOf(number) + " to " + aside, errno);
    }
    return Status::IoError("rename " + PathOf(number) + " aside: every .quarantined name is taken");
  }

  Status SyncDir() override {
    if (::fsync(dir_fd_) == 0) return Status::Ok();
    return Status::FromErrno("fsync of the folder " + dir_, errno);
  }

  Result<std::string> ReadSuperblock() override {
    const std::string path = dir_ + "/" + kSuperblockName;
    const int fd =
        ::openat(dir_fd_, kSuperblockName, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
      if (errno == ENOENT) return Status::NotFound(path + " does not exist");
      if (errno == ELOOP) return Status::IoError(path + " is a symbolic link: never followed");
      return Status::FromErrno("open " + path, errno);
    }
    Fd guard(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) return Status::FromErrno("fstat of " + path, errno);
    if (!S_ISREG(st.st_mode)) {
      return Status::IoError(path + " is " + KindOf(st.st_mode) + ", not a regular file");
    }
    std::string bytes(kMaxSuperblockBytes, '\0');
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n =
          ::pread(fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno("read of " + path, errno);
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    bytes.resize(got);
    return bytes;
  }

  Status WriteSuperblock(std::string_view bytes) override {
    const std::string temp = dir_ + "/" + kSuperblockTemp;
    // A leftover of a write cut short goes first: the new file is made with O_EXCL, never
    // through whatever is under the name.
    if (::unlinkat(dir_fd_, kSuperblockTemp, 0) != 0 && errno != ENOENT) {
      return Status::FromErrno("unlink " + temp, errno);
    }
    const int fd = ::openat(dir_fd_, kSuperblockTemp,
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return Status::FromErrno("create " + temp, errno);
    {
      Fd guard(fd);
      size_t done = 0;
      while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return Status::FromErrno("write of " + temp, n < 0 ? errno : EIO);
        done += static_cast<size_t>(n);
      }
      if (::fsync(fd) != 0) return Status::FromErrno("fsync of " + temp, errno);
    }
    if (::renameat(dir_fd_, kSuperblockTemp, dir_fd_, kSuperblockName) != 0) {
      return Status::FromErrno("rename " + temp + " to " + kSuperblockName, errno);
    }
    return SyncDir();
  }

  Result<std::unique_ptr<File>> OpenCheckpoint() override {
    const std::string path = dir_ + "/" + kCheckpointName;
    struct stat st {};
    if (::fstatat(dir_fd_, kCheckpointName, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return Status::NotFound(path + " does not exist");
      return Status::FromErrno("stat " + path, errno);
    }
    KVPORT_RETURN_IF_ERROR(CheckRegular(st, path));
    return OpenFileAt(dir_fd_, kCheckpointName, path, /*create=*/false, options_, /*strict=*/true);
  }

  Result<std::unique_ptr<File>> CreateCheckpoint() override {
    const std::string temp = dir_ + "/" + kCheckpointTemp;
    // A leftover of a stop cut short goes first: the new file is made with O_EXCL.
    if (::unlinkat(dir_fd_, kCheckpointTemp, 0) != 0 && errno != ENOENT) {
      return Status::FromErrno("unlink " + temp, errno);
    }
    return OpenFileAt(dir_fd_, kCheckpointTemp, temp, /*create=*/true, options_, /*strict=*/true);
  }

  Status PublishCheckpoint() override {
    if (::renameat(dir_fd_, kCheckpointTemp, dir_fd_, kCheckpointName) != 0) {
      return Status::FromErrno("rename " + dir_ + "/" + kCheckpointTemp + " to " + kCheckpointName,
                               errno);
    }
    return Status::Ok();
  }

  Status RemoveCheckpoint() override {
    for (const char* name : {kCheckpointName, kCheckpointTemp}) {
      if (::unlinkat(dir_fd_, name, 0) != 0 && errno != ENOENT) {
        return Status::FromErrno("unlink " + dir_ + "/" + name, errno);
      }
    }
    return Status::Ok();
  }

  Result<uint64_t> FreeBytes() override {
    struct statvfs fs {};
    if (::fstatvfs(dir_fd_, &fs) != 0) return Status::FromErrno("statvfs " + dir_, errno);
    return uint64_t{fs.f_bavail} * fs.f_frsize;
  }

  std::string dir() const override { return dir_; }
  std::string PathOf(uint64_t number) const override { return dir_ + "/" + NameOf(number); }
  std::string io_mode() const override { return mode_; }

 private:
  static std::string NameOf(uint64_t number) { return fmt::format("{:016x}.seg", number); }

  const std::string dir_;
  const int dir_fd_;   // every file is opened relative to it
  const int lock_fd_;  // LOCK, flocked
  const FileOptions options_;
  const std::string mode_;
};

// A write past RLIMIT_FSIZE raises SIGXFSZ, whose default action kills the process without a
// word (a core, at most). Ignored, the write fails with EFBIG instead, which the tier reports as
// a failed put and a line in the log. Done here, where the disk tier's folder is opened, rather
// than in `kvport serve` alone, so that every process with a disk tier gets it (a node
// embedded in another program, a test); left alone when a handler is installed already (the
// host program's choice).
void IgnoreFileSizeSignal() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (::sigaction(SIGXFSZ, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
        (current.sa_flags & SA_SIGINFO) == 0) {
      ::signal(SIGXFSZ, SIG_IGN);
    }
  });
}

// Takes the folder's lock (LOCK, flocked for the process's life, holding its pid): the
// descriptor, or why not.
Result<int> LockFolder(int dir_fd, const std::string& dir) {
  const std::string path = dir + "/" + kLockName;
  const int fd =
      ::openat(dir_fd, kLockName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd < 0) {
    if (errno == ELOOP) return Status::IoError(path + " is a symbolic link: never followed");
    return Status::FromErrno("open " + path, errno);
  }
  Fd guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno("fstat of " + path, errno);
  KVPORT_RETURN_IF_ERROR(CheckRegular(st, path));
  // flock, not fcntl's locks: one per open file description, so that a second SegmentFolder of
  // the same process conflicts too, and never dropped by closing another descriptor of it.
  int rc = 0;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) return Status::FromErrno("flock " + path, err);
    char holder[32] = {};
    const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
    std::string pid = n > 0 ? std::string(holder, static_cast<size_t>(n)) : std::string();
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' '))
      pid.pop_back();
    if (pid.empty()) pid = "unknown";
    return Status::Unavailable(fmt::format(
        "the disk tier's folder {} is in use by another disk tier (pid {} holds {}): two on "
        "one folder would write over each other's segments; stop that one, or give this node "
        "another disk_dir",
        dir, pid, path));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    return Status::FromErrno("write of " + path, errno);
  }
  return guard.release();
}

}  // namespace

std::string IoUringUnavailableReason() {
  return UringUnavailable();
}

Result<std::unique_ptr<SegmentFolder>> OpenSegmentFolder(const std::string& dir,
                                                         const FileOptions& options) {
  IgnoreFileSizeSignal();
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno("the disk tier's folder " + dir + " cannot be created", errno);
  }
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    if (errno == ENOTDIR) {
      return Status::IoError("the disk tier's folder " + dir + " is not a folder");
    }
    return Status::FromErrno("the disk tier's folder " + dir + " cannot be opened", errno);
  }
  Fd dir_guard(dir_fd);
  struct stat st {};
  if (::fstat(dir_fd, &st) != 0) return Status::FromErrno("fstat " + dir, errno);
  // Whoever else can write to the folder can plant or swap its files (a link named like a
  // segment, a superblock of their own): refused before anything in it is read.
  if (st.st_uid != ::geteuid()) {
    return Status::PermissionDenied(fmt::format(
        "the disk tier's folder {} belongs to uid {}, not to this process's uid {}: another "
        "user could plant or swap its files; give it to this user (chown {} {}) or choose "
        "another disk_dir",
        dir, st.st_uid, ::geteuid(), ::geteuid(), dir));
  }
  if ((st.st_mode & 022) != 0) {
    const char* who = (st.st_mode & 022) == 022 ? "its group and others"
                      : (st.st_mode & 020) != 0 ? "its group"
                                                : "others";
    return Status::PermissionDenied(fmt::format(
        "the disk tier's folder {} is writable by {} (mode {:04o}): they could plant or swap "
        "its files; restrict it (chmod 0700 {})",
        dir, who, st.st_mode & 07777, dir));
  }
  if (::faccessat(dir_fd, ".", W_OK | X_OK, 0) != 0) {
    return Status::FromErrno("the disk tier's folder " + dir + " is not writable", errno);
  }
  KVPORT_ASSIGN_OR_RETURN(const int lock_fd, LockFolder(dir_fd, dir));
  Fd lock_guard(lock_fd);
  // How its segments will be read and written, found with a file of its own before there is any
  // segment, so that the start line can say it.
  ::unlinkat(dir_fd, kProbeName, 0);  // a leftover of a process killed here
  Result<std::unique_ptr<File>> probe = OpenFileAt(dir_fd, kProbeName, dir + "/" + kProbeName,
                                                   /*create=*/true, options, /*strict=*/true);
  ::unlinkat(dir_fd, kProbeName, 0);
  if (!probe.ok()) {
    return Status::IoError("the disk tier's folder " + dir +
                           " cannot hold a file: " + probe.status().ToString());
  }
  return std::unique_ptr<SegmentFolder>(new PosixSegmentFolder(
      dir, dir_guard.release(), lock_guard.release(), options, (*probe)->io_mode()));
}

Result<std::unique_ptr<File>> OpenPosixFile(const std::string& path, bool create,
                                            const FileOptions& options) {
  return OpenFileAt(AT_FDCWD, path, path, create, options, /*strict=*/false);
}

}  // namespace kvport::store
