// SPDX-License-Identifier: Apache-2.0
#include "net/tcp_listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

namespace kvport::net {

namespace {

uint16_t BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) < 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

bool BoundToLoopback(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) < 0) return false;
  if (addr.ss_family == AF_INET) {
    const uint32_t ip = ntohl(reinterpret_cast<sockaddr_in*>(&addr)->sin_addr.s_addr);
    return (ip >> 24) == 127;
  }
  if (addr.ss_family == AF_INET6) {
    const in6_addr& ip = reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&ip)) return true;
    return IN6_IS_ADDR_V4MAPPED(&ip) && ip.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace

Result<std::unique_ptr<TcpListener>> TcpListener::Listen(const HostPort& address, int backlog) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string port = std::to_string(address.port);
  int rc = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    return Status::InvalidArgument("cannot resolve listen address '" + address.ToString() +
                                   "': " + ::gai_strerror(rc));
  }
  Status last = Status::IoError("no address to bind for '" + address.ToString() + "'");
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    Socket s(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!s.valid()) {
      last = Status::FromErrno("socket()", errno);
      continue;
    }
    int one = 1;
    ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s.fd(), ai->ai_addr, ai->ai_addrlen) < 0) {
      last = Status::FromErrno("bind " + address.ToString(), errno);
      continue;
    }
    if (::listen(s.fd(), backlog) < 0) {
      last = Status::FromErrno("listen on " + address.ToString(), errno);
      continue;
    }
    ::freeaddrinfo(found);
    HostPort bound{address.host, BoundPort(s.fd())};
    const bool loopback = BoundToLoopback(s.fd());
    return std::unique_ptr<TcpListener>(new TcpListener(std::move(s), std::move(bound), loopback));
  }
  ::freeaddrinfo(found);
  return last;
}

Result<Socket> TcpListener::Accept() {
  KVPORT_ASSIGN_OR_RETURN(Socket s, AcceptConnection(socket_.fd(), bound_.ToString()));
  if (s.valid()) {
    // Responses are written whole with writev; Nagle would only delay the last segment.
    Status nodelay = SetNoDelay(s.fd());
    (void)nodelay;  // not fatal: the connection still works, only slower for small frames
    // A large response written whole waits in the kernel for the client's receive window, and
    // is then sent by the client's own acknowledgements, on the client's CPU: its reads cost
    // 1.5-2x (measured: redis-benchmark GET of 1 MiB values, docs/performance.md). Held to a
    // little unsent data, the rest is written as the window opens, by the node's thread.
    Status low_water = SetNotSentLowWater(s.fd(), kNotSentLowWaterBytes);
    (void)low_water;  // not fatal: the connection works, the client pays more per byte
  }
  return s;
}

}  // namespace kvport::net
