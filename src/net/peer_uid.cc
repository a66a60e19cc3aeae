// SPDX-License-Identifier: Apache-2.0
#include "net/peer_uid.h"

#include <arpa/inet.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace kvport::net {

namespace {

// An address as the kernel's socket table prints it: the address's 32-bit words in hex as the
// machine stores them, then the port in hex.
std::string TableAddress(const void* words, size_t count, uint16_t port_network_order) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    uint32_t word = 0;
    std::memcpy(&word, static_cast<const char*>(words) + 4 * i, 4);
    out += fmt::format("{:08X}", word);
  }
  return out + fmt::format(":{:04X}", ntohs(port_network_order));
}

// The peer's socket in `table`: the line whose local address is `peer` and remote address `us`.
Result<uid_t> FindOwner(const char* table, const std::string& peer, const std::string& us) {
  std::ifstream in(table);
  if (!in) return Status::NotFound(std::string("cannot read ") + table);
  std::string line;
  std::getline(in, line);  // the column names
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits;
    uint64_t uid = 0;
    if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid))
      continue;
    if (local == peer && remote == us) return static_cast<uid_t>(uid);
  }
  return Status::NotFound("the peer's socket is not in " + std::string(table));
}

}  // namespace

Result<uid_t> LoopbackPeerUid(int fd) {
  sockaddr_storage ours{}, theirs{};
  socklen_t ours_length = sizeof(ours), theirs_length = sizeof(theirs);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ours), &ours_length) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &theirs_length) != 0) {
    return Status::NotFound(std::string("the connection's addresses: ") + std::strerror(errno));
  }
  if (theirs.ss_family == AF_INET) {
    const auto& peer = reinterpret_cast<const sockaddr_in&>(theirs);
    const auto& us = reinterpret_cast<const sockaddr_in&>(ours);
    if ((ntohl(peer.sin_addr.s_addr) >> 24) != 127) {
      return Status::NotSupported("the peer is not on a loopback address");
    }
    return FindOwner("/proc/net/tcp", TableAddress(&peer.sin_addr, 1, peer.sin_port),
                     TableAddress(&us.sin_addr, 1, us.sin_port));
  }
  if (theirs.ss_family == AF_INET6) {
    const auto& peer = reinterpret_cast<const sockaddr_in6&>(theirs);
    const auto& us = reinterpret_cast<const sockaddr_in6&>(ours);
    if (IN6_IS_ADDR_V4MAPPED(&peer.sin6_addr)) {
      // An IPv4 client of an IPv6 socket: its own socket is an IPv4 one, in the IPv4 table.
      const uint8_t* v4 = peer.sin6_addr.s6_addr + 12;
      if (v4[0] != 127) return Status::NotSupported("the peer is not on a loopback address");
      Result<uid_t> owner = FindOwner("/proc/net/tcp", TableAddress(v4, 1, peer.sin6_port),
                                      TableAddress(us.sin6_addr.s6_addr + 12, 1, us.sin6_port));
      if (owner.ok()) return owner;
      return FindOwner("/proc/net/tcp6", TableAddress(&peer.sin6_addr, 4, peer.sin6_port),
                       TableAddress(&us.sin6_addr, 4, us.sin6_port));
    }
    if (!IN6_IS_ADDR_LOOPBACK(&peer.sin6_addr)) {
      return Status::NotSupported("the peer is not on a loopback address");
    }
    return FindOwner("/proc/net/tcp6", TableAddress(&peer.sin6_addr, 4, peer.sin6_port),
                     TableAddress(&us.sin6_addr, 4, us.sin6_port));
  }
  return Status::NotSupported("not a TCP connection");
}

}  // namespace kvport::net
