// SPDX-License-Identifier: Apache-2.0
// Which network interfaces carry an address: what a service that must listen only where the
// node listens (UCX's transports pick interfaces, not addresses) is limited to.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvport/status.h"

namespace kvport::net {

struct AddressInterfaces {
  std::string numeric_host;        // `host` resolved ("127.0.0.1", "::1", "0.0.0.0")
  bool wildcard = false;           // 0.0.0.0 or ::: every interface
  std::vector<std::string> names;  // the interfaces holding that address ("lo"); empty if wildcard
};

// Resolves `host` (a numeric address or a name; "" is the IPv4 wildcard) and finds the
// interfaces that hold the address. NotFound when no interface of this host holds it;
// InvalidArgument when it does not resolve.
Result<AddressInterfaces> InterfacesOf(std::string_view host);

}  // namespace kvport::net
