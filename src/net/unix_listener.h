// SPDX-License-Identifier: Apache-2.0
// UnixListener: a listening Unix-domain stream socket, for clients on the node's host.
//
// The socket file is created with mode 0600: only processes of the node's user (and root) can
// connect, which is the first of the two checks on who may map the node's arena (the session
// checks the peer's credentials again with SO_PEERCRED; docs/security.md).
//
// A socket file left behind by a node that died is replaced: Listen tries to connect to an
// existing file first and removes it only when nobody accepts there (ECONNREFUSED), so a live
// node's socket is never stolen. The destructor removes the file if it is still the one this
// listener created (same inode), never a successor's.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "kvport/status.h"
#include "net/listener.h"
#include "net/socket.h"

namespace kvport::net {

class UnixListener final : public Listener {
 public:
  // The longest path a sockaddr_un holds (without the terminating NUL).
  static constexpr size_t kMaxPathBytes = 107;

  // Binds and listens on `path`. Errors: InvalidArgument for an empty, relative or too long
  // path; IoError (naming the path) when another node is listening there or bind fails.
  static Result<std::unique_ptr<UnixListener>> Listen(const std::string& path, int backlog = 1024);
  ~UnixListener() override;

  int fd() const override { return socket_.fd(); }
  StreamKind kind() const override { return StreamKind::kUnix; }
  std::string name() const override { return "unix:" + path_; }
  const std::string& path() const { return path_; }

  Result<Socket> Accept() override;

 private:
  UnixListener(Socket socket, std::string path, ino_t inode)
      : socket_(std::move(socket)), path_(std::move(path)), inode_(inode) {}
  Socket socket_;
  std::string path_;
  ino_t inode_;
};

// Connects to the Unix-domain socket at `path` (blocking connect: local connects do not wait
// on a network), returning a non-blocking, close-on-exec socket. Errors: Unavailable
// "connect to unix:PATH: <strerror>".
Result<Socket> ConnectUnix(const std::string& path);

}  // namespace kvport::net
