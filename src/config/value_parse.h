// SPDX-License-Identifier: Apache-2.0
// Typed parsing of configuration values from their text, as written in YAML or in an
// environment variable. Errors say what was expected and what was found; the caller prefixes
// where (file:line or variable) and which key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/size.h"
#include "kvport/status.h"

namespace kvport::config_internal {

// true/false, yes/no, on/off, 1/0 (case-insensitive).
// `s` without the blanks (spaces, tabs) at either end.
std::string_view Trim(std::string_view s);

Result<bool> ParseBool(std::string_view text);

// A whole decimal integer in [min, max]; the error names the range and `unit` ("tokens").
Result<int64_t> ParseInteger(std::string_view text, int64_t min, int64_t max,
                             std::string_view unit);

// What a capacity is checked against.
struct CapacityLimits {
  uint64_t host_memory_bytes = 0;  // 0 = unknown: not checked
  bool limit_to_host_memory = true;
  bool allow_zero = false;  // 0 means "disabled" for this key
};

// Parses a size key (a bare number in `bare_unit`, or a number with a unit such as "64GiB") and
// checks it against `limits`. A bad value is an InvalidArgument that names `key`, the value,
// its unit, the bytes it means in human form, the host's memory and, when a bare number for a
// non-byte unit looks like a byte count, what was probably meant. Suspicious but valid values
// (a bare byte count under 1 MiB) add a line to `warnings`.
Result<uint64_t> ParseCapacity(std::string_view key, std::string_view text, SizeUnit bare_unit,
                               const CapacityLimits& limits, std::vector<std::string>* warnings);

// The bytes in one `unit`.
uint64_t SizeUnitBytes(SizeUnit unit);

// Levenshtein distance, for "did you mean" on unknown keys.
size_t EditDistance(std::string_view a, std::string_view b);

}  // namespace kvport::config_internal
