// SPDX-License-Identifier: Apache-2.0
// The warning for an LMCache config whose engines share a kvport node but key their chunks with
// a hash that differs in every process: LMCache's default pre_caching_hash_algorithm,
// "builtin", is Python's hash(), salted per process unless PYTHONHASHSEED is fixed, so two
// engines never find each other's chunks on the node (each stores its own copy, and a restarted
// engine finds none of its own).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvport::config_internal {

struct ChunkHashSetting {
  std::string value;  // what the file or LMCACHE_PRE_CACHING_HASH_ALGORITHM says
  std::string where;  // "FILE:LINE" or "environment variable LMCACHE_PRE_CACHING_HASH_ALGORITHM"
};

// remote_url: the node the file points at ("" = none: no warning). setting: nullopt when
// neither the file nor the environment names an algorithm (LMCache's default, "builtin").
std::optional<std::string> PerProcessChunkHashWarning(
    std::string_view remote_url, const std::optional<ChunkHashSetting>& setting);

}  // namespace kvport::config_internal
