// SPDX-License-Identifier: Apache-2.0
#include "net/connect.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace kvport::net {
namespace {

// Waits until `fd` has connected or failed, `deadline` passes, or `cancel_fd` is readable.
Status WaitConnected(int fd, MonotonicClock::time_point deadline, int cancel_fd) {
  while (true) {
    const auto now = MonotonicClock::now();
    if (now >= deadline) return Status::Timeout("no answer before the deadline");
    // Rounded up, so a wait never ends before its deadline; at most a minute per poll.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    pollfd fds[2] = {{fd, POLLOUT, 0}, {cancel_fd, POLLIN, 0}};
    const int n =
        ::poll(fds, cancel_fd >= 0 ? 2 : 1, static_cast<int>(std::min<int64_t>(left, 60'000)));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("poll", errno);
    }
    if (cancel_fd >= 0 && (fds[1].revents & POLLIN) != 0) return Status::Aborted("canceled");
    if (fds[0].revents != 0) break;
  }
  int err = 0;
  socklen_t len = sizeof(err);
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return Status::Unavailable(std::strerror(err));
  return Status::Ok();
}

}  // namespace

Result<Socket> ConnectTcp(const HostPort& address, MonotonicClock::time_point deadline,
                          int cancel_fd) {
  const std::string where = "connect to " + address.ToString() + ": ";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  const int rc = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    return Status::Unavailable(where + "cannot resolve host '" + address.host +
                               "': " + ::gai_strerror(rc));
  }
  Status last = Status::Unavailable(where + "no address");
  Socket connected;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    Socket sock(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!sock.valid()) {
      last = Status::FromErrno("socket", errno);
      continue;
    }
    if (::connect(sock.fd(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = Status::Unavailable(where + std::strerror(errno));
        continue;
      }
      Status waited = WaitConnected(sock.fd(), deadline, cancel_fd);
      if (!waited.ok()) {
        last = Status(waited.code(), where + waited.message());
        if (waited.code() == StatusCode::kAborted || waited.code() == StatusCode::kTimeout) break;
        continue;
      }
    }
    connected = std::move(sock);
    break;
  }
  ::freeaddrinfo(found);
  if (!connected.valid()) return last;
  KVPORT_RETURN_IF_ERROR(SetNoDelay(connected.fd()));
  return connected;
}

}  // namespace kvport::net
