// SPDX-License-Identifier: Apache-2.0
#include "config/chunk_hash_check.h"

#include <fmt/core.h>

namespace kvport::config_internal {

std::optional<std::string> PerProcessChunkHashWarning(
    std::string_view remote_url, const std::optional<ChunkHashSetting>& setting) {
  if (remote_url.empty()) return std::nullopt;
  // "builtin" is the only per-process choice: vLLM's sha256 and sha256_cbor, which LMCache
  // offers beside it, hash the tokens' bytes.
  if (setting && setting->value != "builtin") return std::nullopt;
  const std::string what =
      setting
          ? fmt::format("{}: pre_caching_hash_algorithm is \"builtin\"", setting->where)
          : std::string("pre_caching_hash_algorithm is not set (LMCache's default: \"builtin\")");
  return fmt::format(
      "{}: LMCache keys chunks with Python's hash(), which differs in every process unless "
      "PYTHONHASHSEED is fixed, so engines sharing the node at remote_url never reuse each "
      "other's chunks; set pre_caching_hash_algorithm: sha256_cbor",
      what);
}

}  // namespace kvport::config_internal
