// SPDX-License-Identifier: Apache-2.0
// HostPort: a "HOST:PORT" listen or connect address, as written in config and on the command
// line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvport/status.h"

namespace kvport::net {

struct HostPort {
  std::string host;  // a numeric IPv4/IPv6 address or a host name; never bracketed
  uint16_t port = 0;

  // "127.0.0.1:7000", or "[::1]:7000" for an IPv6 address.
  std::string ToString() const;
};

// Parses "HOST:PORT", "[IPV6]:PORT" or ":PORT" (host defaults to `default_host`). PORT is
// 0..65535; 0 asks the kernel for an ephemeral port. Errors (InvalidArgument) quote the text
// and say which part is wrong.
Result<HostPort> ParseHostPort(std::string_view text, std::string_view default_host = "127.0.0.1");

}  // namespace kvport::net
