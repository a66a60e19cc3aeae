// SPDX-License-Identifier: Apache-2.0
// The node's one deadline rule for bytes a client owes it: a request must arrive whole, and a
// shared-memory reservation must be committed, within request_timeout plus one second per
// min_request_bytes_per_sec bytes (kvport::ServerOptions), counted from the request's first
// byte or the reservation's answer. A large value on a slow link is allowed its time; a client
// that stalls is not.
#pragma once

#include <chrono>
#include <cstdint>

namespace kvport::server {

// The time allowed for `bytes`; zero min_bytes_per_sec: `timeout` alone.
inline std::chrono::microseconds AllowedTime(std::chrono::milliseconds timeout,
                                             uint64_t min_bytes_per_sec, uint64_t bytes) {
  auto allowed = std::chrono::duration_cast<std::chrono::microseconds>(timeout);
  if (min_bytes_per_sec > 0) {
    const uint64_t rate = min_bytes_per_sec;
    const uint64_t us = bytes / rate * 1000000 + bytes % rate * 1000000 / rate;
    allowed += std::chrono::microseconds(static_cast<int64_t>(us));
  }
  return allowed;
}

}  // namespace kvport::server
