// SPDX-License-Identifier: Apache-2.0
// The parts of a connector URL: scheme://authority[/path].
#pragma once

#include <string>
#include <string_view>

#include "kvport/status.h"

namespace kvport {

struct ConnectorUrl {
  std::string scheme;     // "eic", "mem"; lowercased
  std::string rest;       // everything after "scheme://" (what the scheme's connector parses)
  std::string authority;  // up to the first '/': "host:port" for eic; a name (maybe empty) for mem
  std::string path;       // after the first '/', without a trailing '/'; "" when absent
};

// InvalidArgument naming the problem for text without "scheme://" or with an empty scheme. The
// parts after the scheme are for each scheme's connector to check.
Result<ConnectorUrl> ParseConnectorUrl(std::string_view url);

}  // namespace kvport
