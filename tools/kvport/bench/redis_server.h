// SPDX-License-Identifier: Apache-2.0
// RedisServer: a redis-server child process on an ephemeral loopback port, for the baseline.
//
// Started with persistence off (--save "" --appendonly no), bound to 127.0.0.1 only, its log
// discarded; stopped (SIGTERM, then SIGKILL after a grace period) by Stop() or the destructor.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/status.h"

namespace kvport::bench {

class RedisServer {
 public:
  // The executable `name_or_path` names: a path containing '/' as is, else the first match in
  // PATH. NotFound saying where it looked and how to install it.
  static Result<std::string> FindExecutable(std::string_view name_or_path);

  // Starts `executable` (with `extra_args` after the options above, e.g. "--maxclients", "N")
  // and waits until it answers PING. Unavailable when it exits or does not answer within
  // `ready_timeout` (after a few tries with other ports, in case another process took the one
  // picked).
  static Result<std::unique_ptr<RedisServer>> Start(
      const std::string& executable,
      std::chrono::milliseconds ready_timeout = std::chrono::seconds(10),
      const std::vector<std::string>& extra_args = {});

  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Idempotent.
  void Stop();

 private:
  RedisServer(pid_t pid, uint16_t port) : pid_(pid), port_(port) {}
  pid_t pid_;
  uint16_t port_;
};

}  // namespace kvport::bench
