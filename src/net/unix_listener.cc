// SPDX-License-Identifier: Apache-2.0
#include "net/unix_listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kvport::net {

namespace {

Result<sockaddr_un> AddressOf(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return Status::InvalidArgument("Unix socket path '" + path + "' must be absolute");
  }
  if (path.size() > UnixListener::kMaxPathBytes) {
    return Status::InvalidArgument("Unix socket path '" + path + "' is " +
                                   std::to_string(path.size()) + " bytes; at most " +
                                   std::to_string(UnixListener::kMaxPathBytes) + " fit");
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

Result<Socket> NewUnixSocket() {
  Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return Status::FromErrno("socket(AF_UNIX)", errno);
  return s;
}

// True when something accepts connections at `addr` (a live node); false when the file is a
// leftover nobody listens on.
bool SomeoneListens(const sockaddr_un& addr) {
  Socket probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return true;  // cannot tell: do not remove it
  int rc = ::connect(probe.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  return rc == 0 || (errno != ECONNREFUSED && errno != ENOENT);
}

}  // namespace

Result<std::unique_ptr<UnixListener>> UnixListener::Listen(const std::string& path, int backlog) {
  KVPORT_ASSIGN_OR_RETURN(sockaddr_un addr, AddressOf(path));
  KVPORT_ASSIGN_OR_RETURN(Socket s, NewUnixSocket());
  auto bind_once = [&] {
    return ::bind(s.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  };
  if (bind_once() < 0) {
    if (errno != EADDRINUSE) return Status::FromErrno("bind unix:" + path, errno);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      return Status::IoError("bind unix:" + path + ": the path exists and is not a socket");
    }
    if (SomeoneListens(addr)) {
      return Status::IoError("bind unix:" + path + ": another process is listening there");
    }
    ::unlink(path.c_str());  // a dead node's socket file
    if (bind_once() < 0) return Status::FromErrno("bind unix:" + path, errno);
  }
  // Owner only, whatever the umask was: the arena is handed to whoever connects and passes the
  // credential check, so nobody else should reach the socket at all.
  if (::chmod(path.c_str(), 0600) < 0) {
    Status failed = Status::FromErrno("chmod 0600 unix:" + path, errno);
    ::unlink(path.c_str());
    return failed;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) < 0) return Status::FromErrno("stat unix:" + path, errno);
  if (::listen(s.fd(), backlog) < 0) {
    Status failed = Status::FromErrno("listen on unix:" + path, errno);
    ::unlink(path.c_str());
    return failed;
  }
  return std::unique_ptr<UnixListener>(new UnixListener(std::move(s), path, st.st_ino));
}

UnixListener::~UnixListener() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && st.st_ino == inode_) ::unlink(path_.c_str());
}

Result<Socket> UnixListener::Accept() {
  return AcceptConnection(socket_.fd(), "unix:" + path_);
}

Result<Socket> ConnectUnix(const std::string& path) {
  KVPORT_ASSIGN_OR_RETURN(sockaddr_un addr, AddressOf(path));
  Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return Status::FromErrno("socket(AF_UNIX)", errno);
  for (;;) {
    if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) break;
    if (errno == EINTR) continue;
    return Status::Unavailable("connect to unix:" + path + ": " + std::strerror(errno));
  }
  KVPORT_RETURN_IF_ERROR(SetNonBlocking(s.fd()));
  return s;
}

}  // namespace kvport::net
