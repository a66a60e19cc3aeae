// SPDX-License-Identifier: Apache-2.0
#include "common/node_list.h"

#include <fmt/core.h>

#include <algorithm>

namespace kvport {

Result<std::string_view> SingleNodeOfList(std::string_view list) {
  if (list.find(';') == std::string_view::npos) return list;
  if (list.back() == ';') list.remove_suffix(1);
  size_t entries = 0;
  for (size_t begin = 0; begin <= list.size(); ++entries) {
    const size_t end = std::min(list.find(';', begin), list.size());
    if (end == begin) {
      return Status::InvalidArgument(
          "an empty entry in the node list; expected HOST:PORT or HOST:PORT;");
    }
    begin = end + 1;
  }
  if (entries > 1) {
    return Status::InvalidArgument(fmt::format(
        "a list of {} nodes needs cluster support, which is not built yet; give one node's "
        "HOST:PORT",
        entries));
  }
  return list;
}

}  // namespace kvport
