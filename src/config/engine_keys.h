// SPDX-License-Identifier: Apache-2.0
// The YAML keys the engines read from their own config files and kvport does not (LMCache's
// LMCacheEngineConfig, SGLang's remote-eic.yaml, AIBrix's EIC YAML), so that `kvport config
// check` on an engine's file names them as the engine's instead of warning that they are unknown.
#pragma once

#include <string_view>

namespace kvport::config_internal {

// "LMCache", "SGLang" or "LMCache, SGLang" for a key an engine reads and kvport does not;
// nullptr for any other key.
const char* EnginesReading(std::string_view key);

}  // namespace kvport::config_internal
