// SPDX-License-Identifier: Apache-2.0
#include "net/host_port.h"

#include <charconv>

namespace kvport::net {

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<HostPort> ParseHostPort(std::string_view text, std::string_view default_host) {
  auto invalid = [&](std::string_view why) {
    return Status::InvalidArgument("address '" + std::string(text) + "': " + std::string(why) +
                                   " (expected HOST:PORT, e.g. 127.0.0.1:7000 or [::1]:7000)");
  };
  HostPort result;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return invalid("'[' without a closing ']'");
    result.host = std::string(text.substr(1, close - 1));
    if (result.host.empty()) return invalid("empty IPv6 address between [ and ]");
    if (close + 1 >= text.size() || text[close + 1] != ':') return invalid("missing ':PORT'");
    port_text = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return invalid("missing ':PORT'");
    if (text.find(':') != colon) return invalid("an IPv6 address must be written in [ ]");
    result.host = std::string(text.substr(0, colon));
    if (result.host.empty()) result.host = std::string(default_host);
    port_text = text.substr(colon + 1);
  }
  if (port_text.empty()) return invalid("empty port");
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
  if (ec != std::errc() || end != port_text.data() + port_text.size()) {
    return invalid("port '" + std::string(port_text) + "' is not a number");
  }
  if (value > 65535) return invalid("port " + std::string(port_text) + " is above 65535");
  result.port = static_cast<uint16_t>(value);
  return result;
}

}  // namespace kvport::net
