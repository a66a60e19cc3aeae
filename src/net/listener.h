// SPDX-License-Identifier: Apache-2.0
// Listener: a listening stream socket that hands out accepted connections, TCP or Unix-domain.
//
// A node has one listener per transport it serves (TCP always; a Unix-domain socket for
// same-host clients when configured); the acceptor treats them alike and tags every accepted
// socket with the listener's kind, which is all a session needs to know about where its bytes
// come from (a Unix-socket session may offer shared memory; a TCP one never does).
#pragma once

#include <string>

#include "kvport/status.h"
#include "net/socket.h"

namespace kvport::net {

enum class StreamKind { kTcp, kUnix };

class Listener {
 public:
  virtual ~Listener() = default;

  virtual int fd() const = 0;
  virtual StreamKind kind() const = 0;
  // Where it listens, for logs: "127.0.0.1:40123" or "unix:/run/kvport/kvport-7000.sock".
  virtual std::string name() const = 0;

  // Accepts one pending connection as a non-blocking, close-on-exec socket. Returns an invalid
  // Socket when nothing is pending. An error (e.g. EMFILE) leaves the pending connection
  // queued: the caller should back off before trying again.
  virtual Result<Socket> Accept() = 0;
};

}  // namespace kvport::net
