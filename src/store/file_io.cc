// SPDX-License-Identifier: Apache-2.0
#include "store/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

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

  Result<uint64_t> Size() override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return Status::FromErrno("fstat of " + path_, errno);
    return static_cast<uint64_t>(st.st_size);
  }

 private:
  const int fd_;
  const std::string path_;
};

}  // namespace

Result<std::unique_ptr<File>> OpenPosixFile(const std::string& path, bool create) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  return std::unique_ptr<File>(new PosixFile(fd, path));
}

}  // namespace kvport::store
