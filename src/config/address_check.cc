// SPDX-License-Identifier: Apache-2.0
#include "config/address_check.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <string>

#include "common/endpoint_text.h"

namespace kvport::config_internal {
namespace {

bool IsHostNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
}

// Inside [ ]: an IPv6 address, maybe with a %zone.
bool IsIpv6Char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == ':' || c == '.' || c == '%' ||
         c == '-' || c == '_';
}

// Splits and checks "HOST:PORT" / "[IPV6]:PORT"; the error says what is wrong, without quoting
// the whole text (the caller does). `min_port` is 0 for a listen address, 1 to reach a node.
Status CheckHostPort(std::string_view text, unsigned min_port) {
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos)
      return Status::InvalidArgument("'[' without a closing ']'");
    host = text.substr(1, close - 1);
    if (host.empty()) return Status::InvalidArgument("no host: the IPv6 address in [ ] is empty");
    if (!std::all_of(host.begin(), host.end(), IsIpv6Char)) {
      return Status::InvalidArgument(fmt::format("'{}' is not an IPv6 address", std::string(host)));
    }
    if (close + 1 == text.size()) {
      return Status::InvalidArgument("no port; expected [IPV6]:PORT, e.g. [::1]:7470");
    }
    if (text[close + 1] != ':') {
      return Status::InvalidArgument("expected ':PORT' right after the ']'");
    }
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return Status::InvalidArgument("no port; expected HOST:PORT, e.g. 127.0.0.1:7470");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return Status::InvalidArgument("an IPv6 address must be in brackets, e.g. [::1]:7470");
    }
    if (host.empty()) return Status::InvalidArgument("no host; expected HOST:PORT");
    if (!std::all_of(host.begin(), host.end(), IsHostNameChar)) {
      return Status::InvalidArgument(
          fmt::format("host '{}' is not a host name or IP address (letters, digits, '.', '-', '_')",
                      std::string(host)));
    }
  }
  const std::string range = fmt::format("a number from {} to 65535{}", min_port,
                                        min_port == 0 ? " (0 picks a free port)" : "");
  uint32_t value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty()) return Status::InvalidArgument("no port after ':'; expected " + range);
  if (ec == std::errc::invalid_argument || end != port.data() + port.size()) {
    return Status::InvalidArgument(fmt::format("port '{}' is not {}", std::string(port), range));
  }
  if (ec == std::errc::result_out_of_range || value > 65535 || value < min_port) {
    return Status::InvalidArgument(
        fmt::format("port '{}' is out of range: expected {}{}", std::string(port), range,
                    value == 0 && min_port > 0 ? "; port 0 names no node" : ""));
  }
  return Status::Ok();
}

// An eic:// URL: one node, a static list or an etcd cluster (common/endpoint_text.h), each
// HOST:PORT a valid address.
Status CheckEicEndpoint(std::string_view url) {
  const std::string shown(url);
  Result<EndpointText> parsed = ParseEndpointText(url);
  if (!parsed.ok()) {
    return Status::InvalidArgument(fmt::format("'{}': {}", shown, parsed.status().message()));
  }
  if (parsed->kind == EndpointText::Kind::kUnix) {
    return Status::InvalidArgument(
        fmt::format("'{}': a unix: socket is not an eic:// URL; write unix:/PATH alone", shown));
  }
  for (const std::string& address : parsed->addresses) {
    if (Status s = CheckHostPort(address, /*min_port=*/1); !s.ok()) {
      // One node: the URL says which; in a list, name the entry too.
      return Status::InvalidArgument(
          parsed->addresses.size() == 1 && parsed->kind == EndpointText::Kind::kNodes
              ? fmt::format("'{}': {}", shown, s.message())
              : fmt::format("'{}': '{}': {}", shown, address, s.message()));
    }
  }
  return Status::Ok();
}

struct Scheme {
  std::string_view name;
  std::string_view form;
};

// The connector registry's schemes (src/connector/connector_registry.cc); keep in step.
constexpr Scheme kSchemes[] = {
    {"eic",
     "eic://HOST:PORT[;HOST:PORT...][/NAMESPACE] or eic://etcd:HOST:PORT/CLUSTER[/NAMESPACE] "
     "(kvport "
     "nodes)"},
    {"mem", "mem://[NAME] (an in-process map)"},
};

}  // namespace

Status CheckRemoteUrl(std::string_view url) {
  if (url.empty()) return Status::Ok();
  const std::string shown(url);
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos || sep == 0) {
    return Status::InvalidArgument(fmt::format(
        "'{}' has no scheme; expected SCHEME://HOST:PORT, e.g. eic://127.0.0.1:7470", shown));
  }
  const std::string_view scheme = url.substr(0, sep);
  if (scheme == "mem") return Status::Ok();  // any name, or none
  if (scheme != "eic") {
    std::string known;
    std::string lower;
    for (char c : scheme)
      lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const Scheme& s : kSchemes) {
      if (s.name == lower) {
        // The connector registry would take it, the client and `kvport stat` would not.
        return Status::InvalidArgument(
            fmt::format("'{}': write the scheme in lowercase, {}://", shown, std::string(s.name)));
      }
      known += fmt::format("{}{}", known.empty() ? "" : ", ", s.form);
    }
    return Status::InvalidArgument(
        fmt::format("'{}': unknown scheme '{}://'; known: {}", shown, std::string(scheme), known));
  }
  return CheckEicEndpoint(url);
}

Status CheckListenAddress(std::string_view listen) {
  if (listen.find(':') == std::string_view::npos) {
    return Status::InvalidArgument(
        fmt::format("'{}' is not HOST:PORT (e.g. 127.0.0.1:7470, 0.0.0.0:7470 or [::1]:7470)",
                    std::string(listen)));
  }
  if (Status s = CheckHostPort(listen, /*min_port=*/0); !s.ok()) {
    return Status::InvalidArgument(fmt::format("'{}': {}", std::string(listen), s.message()));
  }
  return Status::Ok();
}

Status CheckUnixSocket(std::string_view path) {
  if (path.empty() || path == "auto") return Status::Ok();
  if (path.front() != '/') {
    return Status::InvalidArgument(
        fmt::format("'{}' is not an absolute path; expected \"\" (no Unix socket), \"auto\" "
                    "($XDG_RUNTIME_DIR or /tmp)/kvport-PORT.sock) or a path starting with '/'",
                    std::string(path)));
  }
  if (path.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("the path holds a NUL byte");
  }
  if (path.size() > kMaxUnixSocketPathBytes) {
    return Status::InvalidArgument(
        fmt::format("the path is {} bytes; a Unix socket path holds at most {} bytes", path.size(),
                    kMaxUnixSocketPathBytes));
  }
  return Status::Ok();
}

Status CheckEtcdEndpoints(std::string_view list) {
  Result<std::vector<std::string>> entries = SplitEtcdEndpoints(list);
  if (!entries.ok()) {
    return Status::InvalidArgument(
        fmt::format("'{}': {}", std::string(list), entries.status().message()));
  }
  for (const std::string& entry : *entries) {
    // etcd's own URL spelling is accepted too; https:// needs etcd_tls_ca_file (EtcdClient).
    std::string_view address = entry;
    for (std::string_view scheme : {"http://", "https://"}) {
      if (address.starts_with(scheme)) address.remove_prefix(scheme.size());
    }
    if (address.ends_with('/')) address.remove_suffix(1);
    if (Status s = CheckHostPort(address, /*min_port=*/1); !s.ok()) {
      return Status::InvalidArgument(fmt::format("etcd endpoint '{}': {}", entry, s.message()));
    }
  }
  return Status::Ok();
}

Status CheckAdvertiseAddress(std::string_view address) {
  if (address.empty()) return Status::Ok();
  if (Status s = CheckHostPort(address, /*min_port=*/1); !s.ok()) {
    return Status::InvalidArgument(fmt::format("'{}': {}", std::string(address), s.message()));
  }
  for (std::string_view wildcard : {"0.0.0.0:", "[::]:", "[0:0:0:0:0:0:0:0]:"}) {
    if (address.substr(0, wildcard.size()) == wildcard) {
      return Status::InvalidArgument(fmt::format(
          "'{}' is a wildcard address; advertise the HOST:PORT clients connect to, e.g. "
          "10.0.0.5:7470",
          std::string(address)));
    }
  }
  return Status::Ok();
}

Status CheckClusterName(std::string_view name) {
  if (name.size() > 128) {
    return Status::InvalidArgument(
        fmt::format("a cluster name of {} bytes is longer than 128", name.size()));
  }
  for (char c : name) {
    if (!IsHostNameChar(c)) {
      return Status::InvalidArgument(fmt::format(
          "'{}' is not a cluster name: use letters, digits, '.', '-' and '_' (it is part of "
          "etcd keys)",
          std::string(name)));
    }
  }
  return Status::Ok();
}

Status CheckNodeId(std::string_view id) {
  if (id.size() > 255) {
    return Status::InvalidArgument(
        fmt::format("a node id of {} bytes is longer than 255", id.size()));
  }
  for (char c : id) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '/' || byte <= 0x20 || byte == 0x7f) {
      return Status::InvalidArgument(
          "a node id must not hold '/', spaces or control bytes (it is the last part of its etcd "
          "key)");
    }
  }
  return Status::Ok();
}

}  // namespace kvport::config_internal
