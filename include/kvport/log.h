// SPDX-License-Identifier: Apache-2.0
// Logging for kvport libraries and tools.
//
// A thin front over spdlog so that spdlog's heavy headers stay in one .cc file. Messages are
// formatted with fmt (fmt/core.h is light); a message below the current level costs one
// comparison. Output goes to stderr.
#pragma once

#include <fmt/core.h>

#include <string_view>
#include <utility>

namespace kvport::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void SetLevel(Level level);
Level GetLevel();
// Parses "debug", "info", "warn", "error", "off"; returns false (and leaves the level) otherwise.
bool SetLevelByName(std::string_view name);
void Write(Level level, std::string_view message);

template <typename... Args>
void Debug(fmt::format_string<Args...> f, Args&&... args) {
  if (GetLevel() <= Level::kDebug)
    Write(Level::kDebug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void Info(fmt::format_string<Args...> f, Args&&... args) {
  if (GetLevel() <= Level::kInfo) Write(Level::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void Warn(fmt::format_string<Args...> f, Args&&... args) {
  if (GetLevel() <= Level::kWarn) Write(Level::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void Error(fmt::format_string<Args...> f, Args&&... args) {
  if (GetLevel() <= Level::kError)
    Write(Level::kError, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace kvport::log
