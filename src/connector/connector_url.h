// SPDX-License-Identifier: Apache-2.0
// The parts of a connector URL: scheme://authority[/path].
#pragma once

#include <string>
#include <string_view>

#include "kvport/status.h"

namespace kvport {

struct ConnectorUrl {
  std::string scheme;     // "eic", "mem"; lowercased
  std::string authority;  // "host:port" or "[v6]:port" for eic; a name (maybe empty) for mem
  std::string path;       // without the leading '/'; "" when absent
};

// InvalidArgument naming the problem for text without "scheme://", an empty scheme, or a path
// with more than one segment.
Result<ConnectorUrl> ParseConnectorUrl(std::string_view url);

}  // namespace kvport
