// SPDX-License-Identifier: Apache-2.0
// Endpoint: where a client connects, as written by users: one node, a static list of nodes, or a
// cluster in etcd (the forms are in common/endpoint_text.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

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
  // One entry: a single node. Several: a static cluster, in the order written. Empty: etcd.
  std::vector<NodeAddress> nodes;
  std::vector<std::string> etcd;  // etcd's HOST:PORT endpoints (etcd form)
  std::string cluster;            // the cluster's name (etcd form)
  // The namespace the endpoint names (its /NS); empty when none. The client ignores it
  // (namespaces are per call); the CLI and the connector use it as their default.
  std::string ns;
  int replicas = 0;      // ?replicas=N; 0 when not given
  int write_quorum = 0;  // ?write_quorum=M; 0 when not given

  // A cluster (a static list of several nodes, or etcd) rather than one node.
  bool is_cluster() const { return nodes.size() != 1; }
  // "host:port", "a:1;b:2" or "etcd:e:2379/NAME": the endpoint as the client names it.
  std::string ToString() const;
};

// Parses every form of common/endpoint_text.h and checks each HOST:PORT (the port must be given
// and not 0). Errors (InvalidArgument) quote the text and say what is wrong, e.g. an unknown
// scheme ("redis://...": this client speaks eic:// only).
Result<Endpoint> ParseEndpoint(std::string_view text);

}  // namespace kvport::client
