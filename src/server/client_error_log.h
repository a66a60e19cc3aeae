// SPDX-License-Identifier: Apache-2.0
// ClientErrorLog: warnings about clients' errors (malformed frames, refused requests), at most
// one line per peer host and error kind per interval, so a misbehaving client cannot flood the
// node's log. A warning that is held back is counted, and the next line logged for that peer and
// kind says how many were suppressed since the last one.
//
// Thread safety: every member may be called from any thread (sessions of every I/O loop share
// one log). Errors are rare next to requests, so a mutex is cheap here; it guards the table only
// and the line is written after it is released.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/monotonic_clock.h"
#include "common/thread_annotations.h"

namespace kvport::server {

class ClientErrorLog {
 public:
  explicit ClientErrorLog(std::chrono::milliseconds interval = std::chrono::seconds(10),
                          size_t max_tracked = 1024)
      : interval_(interval), max_tracked_(max_tracked) {}

  // Logs "client PEER: MESSAGE" as a warning unless one of `kind` about the same peer host was
  // logged less than the interval before `now`. `peer` is "host:port" (the port is ignored: a
  // client that reconnects is the same client).
  void Warn(std::string_view peer, std::string_view kind, std::string_view message,
            MonotonicClock::time_point now);
  // What Warn would log (the line, with the suppressed count), or nullopt when it is held back.
  std::optional<std::string> Admit(std::string_view peer, std::string_view kind,
                                   std::string_view message, MonotonicClock::time_point now)
      EXCLUDES(mu_);

  // Warnings held back so far, over every peer and kind.
  uint64_t suppressed() const EXCLUDES(mu_);

 private:
  struct Entry {
    MonotonicClock::time_point logged_at;
    uint64_t suppressed = 0;
  };
  const std::chrono::milliseconds interval_;
  const size_t max_tracked_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Entry> entries_ GUARDED_BY(mu_);
  uint64_t suppressed_total_ GUARDED_BY(mu_) = 0;
};

// "10.0.0.5" from "10.0.0.5:40312", "::1" from "[::1]:40312"; other text as it is.
std::string_view PeerHost(std::string_view peer);

}  // namespace kvport::server
