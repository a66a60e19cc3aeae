// SPDX-License-Identifier: Apache-2.0
// ConnectTcp: an outgoing TCP connection made within a deadline, the one way kvport connects
// (the client to its nodes, the cluster layer to etcd).
#pragma once

#include "common/monotonic_clock.h"
#include "kvport/status.h"
#include "net/host_port.h"
#include "net/socket.h"

namespace kvport::net {

// Resolves `address` (a name or a literal) and tries each of its addresses in turn until one
// connects; the socket is non-blocking, close-on-exec, with TCP_NODELAY (requests are written
// whole: Nagle would only delay their last segment). Errors: Unavailable "connect to HOST:PORT:
// <why>" (no such host, refused, unreachable), Timeout when `deadline` passes first, Aborted
// when `cancel_fd` (an eventfd or a pipe; -1: none) becomes readable first.
Result<Socket> ConnectTcp(const HostPort& address, MonotonicClock::time_point deadline,
                          int cancel_fd = -1);

}  // namespace kvport::net
