// SPDX-License-Identifier: Apache-2.0
// Blocking-with-a-deadline I/O over kvport's non-blocking sockets, for the client side.
//
// The client keeps its sockets non-blocking (as net/ creates them) and waits in poll(), so that
// every wait has a deadline and a socket shut down by another thread (Connection::Close) wakes
// its reader at once.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <span>

#include "common/monotonic_clock.h"
#include "kvport/status.h"
#include "net/host_port.h"
#include "net/socket.h"

namespace kvport::client {

using Deadline = MonotonicClock::time_point;
// A deadline that never passes (the reader thread waits on it; Close wakes it).
inline constexpr Deadline kNoDeadline = Deadline::max();

// Connects to `address` (resolving a host name), non-blocking, TCP_NODELAY. Errors:
// Unavailable "connect to HOST:PORT: <strerror>" (refused, unreachable, no such host),
// Timeout when `deadline` passes first.
Result<net::Socket> ConnectTcp(const net::HostPort& address, Deadline deadline);

// Writes every byte of `iov` (which it may modify to track progress). Errors: Timeout when the
// deadline passes with bytes still unwritten (the caller must then drop the connection: the
// stream is mid-frame), Unavailable when the peer is gone.
Status WriteFully(int fd, std::span<iovec> iov, Deadline deadline);

// Reads exactly `n` bytes into `dst`. Errors: Unavailable when the peer closed the connection
// (or it was shut down), Timeout when the deadline passes.
Status ReadFully(int fd, void* dst, size_t n, Deadline deadline);

// ReadFully for a Unix socket whose bytes may carry a descriptor (SCM_RIGHTS): the first one
// that arrives with them is stored in *received; any other is closed.
Status ReadFullyWithDescriptor(int fd, void* dst, size_t n, Deadline deadline,
                               net::Socket* received);

// Waits until `fd` has bytes to read (or end-of-file). Timeout when the deadline passes first.
// With `spin`, polls without sleeping for up to that long (never past `deadline`) before it
// blocks: a thread that is about to be answered keeps its CPU instead of being woken for it.
Status WaitReadable(int fd, Deadline deadline,
                    std::chrono::microseconds spin = std::chrono::microseconds(0));

// Reads and drops exactly `n` bytes (a value with no place to go).
Status DiscardFully(int fd, size_t n, Deadline deadline);

}  // namespace kvport::client
