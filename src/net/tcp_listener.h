// SPDX-License-Identifier: Apache-2.0
// TcpListener: a listening TCP socket that hands out accepted connections (with TCP_NODELAY,
// and TCP_NOTSENT_LOWAT at kNotSentLowWaterBytes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kvport/status.h"
#include "net/host_port.h"
#include "net/listener.h"
#include "net/socket.h"

namespace kvport::net {

class TcpListener final : public Listener {
 public:
  // The most bytes an accepted connection leaves unsent in the kernel (the .cc says why): of
  // 16, 32, 64, 128, 256 KiB and 1 MiB tried, 64 KiB let redis-benchmark read 1 MiB values
  // fastest.
  static constexpr int kNotSentLowWaterBytes = 64 << 10;

  // Resolves `address` (numeric or a host name; the first result that binds wins), binds with
  // SO_REUSEADDR and listens. Port 0 asks the kernel for an ephemeral port; port() tells which.
  // The socket is non-blocking and close-on-exec.
  static Result<std::unique_ptr<TcpListener>> Listen(const HostPort& address, int backlog = 1024);

  int fd() const override { return socket_.fd(); }
  StreamKind kind() const override { return StreamKind::kTcp; }
  std::string name() const override { return bound_.ToString(); }
  // The port actually bound.
  uint16_t port() const { return bound_.port; }
  // The address actually bound, e.g. "127.0.0.1:40123".
  const HostPort& address() const { return bound_; }
  // True when the bound address is a loopback one (127.0.0.0/8, ::1, or ::ffff:127.x.y.z):
  // only processes of this host can connect.
  bool loopback_only() const { return loopback_only_; }

  Result<Socket> Accept() override;

 private:
  TcpListener(Socket socket, HostPort bound, bool loopback_only)
      : socket_(std::move(socket)), bound_(std::move(bound)), loopback_only_(loopback_only) {}
  Socket socket_;
  HostPort bound_;
  bool loopback_only_;
};

}  // namespace kvport::net
