// SPDX-License-Identifier: Apache-2.0
#include "http/descriptor_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <limits>

#include <fmt/core.h>

namespace kvport::http {

namespace {

uint64_t FromRlim(rlim_t value) {
  return value == RLIM_INFINITY ? std::numeric_limits<uint64_t>::max()
                                : static_cast<uint64_t>(value);
}

}  // namespace

uint64_t DescriptorsNeeded(uint64_t max_connections, uint64_t http_max_connections) {
  return max_connections + http_max_connections + kDescriptorMargin;
}

Result<DescriptorLimit> RaiseDescriptorLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return Status::FromErrno("getrlimit(RLIMIT_NOFILE)", errno);
  }
  if (limit.rlim_cur != limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    // Fails under a seccomp filter without setrlimit (the shipped systemd unit's, whose
    // LimitNOFILE sets both limits anyway) or for an infinite hard limit: keep what there is.
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return DescriptorLimit{FromRlim(limit.rlim_cur), FromRlim(limit.rlim_max)};
}

std::string DescriptorLimitWarning(uint64_t limit, uint64_t max_connections,
                                   uint64_t http_max_connections) {
  const uint64_t needed = DescriptorsNeeded(max_connections, http_max_connections);
  if (limit >= needed) return "";
  const std::string http =
      http_max_connections == 0 ? "" : fmt::format(" + {} HTTP connections", http_max_connections);
  return fmt::format(
      "the file descriptor limit (RLIMIT_NOFILE) is {}, below the {} this node may need "
      "({} data connections (max_connections){} + {} for listeners, loops, the arena and etcd): "
      "past it new connections fail, data sessions included. Raise the limit (LimitNOFILE={} "
      "in the systemd unit, ulimit -n, or the container runtime's nofile) or lower "
      "max_connections",
      limit, needed, max_connections, http, kDescriptorMargin, needed);
}

std::string CheckDescriptorLimit(uint64_t max_connections, uint64_t http_max_connections) {
  Result<DescriptorLimit> limit = RaiseDescriptorLimit();
  if (!limit.ok()) {
    return "cannot check the file descriptor limit against max_connections: " +
           limit.status().ToString();
  }
  return DescriptorLimitWarning(limit->soft, max_connections, http_max_connections);
}

}  // namespace kvport::http
