// SPDX-License-Identifier: Apache-2.0
// MemConnector: mem:// — chunks in an in-process map.
//
// Keeps the same semantics as the eic:// connector (checked chunks, per-key outcomes, prefix
// rules) without a node, so engine code can be tested without sockets. Connectors opened with the
// same name share one map.
#pragma once

#include <memory>
#include <string>

#include "kvport/connector.h"

namespace kvport {

// Opens (or joins) the map named `name`.
std::unique_ptr<RemoteConnector> OpenMemConnector(const std::string& name);

}  // namespace kvport
