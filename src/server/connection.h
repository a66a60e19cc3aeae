// SPDX-License-Identifier: Apache-2.0
// Connection: what a worker needs of a client connection, whichever protocol it speaks.
//
// A worker (server/worker.h) owns the connections its acceptors hand it and sweeps them for
// idleness and deadlines; the kvport binary protocol's Session and the Redis protocol's
// RespSession (docs/resp.md) are both served this way, on the same loops, under the same
// idle timeout, request deadline, HELLO (or AUTH) deadline and caps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/monotonic_clock.h"
#include "kvport/status.h"
#include "net/event_loop.h"

namespace kvport::server {

// The protocol a listener speaks.
enum class WireProtocol { kKvport, kResp };

class Connection : public net::EventHandler {
 public:
  ~Connection() override = default;

  // Registers with the loop. On error the connection is closed.
  virtual Status Start() = 0;
  // Graceful stop: finish the request in flight, read no new one, then close.
  virtual void BeginShutdown() = 0;
  // Closes now, releasing what the connection holds.
  virtual void Close(std::string_view reason) = 0;
  virtual bool closed() const = 0;
  virtual uint64_t id() const = 0;
  // True once the client proved who it is (HELLO; AUTH on a RESP connection to a token node).
  virtual bool authenticated() const = 0;
  // Not authenticated within hello_timeout of the accept.
  virtual bool HelloOverdue(MonotonicClock::time_point now) const = 0;
  // Closes now after a best-effort error in the connection's protocol.
  virtual void CloseWithError(const Status& status) = 0;
  virtual MonotonicClock::time_point last_activity() const = 0;
  // Shared-memory leases or reservations held: not idle even without a byte on the socket.
  virtual bool holds_arena_ranges() const { return false; }
  virtual size_t AbortOverdueReservations(MonotonicClock::time_point) { return 0; }
  virtual const std::string& peer() const = 0;
  // The request being received is past its deadline.
  virtual bool RequestOverdue(MonotonicClock::time_point now) const = 0;
  // Answers the overdue request with a timeout error and closes.
  virtual void AbortOverdueRequest() = 0;
};

}  // namespace kvport::server
