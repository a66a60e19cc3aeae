// SPDX-License-Identifier: Apache-2.0
// EndpointNamespace (include/kvport/client.h): the client's own endpoint parser, for callers
// (the CLI, tools) that need the /NS of an eic:// URL without reaching into client/.
#include <string>
#include <utility>

#include "client/endpoint.h"
#include "kvport/client.h"

namespace kvport {

Result<std::string> EndpointNamespace(std::string_view endpoint) {
  KVPORT_ASSIGN_OR_RETURN(client::Endpoint parsed, client::ParseEndpoint(endpoint));
  return std::move(parsed.ns);
}

}  // namespace kvport
