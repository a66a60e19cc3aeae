// SPDX-License-Identifier: Apache-2.0
#include "store/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

namespace kvport::store {
namespace {

class PosixFile final : public File {
 public:
  PosixFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixFile() override { ::close(fd_); }

  Status WriteAt(uint64_t offset, const void* data, size_t bytes) override {
    size_t done = 0;
    while (done < bytes) {
      const ssize_t n = ::pwrite(fd_, static_cast<const char*>(data) + done, bytes - done,
                                 static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        const std::string what = "write of " + std::to_string(bytes) + " bytes at " +
                                 std::to_string(offset) + " of " + path_ + " (" +
                                 std::to_string(done) + " written)";
        return err == ENOSPC || err == EDQUOT ? Status::NoSpace(what + ": the disk is full")
                                              : Status::FromErrno(what, err);
      }
      if (n == 0) return Status::IoError("write to " + path_ + " made no progress");
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  Result<size_t> ReadAt(uint64_t offset, void* data, size_t bytes) override {
    size_t done = 0;
    while (done < bytes) {
      const ssize_t n = ::pread(fd_, static_cast<char*>(data) + done, bytes - done,
                                static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return Status::FromErrno("read of " + std::to_string(bytes) + " bytes at " +
                                     std::to_string(offset) + " of " + path_,
                                 errno);
      }
      if (n == 0) break;  // the end of the file
      done += static_cast<size_t>(n);
    }
    return done;
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

 private:
  const int fd_;
  const std::string path_;
};

class PosixSegmentFolder final : public SegmentFolder {
 public:
  explicit PosixSegmentFolder(std::string dir) : dir_(std::move(dir)) {}

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
    return OpenPosixFile(PathOf(number), create);
  }

  Status Remove(uint64_t number) override {
    if (::unlink(PathOf(number).c_str()) == 0 || errno == ENOENT) return Status::Ok();
    return Status::FromErrno("unlink " + PathOf(number), errno);
  }

  std::string PathOf(uint64_t number) const override {
    return fmt::format("{}/{:016x}.seg", dir_, number);
  }

 private:
  const std::string dir_;
};

}  // namespace

Result<std::unique_ptr<SegmentFolder>> OpenSegmentFolder(const std::string& dir) {
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
  return std::unique_ptr<SegmentFolder>(new PosixSegmentFolder(dir));
}

Result<std::unique_ptr<File>> OpenPosixFile(const std::string& path, bool create) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  return std::unique_ptr<File>(new PosixFile(fd, path));
}

}  // namespace kvport::store
