// SPDX-License-Identifier: Apache-2.0
// Logging for kvport libraries and tools.
//
// A thin front over spdlog so that spdlog's heavy headers stay in one .cc file. Messages are
// formatted with fmt (fmt/core.h is light); a message below the current level costs one
// comparison. Output goes to stderr.
#pragma once

#include <fmt/core.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvport/export.h"

namespace kvport::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

KVPORT_API void SetLevel(Level level);
KVPORT_API Level GetLevel();
// Parses "debug", "info", "warn", "error", "off"; returns false (and leaves the level) otherwise.
KVPORT_API bool SetLevelByName(std::string_view name);
KVPORT_API void Write(Level level, std::string_view message);

// How lines are written: kText "2025-01-01T12:00:00.000 info message" (the default), or kJson
// one object per line: {"time":"2025-01-01T12:00:00.000Z","level":"info","msg":"message"}.
enum class Format { kText = 0, kJson = 1 };
KVPORT_API void SetFormat(Format format);
// Parses "text" or "json"; returns false (and leaves the format) otherwise.
KVPORT_API bool SetFormatByName(std::string_view name);

// Lines kept for a host language's logger instead of written to stderr: the Python module's
// `eic` drop-in hands them to Python's logging, so an engine sees kvport's reasons where it
// sees its own. Capture(max_lines) starts keeping lines, at most max_lines (further lines are
// counted and dropped until the next TakeCaptured); it lasts for the process. TakeCaptured()
// returns the kept lines, oldest first, and how many were dropped. Write only appends under a
// mutex and never calls out, so any thread may log without waiting on the host's interpreter.
struct CapturedLine {
  Level level;
  std::string message;
};
KVPORT_API void Capture(size_t max_lines);
KVPORT_API std::vector<CapturedLine> TakeCaptured(size_t* dropped);

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
