// SPDX-License-Identifier: Apache-2.0
// A connected pair of loopback TCP sockets for net tests: `server` from TcpListener::Accept
// (non-blocking, as a Stream), `client` a plain blocking socket.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "net/stream.h"
#include "net/tcp_listener.h"

namespace kvport::net {

inline Socket ConnectBlocking(uint16_t port) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return Socket();
  return s;
}

struct LoopbackPair {
  Stream server;
  Socket client;
};

// Accepts in a bounded loop: the connection is queued by the time connect() returns, but a
// non-blocking accept may still race with the kernel on a loaded machine.
inline LoopbackPair MakeLoopbackPair(TcpListener& listener) {
  LoopbackPair pair;
  pair.client = ConnectBlocking(listener.port());
  EXPECT_TRUE(pair.client.valid());
  for (int i = 0; i < 100000 && !pair.server.valid(); ++i) {
    auto accepted = listener.Accept();
    EXPECT_TRUE(accepted.ok()) << accepted.status().ToString();
    if (!accepted.ok()) break;
    pair.server = Stream(std::move(accepted).value());
  }
  EXPECT_TRUE(pair.server.valid());
  return pair;
}

}  // namespace kvport::net
