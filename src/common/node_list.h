// SPDX-License-Identifier: Apache-2.0
// EIC's static node list, "HOST:PORT;HOST:PORT" (often written with a trailing ';'): one rule for
// the config check and the client, which both accept a one-entry list until the cluster issue
// lands and refuse a longer one rather than silently using its first node.
#pragma once

#include <string_view>

#include "kvport/status.h"

namespace kvport {

// The one entry of `list` ("A", "A;"); `list` without ';' is returned as is. InvalidArgument for
// an empty entry ("A;;", ";A") or more than one entry, saying why.
Result<std::string_view> SingleNodeOfList(std::string_view list);

}  // namespace kvport
