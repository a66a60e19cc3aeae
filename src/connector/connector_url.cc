// SPDX-License-Identifier: Apache-2.0
#include "connector/connector_url.h"

#include <fmt/core.h>

#include <cctype>

namespace kvport {

Result<ConnectorUrl> ParseConnectorUrl(std::string_view url) {
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return Status::InvalidArgument(
        fmt::format("connector URL '{}' has no scheme (expected e.g. eic://host:port)", url));
  }
  ConnectorUrl out;
  for (char c : url.substr(0, sep)) {
    out.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (out.scheme.empty()) {
    return Status::InvalidArgument(fmt::format("connector URL '{}' has an empty scheme", url));
  }
  std::string_view rest = url.substr(sep + 3);
  out.rest = std::string(rest);
  const size_t slash = rest.find('/');
  out.authority = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash + 1);
    if (!path.empty() && path.back() == '/') path.remove_suffix(1);
    out.path = std::string(path);
  }
  return out;
}

}  // namespace kvport
