// SPDX-License-Identifier: Apache-2.0
// The node's name in its cluster, kept in its disk tier's folder (the file node-id) across
// restarts: a node restarted on another address (a rescheduled pod on the same volume) is the
// same member, and placement sends it its keys (docs/cluster.md).
#pragma once

#include <string>

#include "kvport/status.h"

namespace kvport::server {

// The name to register under: `id` when `configured` (the config names the node; the file
// follows it) or when `dir` has no node-id file yet, else the one the file has. The file is
// replaced whole or not at all. IoError when it cannot be read or written.
Result<std::string> KeepNodeId(const std::string& dir, const std::string& id, bool configured);

}  // namespace kvport::server
