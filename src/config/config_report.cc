// SPDX-License-Identifier: Apache-2.0
// DescribeConfig / DescribeConfigJson: what `kvport config check` prints.
#include <fmt/core.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/escape_text.h"
#include "config/config_keys.h"
#include "kvport/config.h"

namespace kvport {

namespace {

// The value as a config file would show it: strings in double quotes. Escaped, so that a value
// with a newline or a terminal escape stays on its line and cannot pass for another entry.
std::string ShownValue(const ConfigEntry& e) {
  return e.is_string ? "\"" + EscapeText(e.value, '"') + "\"" : EscapeText(e.value);
}

std::string ValueColumn(const ConfigEntry& e) {
  std::string text = EscapeText(e.key) + ": " + ShownValue(e);
  if (!e.human.empty()) text += " = " + e.human;
  return text;
}

// A non-string value (a number, a bool, "{}") as its JSON value; text that is not JSON (never
// expected) stays a string rather than breaking the output.
nlohmann::ordered_json TypedValue(const ConfigEntry& e) {
  if (e.is_string) return e.value;
  nlohmann::ordered_json parsed =
      nlohmann::ordered_json::parse(e.value, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return e.value;
  return parsed;
}

}  // namespace

std::string DescribeConfig(const Config& config) {
  std::string out = config.file.empty()
                        ? std::string("# no config file: defaults and environment only\n")
                        : fmt::format("# config file: {}\n", EscapeText(config.file));
  size_t width = 0;
  for (const ConfigEntry& e : config.entries)
    width = std::max(width, ValueColumn(e).size());
  for (const ConfigEntry& e : config.entries) {
    out += fmt::format("{:<{}}  ({})\n", ValueColumn(e), width, EscapeText(e.origin));
  }
  for (const std::string& k : config.engine_keys)
    out += "engine key: " + EscapeText(k) + "\n";
  for (const std::string& w : config.warnings)
    out += "warning: " + EscapeText(w) + "\n";
  return out;
}

std::string DescribeConfigJson(const Config& config) {
  nlohmann::ordered_json values = nlohmann::ordered_json::object();
  for (const ConfigEntry& e : config.entries) {
    nlohmann::ordered_json entry = {{"value", TypedValue(e)}, {"source", e.origin}};
    if (!e.env_var.empty()) entry["env"] = e.env_var;
    if (!e.human.empty()) entry["human"] = e.human;
    values[e.key] = std::move(entry);
  }
  const nlohmann::ordered_json out = {
      {"file",
       config.file.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(config.file)},
      {"values", std::move(values)},
      {"engine_keys", config.engine_keys},
      {"warnings", config.warnings},
  };
  // Invalid UTF-8 (a path or a value is bytes) becomes U+FFFD instead of throwing: the output
  // is always valid JSON (docs/configuration.md, "JSON output and escaping").
  return out.dump(-1, ' ', /*ensure_ascii=*/false,
                  nlohmann::ordered_json::error_handler_t::replace) +
         "\n";
}

}  // namespace kvport
