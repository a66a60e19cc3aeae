// SPDX-License-Identifier: Apache-2.0
#include "client/socket_io.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace kvport::client {
namespace {

// Milliseconds poll() should wait for `deadline`: -1 for none, rounded up so that a wait never
// ends before its deadline (0 only when it has passed).
int PollTimeoutMs(Deadline deadline) {
  if (deadline == kNoDeadline) return -1;
  auto now = MonotonicClock::now();
  if (deadline <= now) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<int64_t>(ms, 60'000));
}

// Waits until `fd` has `events` or the deadline passes. OK when ready (including error or hang
// up states, which the next read/write reports), Timeout otherwise.
Status WaitFor(int fd, short events, Deadline deadline, const char* what) {
  while (true) {
    pollfd p{fd, events, 0};
    int timeout = PollTimeoutMs(deadline);
    int n = ::poll(&p, 1, timeout);
    if (n > 0) return Status::Ok();
    if (n < 0 && errno != EINTR) return Status::FromErrno("poll", errno);
    if (n == 0 && timeout >= 0 && MonotonicClock::now() >= deadline) {
      return Status::Timeout(std::string("deadline passed while waiting to ") + what);
    }
  }
}

Status Gone(const char* what, const Status& cause) {
  return Status::Unavailable(std::string("connection lost while ") + what + ": " + cause.message());
}

}  // namespace

Result<net::Socket> ConnectTcp(const net::HostPort& address, Deadline deadline) {
  const std::string where = address.ToString();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  int rc = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    return Status::Unavailable("connect to " + where + ": cannot resolve host '" + address.host +
                               "': " + ::gai_strerror(rc));
  }
  Status last = Status::Unavailable("connect to " + where + ": no address");
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    net::Socket sock(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!sock.valid()) {
      last = Status::FromErrno("socket", errno);
      continue;
    }
    if (::connect(sock.fd(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = Status::Unavailable("connect to " + where + ": " + std::strerror(errno));
        continue;
      }
      Status waited = WaitFor(sock.fd(), POLLOUT, deadline, "connect");
      if (!waited.ok()) {
        last = waited.code() == StatusCode::kTimeout
                   ? Status::Timeout("connect to " + where + ": no answer before the deadline")
                   : waited;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(sock.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last = Status::Unavailable("connect to " + where + ": " + std::strerror(err));
        continue;
      }
    }
    KVPORT_RETURN_IF_ERROR(net::SetNoDelay(sock.fd()));
    ::freeaddrinfo(found);
    return sock;
  }
  ::freeaddrinfo(found);
  return last;
}

Status WriteFully(int fd, std::span<iovec> iov, Deadline deadline) {
  size_t first = 0;
  while (first < iov.size()) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    Result<net::IoProgress> progress = net::WriteV(fd, &iov[first], count);
    if (!progress.ok()) return Gone("writing a request", progress.status());
    size_t moved = progress->bytes;
    while (moved > 0 && first < iov.size()) {
      size_t step = std::min(moved, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + step;
      iov[first].iov_len -= step;
      moved -= step;
      if (iov[first].iov_len == 0) ++first;
    }
    if (progress->would_block) {
      KVPORT_RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, "write a request"));
    }
  }
  return Status::Ok();
}

Status ReadFullyWithDescriptor(int fd, void* dst, size_t n, Deadline deadline,
                               net::Socket* received) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    iovec iov{p, n};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t got = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return Gone("reading a response", Status::FromErrno("recvmsg", errno));
      }
      KVPORT_RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, "read a response"));
      continue;
    }
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int passed = -1;
        std::memcpy(&passed, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        if (!received->valid()) {
          *received = net::Socket(passed);
        } else {
          ::close(passed);
        }
      }
    }
    if (got == 0) return Status::Unavailable("the node closed the connection");
    p += got;
    n -= static_cast<size_t>(got);
  }
  return Status::Ok();
}

Status ReadFully(int fd, void* dst, size_t n, Deadline deadline) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    iovec iov{p, n};
    Result<net::IoProgress> progress = net::ReadV(fd, &iov, 1);
    if (!progress.ok()) return Gone("reading a response", progress.status());
    p += progress->bytes;
    n -= progress->bytes;
    if (n == 0) break;
    if (progress->eof) return Status::Unavailable("the node closed the connection");
    if (progress->would_block || progress->bytes == 0) {
      KVPORT_RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, "read a response"));
    }
  }
  return Status::Ok();
}

Status WaitReadable(int fd, Deadline deadline, std::chrono::microseconds spin) {
  if (spin.count() > 0) {
    const Deadline until = std::min(deadline, MonotonicClock::now() + spin);
    do {
      pollfd p{fd, POLLIN, 0};
      const int n = ::poll(&p, 1, 0);
      if (n > 0) return Status::Ok();
      if (n < 0 && errno != EINTR) return Status::FromErrno("poll", errno);
    } while (MonotonicClock::now() < until);
  }
  return WaitFor(fd, POLLIN, deadline, "read a response");
}

Status DiscardFully(int fd, size_t n, Deadline deadline) {
  char sink[16 * 1024];
  while (n > 0) {
    size_t step = std::min(n, sizeof(sink));
    KVPORT_RETURN_IF_ERROR(ReadFully(fd, sink, step, deadline));
    n -= step;
  }
  return Status::Ok();
}

}  // namespace kvport::client
