// SPDX-License-Identifier: Apache-2.0
#include "server/node_id_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "common/small_file.h"
#include "kvport/log.h"

namespace kvport::server {

Result<std::string> KeepNodeId(const std::string& dir, const std::string& id, bool configured) {
  const std::string path = dir + "/node-id";
  Result<std::string> kept = ReadSmallRegularFile(path, 4096, "node id file");
  if (kept.ok()) {
    std::string stored = *kept;
    while (!stored.empty() && (stored.back() == '\n' || stored.back() == ' '))
      stored.pop_back();
    if (!configured && !stored.empty()) return stored;
    if (stored == id) return id;
    if (!stored.empty()) {
      log::Warn("disk tier: the config names this node '{}'; {} said '{}': now '{}'", id, path,
                stored, id);
    }
  } else if (kept.status().code() != StatusCode::kNotFound) {
    return kept.status();
  }
  // Written whole or not at all: a crash leaves the old name or the new one. The temporary
  // name is made fresh (a leftover one, or anything planted there, is removed, never followed).
  const std::string temporary = path + ".new";
  if (::unlink(temporary.c_str()) != 0 && errno != ENOENT) {
    return Status::FromErrno("cannot remove " + temporary, errno);
  }
  const int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("cannot write " + temporary, errno);
  const std::string text = id + "\n";
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!written) return Status::FromErrno("cannot write " + temporary, err);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    return Status::FromErrno("cannot rename " + temporary + " to " + path, errno);
  }
  return id;
}

}  // namespace kvport::server
