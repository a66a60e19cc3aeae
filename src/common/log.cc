// SPDX-License-Identifier: Apache-2.0
#include "kvport/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>

namespace kvport::log {
namespace {

std::atomic<Level> g_level{Level::kInfo};

spdlog::logger& Logger() {
  // stderr, no colors: the CLI's stdout is for results (and --json), logs never mix in.
  static auto logger = [] {
    auto l = std::make_shared<spdlog::logger>("kvport",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
    l->set_level(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

spdlog::level::level_enum ToSpd(Level level) {
  switch (level) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
    case Level::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

void SetLevel(Level level) {
  g_level.store(level, std::memory_order_relaxed);
}
Level GetLevel() {
  return g_level.load(std::memory_order_relaxed);
}

bool SetLevelByName(std::string_view name) {
  static constexpr std::pair<std::string_view, Level> kNames[] = {{"debug", Level::kDebug},
                                                                  {"info", Level::kInfo},
                                                                  {"warn", Level::kWarn},
                                                                  {"error", Level::kError},
                                                                  {"off", Level::kOff}};
  for (const auto& [n, l] : kNames) {
    if (n == name) {
      SetLevel(l);
      return true;
    }
  }
  return false;
}

void Write(Level level, std::string_view message) {
  Logger().log(ToSpd(level), message);
}

}  // namespace kvport::log
