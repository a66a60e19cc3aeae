// SPDX-License-Identifier: Apache-2.0
#include "config/value_parse.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace kvport::config_internal {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Only digits, sign, decimal point and exponent: what a YAML or environment number looks like.
// (strtold alone would also take "inf", "nan" and hexadecimal.)
bool LooksLikeBareNumber(std::string_view s) {
  bool digit = false;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c != '.' && c != '+' && c != '-' && c != 'e' && c != 'E') {
      return false;
    }
  }
  return digit;
}

// A short decimal for a suggestion: 476.8, 4.657, 1024.
std::string ShortNumber(long double v) {
  return fmt::format("{:.4g}", static_cast<double>(v));
}

// "15.6 GiB", or a note when the host memory could not be read.
std::string HostMemoryText(uint64_t bytes) {
  return bytes == 0 ? std::string("unknown") : FormatSize(bytes);
}

}  // namespace

uint64_t SizeUnitBytes(SizeUnit unit) {
  switch (unit) {
    case SizeUnit::kBytes:
      return 1;
    case SizeUnit::kKiB:
      return uint64_t{1} << 10;
    case SizeUnit::kMiB:
      return uint64_t{1} << 20;
    case SizeUnit::kGiB:
      return uint64_t{1} << 30;
    case SizeUnit::kTiB:
      return uint64_t{1} << 40;
  }
  return 1;
}

Result<bool> ParseBool(std::string_view text) {
  const std::string t = Lower(Trim(text));
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  return Status::InvalidArgument(
      fmt::format("expects a boolean (true or false), got '{}'", std::string(text)));
}

Result<int64_t> ParseInteger(std::string_view text, int64_t min, int64_t max,
                             std::string_view unit) {
  std::string_view t = Trim(text);
  const bool no_min = min == std::numeric_limits<int64_t>::min();
  const bool no_max = max == std::numeric_limits<int64_t>::max();
  const std::string range = no_min && no_max ? ""
                            : no_max         ? fmt::format(" at least {}", min)
                                             : fmt::format(" from {} to {}", min, max);
  const std::string unit_suffix = unit.empty() ? "" : fmt::format(" ({})", unit);
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (t.empty() || ec == std::errc::invalid_argument || end != t.data() + t.size()) {
    return Status::InvalidArgument(
        fmt::format("expects a whole number{}{}, got '{}'", range, unit_suffix, std::string(text)));
  }
  if (ec == std::errc::result_out_of_range || value < min || value > max) {
    return Status::InvalidArgument(fmt::format("{}{} is out of range: expected{}{}", std::string(t),
                                               unit_suffix, range, unit_suffix));
  }
  return value;
}

Result<uint64_t> ParseCapacity(std::string_view key, std::string_view text, SizeUnit bare_unit,
                               const CapacityLimits& limits, std::vector<std::string>* warnings) {
  const std::string_view t = Trim(text);
  const std::string_view unit = SizeUnitName(bare_unit);
  const std::string must_be = limits.allow_zero ? "must be 0 or more" : "must be more than 0";
  const bool host_limited = limits.limit_to_host_memory && limits.host_memory_bytes != 0;
  const std::string lift_hint = " (set allow_capacity_over_host_memory: true if this is intended)";

  if (LooksLikeBareNumber(t)) {
    const std::string s(t);
    char* end = nullptr;
    const long double v = std::strtold(s.c_str(), &end);
    if (end != s.c_str() + s.size() || !std::isfinite(v)) {
      return Status::InvalidArgument(
          fmt::format("expects a size (a number in {}, or a number with a unit such as 64GiB), "
                      "got '{}'",
                      unit, s));
    }
    if (v < 0 || (v == 0 && !limits.allow_zero)) {
      return Status::InvalidArgument(fmt::format("{} ({}) {}", s, unit, must_be));
    }
    const long double bytes = v * static_cast<long double>(SizeUnitBytes(bare_unit));
    const long double max_bytes = static_cast<long double>(std::numeric_limits<uint64_t>::max());
    const bool over_host =
        host_limited && bytes > static_cast<long double>(limits.host_memory_bytes);
    if (bytes > max_bytes || over_host) {
      std::string msg = fmt::format("{} ({}) means {} of memory", s, unit, FormatSize(bytes));
      if (bytes > max_bytes) {
        msg += fmt::format(", more than any size kvport can represent ({})", FormatSize(max_bytes));
      }
      if (over_host) {
        msg += fmt::format(", more than this host's physical memory ({})",
                           HostMemoryText(limits.host_memory_bytes));
      }
      // A bare number of 2^20 or more in a unit larger than bytes is most likely a byte count
      // written without a unit (the LMCache max_local_cpu_size: 512000000000 mistake).
      if (bare_unit != SizeUnit::kBytes && v >= static_cast<long double>(1 << 20)) {
        msg += fmt::format("; {} is read in {}: did you mean {}: {} ({}) for {} bytes?", key, unit,
                           key, ShortNumber(v / static_cast<long double>(SizeUnitBytes(bare_unit))),
                           unit, s);
      } else if (over_host && bytes <= max_bytes) {
        msg += lift_hint;
      }
      return Status::InvalidArgument(msg);
    }
  }

  Result<uint64_t> parsed = ParseSize(t, bare_unit);
  if (!parsed.ok()) {
    return Status::InvalidArgument(fmt::format("'{}' (a bare number is read in {}): {}",
                                               std::string(t), unit, parsed.status().message()));
  }
  const uint64_t bytes = *parsed;
  if (bytes == 0 && !limits.allow_zero) {
    return Status::InvalidArgument(fmt::format("'{}' {}", std::string(t), must_be));
  }
  if (host_limited && bytes > limits.host_memory_bytes) {
    return Status::InvalidArgument(
        fmt::format("'{}' means {}, more than this host's physical memory ({}){}", std::string(t),
                    FormatSize(bytes), HostMemoryText(limits.host_memory_bytes), lift_hint));
  }
  if (warnings != nullptr && bare_unit == SizeUnit::kBytes && LooksLikeBareNumber(t) &&
      bytes != 0 && bytes < (uint64_t{1} << 20)) {
    warnings->push_back(fmt::format(
        "{}: {} is read in bytes ({}), which is very small; did you mean {}GiB or {}MiB?", key,
        std::string(t), FormatSize(bytes), std::string(t), std::string(t)));
  }
  return bytes;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace kvport::config_internal
