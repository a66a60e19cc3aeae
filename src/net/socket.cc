// SPDX-License-Identifier: Apache-2.0
#include "net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

namespace kvport::net {

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.Release();
  }
  return *this;
}

int Socket::Release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Socket::Close() {
  if (fd_ >= 0) {
    // close() is not retried on EINTR: on Linux the descriptor is released either way.
    ::close(fd_);
    fd_ = -1;
  }
}

namespace {

// What a read-like call's return value (and errno) says; nullopt when it was interrupted by a
// signal and should be made again.
std::optional<Result<IoProgress>> ReadOutcome(ssize_t n, const char* what) {
  IoProgress progress;
  if (n > 0) {
    progress.bytes = static_cast<size_t>(n);
    return progress;
  }
  if (n == 0) {
    progress.eof = true;
    return progress;
  }
  if (errno == EINTR) return std::nullopt;
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    progress.would_block = true;
    return progress;
  }
  return Result<IoProgress>(Status::FromErrno(what, errno));
}

}  // namespace

Result<IoProgress> ReadV(int fd, const iovec* iov, int count) {
  for (;;) {
    if (auto outcome = ReadOutcome(::readv(fd, iov, count), "read from socket")) return *outcome;
  }
}

Result<IoProgress> Readable(int fd) {
  int queued = 0;
  if (::ioctl(fd, FIONREAD, &queued) != 0) return Status::FromErrno("FIONREAD", errno);
  if (queued > 0) {
    IoProgress progress;
    progress.bytes = static_cast<size_t>(queued);
    return progress;
  }
  // Nothing queued: a byte may have arrived since, or the peer closed (FIONREAD says 0 both
  // times); a one-byte peek tells which.
  for (;;) {
    char byte;
    if (auto outcome = ReadOutcome(::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT), "peek at socket"))
      return *outcome;
  }
}

namespace {

// sendmsg() on a non-blocking socket, retried on EINTR, never raising SIGPIPE.
Result<IoProgress> SendMessage(int fd, const msghdr& msg, const char* what) {
  IoProgress progress;
  for (;;) {
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n >= 0) {
      progress.bytes = static_cast<size_t>(n);
      return progress;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      progress.would_block = true;
      return progress;
    }
    return Status::FromErrno(what, errno);
  }
}

}  // namespace

Result<IoProgress> WriteV(int fd, const iovec* iov, int count) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(count);
  return SendMessage(fd, msg, "write to socket");
}

Result<IoProgress> WriteVWithDescriptors(int fd, const iovec* iov, int count,
                                         std::span<const int> pass_fds) {
  if (pass_fds.empty() || pass_fds.size() > kMaxPassedDescriptors) {
    return Status::InvalidArgument("sendmsg: " + std::to_string(pass_fds.size()) +
                                   " descriptors to pass (1 to " +
                                   std::to_string(kMaxPassedDescriptors) + " allowed)");
  }
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedDescriptors)] = {};
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(count);
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * pass_fds.size());
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int) * pass_fds.size());
  std::memcpy(CMSG_DATA(cm), pass_fds.data(), sizeof(int) * pass_fds.size());
  return SendMessage(fd, msg, "sendmsg with a descriptor");
}

Result<Socket> AcceptConnection(int listen_fd, const std::string& where) {
  for (;;) {
    Socket s(::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (s.valid()) return s;
    switch (errno) {
      case EINTR:
      case ECONNABORTED:  // the peer gave up before we accepted; try the next one
        continue;
      case EAGAIN:
#if EAGAIN != EWOULDBLOCK
      case EWOULDBLOCK:
#endif
        return Socket();
      default:
        return Status::FromErrno("accept on " + where, errno);
    }
  }
}

Result<PeerCredentials> PeerCredentialsOf(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
    return Status::FromErrno("getsockopt(SO_PEERCRED)", errno);
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

Status SetNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return Status::FromErrno("fcntl(O_NONBLOCK)", errno);
  }
  return Status::Ok();
}

Status SetNoDelay(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
    return Status::FromErrno("setsockopt(TCP_NODELAY)", errno);
  }
  return Status::Ok();
}

Status SetReceiveLowWater(int fd, int bytes) {
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof(bytes)) < 0) {
    return Status::FromErrno("setsockopt(SO_RCVLOWAT)", errno);
  }
  return Status::Ok();
}

Status SetNotSentLowWater(int fd, int bytes) {
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &bytes, sizeof(bytes)) < 0) {
    return Status::FromErrno("setsockopt(TCP_NOTSENT_LOWAT)", errno);
  }
  return Status::Ok();
}

Status SetSendBufferSize(int fd, int bytes) {
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) < 0) {
    return Status::FromErrno("setsockopt(SO_SNDBUF)", errno);
  }
  return Status::Ok();
}

Status SetReceiveBufferSize(int fd, int bytes) {
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)) < 0) {
    return Status::FromErrno("setsockopt(SO_RCVBUF)", errno);
  }
  return Status::Ok();
}

namespace {

// The peer's host and port ("" and 0 for a Unix socket or an unknown one), and its family.
struct PeerEnd {
  int family = AF_UNSPEC;
  std::string host;
  uint16_t port = 0;
};

PeerEnd PeerEndOf(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  PeerEnd end;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) < 0) return end;
  end.family = addr.ss_family;
  char host[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    end.port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    end.port = ntohs(in6->sin6_port);
  }
  end.host = host;
  return end;
}

}  // namespace

std::string PeerName(int fd) {
  const PeerEnd end = PeerEndOf(fd);
  switch (end.family) {
    case AF_INET:
      return end.host + ":" + std::to_string(end.port);
    case AF_INET6:
      return "[" + end.host + "]:" + std::to_string(end.port);
    case AF_UNIX: {
      Result<PeerCredentials> cred = PeerCredentialsOf(fd);
      if (!cred.ok()) return "unix:?";
      return "unix:pid=" + std::to_string(cred->pid) + ",uid=" + std::to_string(cred->uid);
    }
    default:
      return "?";
  }
}

std::string PeerAddress(int fd) {
  const PeerEnd end = PeerEndOf(fd);
  switch (end.family) {
    case AF_INET:
    case AF_INET6:
      return end.host;
    case AF_UNIX: {
      Result<PeerCredentials> cred = PeerCredentialsOf(fd);
      return cred.ok() ? "unix:uid=" + std::to_string(cred->uid) : "unix:?";
    }
    default:
      return "?";
  }
}

}  // namespace kvport::net
