// SPDX-License-Identifier: Apache-2.0
#include "common/small_file.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kvport/size.h"

namespace kvport {

namespace {

// What a file that is not a regular file is, for the error.
std::string_view FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Status CheckStat(const std::string& path, const struct stat& st, uint64_t max_bytes,
                 std::string_view what) {
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(
        fmt::format("{} '{}' is {}, not a regular file", what, path, FileTypeName(st.st_mode)));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Status::InvalidArgument(fmt::format(
        "{} '{}' is {} ({} bytes), larger than the {} a {} may be", what, path,
        FormatSize(static_cast<uint64_t>(st.st_size)), st.st_size, FormatSize(max_bytes), what));
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> ReadSmallRegularFile(const std::string& path, uint64_t max_bytes,
                                         std::string_view what, uint32_t* mode) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound(fmt::format("{} '{}' does not exist", what, path));
    return Status::IoError(fmt::format("{} '{}': {}", what, path, std::strerror(err)));
  }
  KVPORT_RETURN_IF_ERROR(CheckStat(path, st, max_bytes, what));
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return Status::IoError(fmt::format("cannot open {} '{}': {}", what, path, std::strerror(err)));
  }
  std::string text;
  Status status =
      ::fstat(fd, &st) == 0
          ? CheckStat(path, st, max_bytes, what)
          : Status::IoError(fmt::format("{} '{}': {}", what, path, std::strerror(errno)));
  if (status.ok() && mode != nullptr) *mode = static_cast<uint32_t>(st.st_mode & 07777);
  while (status.ok()) {
    char buffer[64 * 1024];
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status =
          Status::IoError(fmt::format("cannot read {} '{}': {}", what, path, std::strerror(errno)));
    } else if (n == 0) {
      break;
    } else if (text.size() + static_cast<size_t>(n) > max_bytes) {
      status = Status::InvalidArgument(
          fmt::format("{} '{}' grew past the {} a {} may be while it was read", what, path,
                      FormatSize(max_bytes), what));
    } else {
      text.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  if (!status.ok()) return status;
  return text;
}

Status CheckSecretFileMode(const std::string& path, uint32_t mode, uint32_t refused,
                           std::string_view what) {
  if ((mode & refused) == 0) return Status::Ok();
  const std::string_view who = (mode & refused & 0070) != 0 ? "users of its group" : "other users";
  return Status::InvalidArgument(
      fmt::format("{} '{}' has mode {:04o}: {} may read or change it, so what it holds is not "
                  "secret; make it readable by the node's user only (chmod 600)",
                  what, path, mode, who));
}

}  // namespace kvport
