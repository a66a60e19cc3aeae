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
#include <vector>

#include "common/monotonic_clock.h"
#include "kvport/status.h"
#include "net/socket.h"
#include "net/stream.h"
#include "net/tls.h"

namespace kvport::client {

using Deadline = MonotonicClock::time_point;
// A deadline that never passes.
inline constexpr Deadline kNoDeadline = Deadline::max();

// Completes the TLS handshake `stream` started (Stream::StartTls). Errors: PermissionDenied
// when the node's certificate fails verification (naming why: unknown CA, wrong name, expired),
// Unavailable when the handshake fails otherwise (the node does not speak TLS, it closed),
// Timeout when the deadline passes first.
Status CompleteTlsHandshake(net::Stream& stream, Deadline deadline);

// Writes every byte of `iov` (which it may modify to track progress). Errors: Timeout when the
// deadline passes with bytes still unwritten (the caller must then drop the connection: the
// stream is mid-frame), Unavailable when the peer is gone.
Status WriteFully(net::Stream& stream, std::span<iovec> iov, Deadline deadline);

// Reads exactly `n` bytes into `dst`. Errors: Unavailable when the peer closed the connection
// (or it was shut down), Timeout when the deadline passes.
Status ReadFully(net::Stream& stream, void* dst, size_t n, Deadline deadline);

// ReadFully for a (plain) Unix socket whose bytes may carry descriptors (SCM_RIGHTS): those that
// arrive with them are appended to *received, in order (at most net::kMaxPassedDescriptors; any
// beyond are closed).
Status ReadFullyWithDescriptors(int fd, void* dst, size_t n, Deadline deadline,
                                std::vector<net::Socket>* received);

// Waits until `stream` has bytes to read (or end-of-file): bytes TLS already decrypted or read
// ahead count without a wait, and a socket found readable is marked so (Stream::SocketReadable).
// Timeout when the deadline passes first. With `spin`, polls without sleeping for up to that long
// (never past `deadline`) before it blocks: a thread that is about to be answered keeps its CPU
// instead of being woken for it.
Status WaitReadable(net::Stream& stream, Deadline deadline,
                    std::chrono::microseconds spin = std::chrono::microseconds(0));

}  // namespace kvport::client
