// SPDX-License-Identifier: Apache-2.0
#include "client/socket_io.h"

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

Status CompleteTlsHandshake(net::Stream& stream, Deadline deadline) {
  while (true) {
    KVPORT_ASSIGN_OR_RETURN(net::TlsWait wait, stream.Handshake());
    if (wait == net::TlsWait::kNone) return Status::Ok();
    KVPORT_RETURN_IF_ERROR(WaitFor(stream.fd(), wait == net::TlsWait::kRead ? POLLIN : POLLOUT,
                                   deadline, "complete the TLS handshake"));
  }
}

Status WriteFully(net::Stream& stream, std::span<iovec> iov, Deadline deadline) {
  size_t first = 0;
  while (first < iov.size()) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    Result<net::IoProgress> progress = stream.WriteV(&iov[first], count);
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
      KVPORT_RETURN_IF_ERROR(WaitFor(stream.fd(), POLLOUT, deadline, "write a request"));
    }
  }
  return Status::Ok();
}

Status ReadFullyWithDescriptors(int fd, void* dst, size_t n, Deadline deadline,
                                std::vector<net::Socket>* received) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    iovec iov{p, n};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * net::kMaxPassedDescriptors)];
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
        if (received->size() < net::kMaxPassedDescriptors) {
          received->emplace_back(passed);
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

Status ReadFully(net::Stream& stream, void* dst, size_t n, Deadline deadline) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    iovec iov{p, n};
    Result<net::IoProgress> progress = stream.ReadV(&iov, 1);
    if (!progress.ok()) return Gone("reading a response", progress.status());
    p += progress->bytes;
    n -= progress->bytes;
    if (n == 0) break;
    if (progress->eof) return Status::Unavailable("the node closed the connection");
    if (progress->would_block || progress->bytes == 0) {
      KVPORT_RETURN_IF_ERROR(WaitFor(stream.fd(), POLLIN, deadline, "read a response"));
    }
  }
  return Status::Ok();
}

Status WaitReadable(net::Stream& stream, Deadline deadline, std::chrono::microseconds spin) {
  if (stream.buffered() > 0) return Status::Ok();
  const int fd = stream.fd();
  if (spin.count() > 0) {
    const Deadline until = std::min(deadline, MonotonicClock::now() + spin);
    do {
      pollfd p{fd, POLLIN, 0};
      const int n = ::poll(&p, 1, 0);
      if (n > 0) {
        stream.SocketReadable();
        return Status::Ok();
      }
      if (n < 0 && errno != EINTR) return Status::FromErrno("poll", errno);
    } while (MonotonicClock::now() < until);
  }
  Status ready = WaitFor(fd, POLLIN, deadline, "read a response");
  if (ready.ok()) stream.SocketReadable();
  return ready;
}

}  // namespace kvport::client
