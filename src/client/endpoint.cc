// SPDX-License-Identifier: Apache-2.0
#include "client/endpoint.h"

#include <string>

#include "common/node_list.h"

namespace kvport::client {

Result<Endpoint> ParseEndpoint(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("endpoint '" + std::string(text) + "': " + std::string(why));
  };
  std::string_view rest = text;
  Endpoint endpoint;
  if (rest.starts_with("unix:")) {
    rest.remove_prefix(5);
    if (rest.starts_with("//")) rest.remove_prefix(2);  // unix:///path
    if (rest.empty() || rest[0] != '/') return bad("a Unix socket is written unix:/ABSOLUTE/PATH");
    if (rest.size() > 107) return bad("the Unix socket path is longer than 107 bytes");
    endpoint.address.unix_path = std::string(rest);
    return endpoint;
  }
  if (size_t scheme_end = rest.find("://"); scheme_end != std::string_view::npos) {
    std::string_view scheme = rest.substr(0, scheme_end);
    if (scheme != "eic") {
      return bad("unknown scheme '" + std::string(scheme) +
                 "://'; a kvport node is addressed as eic://HOST:PORT or HOST:PORT");
    }
    rest.remove_prefix(scheme_end + 3);
    if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
      endpoint.ns = std::string(rest.substr(slash + 1));
      rest = rest.substr(0, slash);
      if (endpoint.ns.find('/') != std::string::npos) {
        return bad("the path must be a single namespace name, e.g. eic://host:7470/myns");
      }
    }
  }
  Result<std::string_view> node = SingleNodeOfList(rest);  // EIC's "HOST:PORT;" form
  if (!node.ok()) return bad(node.status().message());
  rest = *node;
  if (rest.empty()) return bad("no HOST:PORT");
  if (rest.find(':') == std::string_view::npos) return bad("no port; expected HOST:PORT");
  Result<net::HostPort> address = net::ParseHostPort(rest);
  if (!address.ok()) return bad(address.status().message());
  if (address->port == 0) return bad("port 0 names no node; give the node's port");
  if (address->host.empty()) return bad("no host; expected HOST:PORT");
  endpoint.address.tcp = std::move(address).value();
  return endpoint;
}

}  // namespace kvport::client
