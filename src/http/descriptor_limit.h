// SPDX-License-Identifier: Apache-2.0
// The process's file descriptor limit against what a node may hold open at once.
//
// Every connection, data or HTTP, is a descriptor; past RLIMIT_NOFILE accept() fails (EMFILE)
// for whoever comes next, data sessions included. So `kvport serve` raises the soft limit to the
// hard one at start (the soft one is often 1024) and warns, naming the numbers, when even that
// is below one descriptor per data connection (max_connections), one per HTTP connection (the
// endpoint's cap) and a margin. docs/operations.md, "File descriptors".
#pragma once

#include <cstdint>
#include <string>

#include "kvport/status.h"

namespace kvport::http {

// Beside the connections: the listeners, each I/O loop's epoll and eventfd, the arena's memfd,
// the etcd client's connections, logs and libraries.
inline constexpr uint64_t kDescriptorMargin = 64;

// Descriptors a node may hold at once. `http_max_connections` is 0 without an HTTP endpoint.
uint64_t DescriptorsNeeded(uint64_t max_connections, uint64_t http_max_connections);

struct DescriptorLimit {
  uint64_t soft = 0;  // RLIM_INFINITY reads as UINT64_MAX
  uint64_t hard = 0;
};

// Raises the soft RLIMIT_NOFILE to the hard one and returns the limits then in force. Where the
// process may not (a seccomp filter), the limits are left as they are and returned; IoError only
// when they cannot be read.
Result<DescriptorLimit> RaiseDescriptorLimit();

// The warning to log when `limit` (the soft limit in force) is below DescriptorsNeeded; ""
// when it is enough.
std::string DescriptorLimitWarning(uint64_t limit, uint64_t max_connections,
                                   uint64_t http_max_connections);

// What `kvport serve` calls at start: RaiseDescriptorLimit, then DescriptorLimitWarning for the
// limit in force (or a warning that the limit could not be read).
std::string CheckDescriptorLimit(uint64_t max_connections, uint64_t http_max_connections);

}  // namespace kvport::http
