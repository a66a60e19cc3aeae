// DescribeConfig / DescribeConfigJson: what `kvport config check` prints.
#include <fmt/core.h>

#include <algorithm>

#include "config/config_keys.h"
#include "kvport/config.h"

namespace kvport {

namespace {

std::string ValueColumn(const ConfigEntry& e) {
  std::string text = e.key + ": " + e.value;
  if (!e.human.empty()) text += " = " + e.human;
  return text;
}

}  // namespace

std::string DescribeConfig(const Config& config) {
  std::string out = config.file.empty()
                        ? std::string("# no config file: defaults and environment only\n")
                        : fmt::format("# config file: {}\n", config.file);
  size_t width = 0;
  for (const ConfigEntry& e : config.entries)
    width = std::max(width, ValueColumn(e).size());
  for (const ConfigEntry& e : config.entries) {
    out += fmt::format("{:<{}}  ({})\n", ValueColumn(e), width, e.origin);
  }
  for (const std::string& w : config.warnings)
    out += "warning: " + w + "\n";
  return out;
}

std::string DescribeConfigJson(const Config& config) {
  std::string out = "{\"file\": ";
  out += config.file.empty() ? std::string("null") : JsonQuote(config.file);
  out += ", \"values\": {";
  bool first = true;
  for (const ConfigEntry& e : config.entries) {
    out += first ? "" : ", ";
    first = false;
    out += fmt::format("{}: {{\"value\": {}, \"source\": {}", JsonQuote(e.key), e.value,
                       JsonQuote(e.origin));
    if (!e.env_var.empty()) out += ", \"env\": " + JsonQuote(e.env_var);
    if (!e.human.empty()) out += ", \"human\": " + JsonQuote(e.human);
    out += "}";
  }
  out += "}, \"warnings\": [";
  for (size_t i = 0; i < config.warnings.size(); ++i) {
    out += (i == 0 ? "" : ", ") + JsonQuote(config.warnings[i]);
  }
  out += "]}\n";
  return out;
}

}  // namespace kvport
