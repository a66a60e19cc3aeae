// SPDX-License-Identifier: Apache-2.0
#include "kvport/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <string>

#include "common/thread_annotations.h"

namespace kvport::log {
namespace {

std::atomic<Level> g_level{Level::kInfo};

constexpr const char* kTextPattern = "%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v";
// JSON lines: the message is escaped by Write (JsonEscaped) before it reaches the pattern.
constexpr const char* kJsonPattern = R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","msg":"%v"})";

std::atomic<Format> g_format{Format::kText};

// Capture(): lines kept for TakeCaptured instead of stderr. g_capturing is read without the
// lock on every line; the lines themselves are under it.
std::atomic<bool> g_capturing{false};
struct Captured {
  Mutex mu;
  size_t max_lines GUARDED_BY(mu) = 0;
  size_t dropped GUARDED_BY(mu) = 0;
  std::vector<CapturedLine> lines GUARDED_BY(mu);
};
Captured& CapturedLines() {
  static Captured* const captured = new Captured;  // never destroyed, as the logger
  return *captured;
}

spdlog::logger& Logger() {
  // stderr, no colors: the CLI's stdout is for results (and --json), logs never mix in. Never
  // destroyed: a Server or Client held in a static logs from its destructor after this file's
  // statics would be gone.
  static spdlog::logger* const logger = [] {
    auto* l = new spdlog::logger("kvport", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern(kTextPattern);
    l->set_level(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

// `text` as the inside of a JSON string: quotes, backslashes and control bytes escaped. Bytes
// that are not UTF-8 become \u00XX of the byte, so every line stays valid JSON.
std::string JsonEscaped(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      default:
        break;
    }
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04x}", c);
      continue;
    }
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      continue;
    }
    // A well-formed UTF-8 sequence passes through; any other byte is written as its code.
    const size_t len = c >= 0xf0 && c <= 0xf4  ? 4
                       : c >= 0xe0 && c < 0xf0 ? 3
                       : c >= 0xc2 && c < 0xe0 ? 2
                                               : 0;
    bool valid = len > 0 && i + len <= text.size();
    for (size_t k = 1; valid && k < len; ++k) {
      valid = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    }
    if (valid) {
      out.append(text.substr(i, len));
      i += len - 1;
    } else {
      out += fmt::format("\\u{:04x}", c);
    }
  }
  return out;
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
  if (g_capturing.load(std::memory_order_acquire)) {
    Captured& c = CapturedLines();
    MutexLock lock(c.mu);
    if (c.lines.size() < c.max_lines) {
      c.lines.push_back({level, std::string(message)});
    } else {
      ++c.dropped;
    }
    return;
  }
  if (g_format.load(std::memory_order_relaxed) == Format::kJson) {
    Logger().log(ToSpd(level), JsonEscaped(message));
  } else {
    Logger().log(ToSpd(level), message);
  }
}

void SetFormat(Format format) {
  // The pattern changes under spdlog's own lock; lines already being written keep theirs.
  g_format.store(format, std::memory_order_relaxed);
  Logger().set_pattern(
      format == Format::kJson ? kJsonPattern : kTextPattern,
      format == Format::kJson ? spdlog::pattern_time_type::utc : spdlog::pattern_time_type::local);
}

void Capture(size_t max_lines) {
  Captured& c = CapturedLines();
  {
    MutexLock lock(c.mu);
    c.max_lines = max_lines;
  }
  g_capturing.store(true, std::memory_order_release);
}

std::vector<CapturedLine> TakeCaptured(size_t* dropped) {
  Captured& c = CapturedLines();
  std::vector<CapturedLine> lines;
  MutexLock lock(c.mu);
  lines.swap(c.lines);
  *dropped = c.dropped;
  c.dropped = 0;
  return lines;
}

bool SetFormatByName(std::string_view name) {
  if (name == "text") {
    SetFormat(Format::kText);
  } else if (name == "json") {
    SetFormat(Format::kJson);
  } else {
    return false;
  }
  return true;
}

}  // namespace kvport::log
