// TcpListener: a listening TCP socket that hands out accepted connections.
#pragma once

#include <cstdint>
#include <memory>

#include "kvport/status.h"
#include "net/host_port.h"
#include "net/socket.h"

namespace kvport::net {

class TcpListener {
 public:
  // Resolves `address` (numeric or a host name; the first result that binds wins), binds with
  // SO_REUSEADDR and listens. Port 0 asks the kernel for an ephemeral port; port() tells which.
  // The socket is non-blocking and close-on-exec.
  static Result<std::unique_ptr<TcpListener>> Listen(const HostPort& address, int backlog = 1024);

  int fd() const { return socket_.fd(); }
  // The port actually bound.
  uint16_t port() const { return bound_.port; }
  // The address actually bound, e.g. "127.0.0.1:40123".
  const HostPort& address() const { return bound_; }

  // Accepts one pending connection as a non-blocking, close-on-exec socket with TCP_NODELAY.
  // Returns an invalid Socket when nothing is pending. An error (e.g. EMFILE) leaves the pending
  // connection queued: the caller should back off before trying again.
  Result<Socket> Accept();

 private:
  TcpListener(Socket socket, HostPort bound)
      : socket_(std::move(socket)), bound_(std::move(bound)) {}
  Socket socket_;
  HostPort bound_;
};

}  // namespace kvport::net
