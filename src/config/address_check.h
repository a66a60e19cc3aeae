// SPDX-License-Identifier: Apache-2.0
// Checks of the configuration's address-valued keys (remote_url, listen, unix_socket): pure text
// rules, no name resolution and no sockets, so that `kvport config check` explains a bad address
// before anything tries to use it. The layers that use an address (client/, connector/, server/)
// parse it again; these rules accept exactly what they can use.
#pragma once

#include <cstddef>
#include <string_view>

#include "kvport/status.h"

namespace kvport::config_internal {

// remote_url: "" (no remote backend), or one of the schemes the connector registry knows
// (src/connector/connector_registry.cc), case-insensitively:
//   eic://HOST:PORT[/NAMESPACE]   a kvport node; PORT 1..65535, HOST not empty (IPv6 in [ ]);
//                                 EIC's one-entry list form HOST:PORT; is accepted, a list of
//                                 several nodes is refused (no cluster support yet)
//   mem://[NAME]                  an in-process map (tests and examples)
// The error says which part is wrong and what was expected.
Status CheckRemoteUrl(std::string_view url);

// listen: HOST:PORT or [IPV6]:PORT with PORT 0..65535 (0 picks a free port), HOST not empty.
Status CheckListenAddress(std::string_view listen);

// The longest Unix socket path (sockaddr_un::sun_path holds 108 bytes with the NUL).
inline constexpr size_t kMaxUnixSocketPathBytes = 107;

// unix_socket: "" (none), "auto", or an absolute path of at most kMaxUnixSocketPathBytes bytes
// without NUL bytes.
Status CheckUnixSocket(std::string_view path);

// etcd: "" (standalone), or etcd client endpoints HOST:PORT[,HOST:PORT...], each port 1..65535.
Status CheckEtcdEndpoints(std::string_view list);

// advertise: "" (the listen address), or HOST:PORT (port 1..65535) clients can connect to: not
// a wildcard host (0.0.0.0, ::).
Status CheckAdvertiseAddress(std::string_view address);

// cluster: "" (standalone), or a name of letters, digits, '.', '-', '_' (at most 128 bytes): it
// is part of etcd keys, /kvport/clusters/NAME/nodes/.
Status CheckClusterName(std::string_view name);

// node_id: "" (the advertised address), or at most 255 bytes with no '/', space or control byte.
Status CheckNodeId(std::string_view id);

}  // namespace kvport::config_internal
