// SPDX-License-Identifier: Apache-2.0
// The table of configuration keys: name, environment variable, type, how to parse and check a
// value, how to print it. docs/configuration.md describes the same table for people; keep the
// two in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/config.h"
#include "kvport/status.h"

namespace kvport::config_internal {

enum class ValueKind { kBool, kInteger, kSize, kString, kMap };

// What a setter may need besides the value itself.
struct LoadContext {
  uint64_t host_memory_bytes = 0;  // 0 = unknown
  std::vector<std::string>* warnings = nullptr;
};

struct KeySpec {
  std::string_view key;
  std::string_view env_var;
  ValueKind kind = ValueKind::kString;
  // Set after every other key, because its check reads them (capacities read
  // allow_capacity_over_host_memory).
  bool reads_other_keys = false;
  // eic_* keys: LMCache users also write them inside extra_config.
  bool also_in_extra_config = false;
  // Parses `text` into the Config; the error says what was wrong, without the key's name (the
  // loader prefixes where and which key). Null for kMap (extra_config, handled by the loader).
  std::function<Status(Config&, std::string_view text, const LoadContext&)> set;
  // The effective value as text: a string key's value as it is, numbers and bools as YAML
  // writes them (ConfigEntry::value).
  std::function<std::string(const Config&)> show;
  // Sizes in human form ("5 GiB"); null for other kinds.
  std::function<std::string(const Config&)> human;
  // Checks a default that no source overrode (may add warnings); null when defaults need none.
  std::function<void(const Config&, const LoadContext&)> check_default;
};

// Every key, in documentation order.
const std::vector<KeySpec>& ConfigKeys();

// Cross-key rules (a value larger than capacity, a frame too small for one key); one message
// per broken rule, naming both keys.
std::vector<std::string> CheckCrossKeyRules(const Config& config);

}  // namespace kvport::config_internal
