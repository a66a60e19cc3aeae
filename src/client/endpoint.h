// SPDX-License-Identifier: Apache-2.0
// Endpoint: where a client connects, as written by users ("host:port" or an eic:// URL).
#pragma once

#include <string>
#include <string_view>

#include "kvport/status.h"
#include "net/host_port.h"

namespace kvport::client {

// Where a node listens: a TCP address, or a Unix-domain socket on this host.
struct NodeAddress {
  net::HostPort tcp;      // used when unix_path is empty
  std::string unix_path;  // absolute path of the node's Unix socket
  bool is_unix() const { return !unix_path.empty(); }
  // "host:port" or "unix:/path".
  std::string ToString() const { return is_unix() ? "unix:" + unix_path : tcp.ToString(); }
};

struct Endpoint {
  NodeAddress address;
  // The namespace named by an eic://host:port/NS URL; empty when the URL has none. The client
  // ignores it (namespaces are per call); the CLI and the connector use it as their default.
  std::string ns;
};

// Parses "HOST:PORT", "[IPV6]:PORT", "eic://HOST:PORT", "eic://HOST:PORT/NS" and "unix:/PATH"
// (a node's Unix socket on this host, which asks for shared memory). The port must be given
// and not 0. EIC's static-cluster form "HOST:PORT;HOST:PORT" (with or without a
// trailing ';', with or without eic://) is accepted when it lists exactly one node; a list of
// several is InvalidArgument saying that a multi-node list needs cluster support, which is not
// built yet: it is never silently cut to its first node. Errors (InvalidArgument) quote the text
// and say what is wrong, e.g. an unknown scheme ("redis://...": this client speaks eic://
// only).
Result<Endpoint> ParseEndpoint(std::string_view text);

}  // namespace kvport::client
