// SPDX-License-Identifier: Apache-2.0
// CreateConnector: the table of URL schemes and what each one makes.
#include <fmt/core.h>

#include "connector/connector_url.h"
#include "connector/eic_connector.h"
#include "connector/mem_connector.h"
#include "kvport/client.h"
#include "kvport/config.h"
#include "kvport/connector.h"

namespace kvport {
namespace {

// One node, a static list or an etcd cluster: the client parses and checks the endpoint.
Result<std::unique_ptr<RemoteConnector>> MakeEic(const ConnectorUrl& url,
                                                 ConnectorOptions options) {
  const std::string endpoint = "eic://" + url.rest;
  KVPORT_ASSIGN_OR_RETURN(std::string url_ns, EndpointNamespace(endpoint));
  if (!url_ns.empty()) options.ns = std::move(url_ns);  // the URL's namespace wins over eic_kv_ns
  return OpenEicConnector(endpoint, options);
}

Result<std::unique_ptr<RemoteConnector>> MakeMem(const ConnectorUrl& url, ConnectorOptions) {
  return OpenMemConnector(url.authority);
}

struct Scheme {
  std::string_view name;
  std::string_view what;
  Result<std::unique_ptr<RemoteConnector>> (*make)(const ConnectorUrl&, ConnectorOptions);
};

constexpr Scheme kSchemes[] = {
    {"eic",
     "kvport nodes: eic://host:port[;host:port...][/namespace] or "
     "eic://etcd:host:port/cluster[/namespace]",
     &MakeEic},
    {"mem", "an in-process map: mem://[name]", &MakeMem},
};

}  // namespace

Result<std::unique_ptr<RemoteConnector>> CreateConnector(std::string_view url,
                                                         const ConnectorOptions& options) {
  KVPORT_ASSIGN_OR_RETURN(ConnectorUrl parsed, ParseConnectorUrl(url));
  std::string known;
  for (const Scheme& s : kSchemes) {
    if (s.name == parsed.scheme) return s.make(parsed, options);
    known += fmt::format("{}{} ({})", known.empty() ? "" : ", ", s.name, s.what);
  }
  return Status::InvalidArgument(
      fmt::format("unknown connector scheme '{}' in '{}'; known: {}", parsed.scheme, url, known));
}

Result<std::unique_ptr<RemoteConnector>> CreateConnector(const Config& config) {
  if (config.remote_url.empty()) {
    return Status::InvalidArgument("remote_url is empty: no remote connector is configured");
  }
  ConnectorOptions options;
  options.ns = config.eic_kv_ns;
  options.ttl_seconds = config.eic_kv_ttl;
  options.transport_type = static_cast<int>(config.eic_trans_type);
  options.timeout_secs = config.blocking_timeout_secs;
  options.token_file = config.token_file;
  options.tls_ca_file = config.tls_ca_file;
  options.tls_cert_file = config.tls_cert_file;
  options.tls_key_file = config.tls_key_file;
  options.tls_verify_hostname = config.tls_verify_hostname;
  options.replicas = static_cast<int>(config.replicas);
  options.write_quorum = static_cast<int>(config.write_quorum);
  options.busy_poll_us = static_cast<int>(config.busy_poll_us);
  options.checksums = config.checksums;
  if (!config.ucx_devices.empty()) {
    for (std::string_view lane : SplitUcxLanes(config.ucx_devices))
      options.ucx_devices.emplace_back(lane);
  }
  return CreateConnector(config.remote_url, options);
}

}  // namespace kvport
