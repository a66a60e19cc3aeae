// SPDX-License-Identifier: Apache-2.0
// EicConnector: eic:// — chunks on a kvport node, through kvport::Client.
//
// Each chunk is one object on the node: the key is CacheKey::ToString(), the payload is the
// chunk's bytes and the object's metadata blob is the encoded RemoteMetadata, which the node
// stores atomically with the payload. So metadata never exists without its data, and a put that
// failed leaves nothing that could later read as a hit.
#pragma once

#include <memory>
#include <string>

#include "kvport/connector.h"

namespace kvport {

// Connects to the node at `endpoint` ("host:port"); `options.ns` is the namespace of every key.
// Fails like Client::Init: NotSupported for a transport this host cannot do (GPUDirect without a
// usable CUDA runtime), Unavailable when the node does not answer.
Result<std::unique_ptr<RemoteConnector>> OpenEicConnector(const std::string& endpoint,
                                                          const ConnectorOptions& options);

}  // namespace kvport
