// SPDX-License-Identifier: Apache-2.0
#include "client/endpoint.h"

#include <fmt/core.h>

#include <string>

#include "common/endpoint_text.h"

namespace kvport::client {
namespace {

Result<net::HostPort> ParseNodeAddress(std::string_view entry) {
  if (entry.find(':') == std::string_view::npos) {
    return Status::InvalidArgument(
        fmt::format("'{}' has no port; expected HOST:PORT", std::string(entry)));
  }
  KVPORT_ASSIGN_OR_RETURN(net::HostPort address, net::ParseHostPort(entry));
  if (address.port == 0) {
    return Status::InvalidArgument(
        fmt::format("'{}': port 0 names no node; give the node's port", std::string(entry)));
  }
  if (address.host.empty()) {
    return Status::InvalidArgument(
        fmt::format("'{}' has no host; expected HOST:PORT", std::string(entry)));
  }
  return address;
}

}  // namespace

std::string Endpoint::ToString() const {
  if (!cluster.empty()) {
    std::string text = "etcd:";
    for (size_t i = 0; i < etcd.size(); ++i)
      text += (i > 0 ? "," : "") + etcd[i];
    return text + "/" + cluster;
  }
  std::string text;
  for (size_t i = 0; i < nodes.size(); ++i)
    text += (i > 0 ? ";" : "") + nodes[i].ToString();
  return text;
}

Result<Endpoint> ParseEndpoint(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("endpoint '" + std::string(text) + "': " + std::string(why));
  };
  Result<EndpointText> text_parts = ParseEndpointText(text);
  if (!text_parts.ok()) return bad(text_parts.status().message());
  EndpointText& parsed = *text_parts;
  Endpoint endpoint;
  endpoint.ns = std::move(parsed.ns);
  endpoint.replicas = parsed.replicas;
  endpoint.write_quorum = parsed.write_quorum;
  switch (parsed.kind) {
    case EndpointText::Kind::kUnix: {
      if (parsed.unix_path.size() > 107)
        return bad("the Unix socket path is longer than 107 bytes");
      NodeAddress address;
      address.unix_path = std::move(parsed.unix_path);
      endpoint.nodes.push_back(std::move(address));
      return endpoint;
    }
    case EndpointText::Kind::kEtcd:
      for (const std::string& entry : parsed.addresses) {
        Result<net::HostPort> address = ParseNodeAddress(entry);
        if (!address.ok()) return bad("etcd " + address.status().message());
        endpoint.etcd.push_back(address->ToString());
      }
      endpoint.cluster = std::move(parsed.cluster);
      return endpoint;
    case EndpointText::Kind::kNodes:
      for (const std::string& entry : parsed.addresses) {
        Result<net::HostPort> address = ParseNodeAddress(entry);
        if (!address.ok()) return bad(address.status().message());
        NodeAddress node;
        node.tcp = std::move(address).value();
        for (const NodeAddress& earlier : endpoint.nodes) {
          if (earlier.ToString() == node.ToString())
            return bad("node " + node.ToString() + " is listed twice");
        }
        endpoint.nodes.push_back(std::move(node));
      }
      return endpoint;
  }
  return bad("unknown endpoint form");
}

}  // namespace kvport::client
