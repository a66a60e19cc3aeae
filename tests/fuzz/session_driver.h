// SPDX-License-Identifier: Apache-2.0
// SessionDriver: runs one fuzz input (session_inputs.h) against an in-process node.
//
// The node is a real kvport::Server (one I/O thread, TCP and a Unix socket, small limits and
// capacity), started once; each input gets a new connection. Its bytes are written in the
// input's chunks, and after each chunk (up to a bound) two PING round trips on a second
// connection, served by the same thread, make the node process that chunk before the next one
// arrives: the session's state machine sees the stream cut where the input says. Responses are
// read and dropped as they come. The driver then ends the stream, and requires the node to
// close the connection; then a fresh client (a new connection, HELLO) must be served, and:
//   - every key an MSET of the input named is either absent or holds exactly the value and meta
//     of one of the input's MSET frames that arrived whole (an MSET cut short must leave
//     nothing visible; ARENA_RESERVE'd keys, whose bytes a shared-memory client would write, may
//     hold anything);
//   - no reservation, pin or lease is left (store counters reserved_bytes, pinned_bytes,
//     leased_bytes are 0);
//   - a value it stores reads back.
// The keys are deleted after the check, so each input starts from an empty store.
//
// Only the node's public API (kvport/server.h), the protocol codec and the server tests'
// TestClient are used, so changes inside sessions and handlers need no change here.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kvport/server.h"
#include "kvport/status.h"
#include "test_client.h"

namespace kvport::fuzz {

class SessionDriver {
 public:
  static Result<std::unique_ptr<SessionDriver>> Start();
  ~SessionDriver();

  // OK, or the invariant that failed (the fuzzer aborts with it).
  Status Run(std::string_view input);

 private:
  SessionDriver() = default;
  Status Barrier();
  Status Check(const std::string& stream);

  std::string dir_;  // holds the node's Unix socket
  std::unique_ptr<Server> server_;
  std::optional<testing::TestClient> sync_;
};

}  // namespace kvport::fuzz
