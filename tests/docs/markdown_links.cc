// SPDX-License-Identifier: Apache-2.0
#include "markdown_links.h"

#include <cctype>
#include <fstream>
#include <string_view>

namespace kvport::docs {
namespace {

// Drops `code spans`: a run of N backticks up to the next run of exactly N backticks.
std::string WithoutCodeSpans(const std::string& line) {
  std::string out;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] != '`') {
      out += line[i++];
      continue;
    }
    size_t run = 0;
    while (i + run < line.size() && line[i + run] == '`')
      ++run;
    const std::string fence(run, '`');
    size_t close = line.find(fence, i + run);
    // The closing run must be exactly `run` long.
    while (close != std::string::npos && close + run < line.size() && line[close + run] == '`') {
      close = line.find(fence, close + run + 1);
    }
    if (close == std::string::npos) {  // unmatched backticks are literal text
      out.append(line, i, run);
      i += run;
    } else {
      i = close + run;
    }
  }
  return out;
}

// The target of an inline link whose "(" is at `open`; empty if malformed.
std::string InlineTarget(const std::string& line, size_t open) {
  size_t i = open + 1;
  while (i < line.size() && line[i] == ' ')
    ++i;
  if (i < line.size() && line[i] == '<') {
    const size_t close = line.find('>', i + 1);
    return close == std::string::npos ? "" : line.substr(i + 1, close - i - 1);
  }
  int depth = 0;
  std::string target;
  for (; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t') break;
    if (c == '(') ++depth;
    if (c == ')' && depth-- == 0) break;
    target += c;
  }
  return target;
}

bool HasScheme(std::string_view target) {
  size_t i = 0;
  while (i < target.size() && (std::isalnum(static_cast<unsigned char>(target[i])) ||
                               target[i] == '+' || target[i] == '-' || target[i] == '.')) {
    ++i;
  }
  return i > 0 && i < target.size() && target[i] == ':' &&
         std::isalpha(static_cast<unsigned char>(target[0]));
}

std::string PercentDecoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Empty when `target` is not a relative file link; otherwise the path it names.
std::string LinkedPath(std::string_view target) {
  if (target.empty() || target.front() == '#' || HasScheme(target)) return "";
  const size_t cut = target.find_first_of("#?");
  return PercentDecoded(target.substr(0, cut));
}

}  // namespace

std::vector<BrokenLink> FindBrokenLinks(const std::filesystem::path& markdown_file,
                                        const std::filesystem::path& repo_root) {
  std::vector<BrokenLink> broken;
  std::ifstream in(markdown_file);
  if (!in) {
    broken.push_back({markdown_file, 0, "(file cannot be read)"});
    return broken;
  }
  std::vector<std::pair<int, std::string>> targets;
  std::string raw;
  int line_no = 0;
  char fence = 0;  // '`' or '~' inside a fenced code block
  while (std::getline(in, raw)) {
    ++line_no;
    const size_t first = raw.find_first_not_of(" \t");
    const std::string_view trimmed =
        first == std::string::npos ? std::string_view() : std::string_view(raw).substr(first);
    if (trimmed.starts_with("```") || trimmed.starts_with("~~~")) {
      if (fence == 0) {
        fence = trimmed[0];
      } else if (trimmed[0] == fence) {
        fence = 0;
      }
      continue;
    }
    if (fence != 0) continue;
    const std::string line = WithoutCodeSpans(raw);
    // Reference definition: [label]: target (footnotes [^1]: are text, not links).
    const size_t label_end = line.find("]:");
    if (first != std::string::npos && line[first] == '[' && label_end != std::string::npos &&
        (first + 1 >= line.size() || line[first + 1] != '^')) {
      size_t t = label_end + 2;
      while (t < line.size() && line[t] == ' ')
        ++t;
      const size_t end = line.find_first_of(" \t", t);
      std::string target = line.substr(t, end == std::string::npos ? end : end - t);
      if (target.size() >= 2 && target.front() == '<' && target.back() == '>') {
        target = target.substr(1, target.size() - 2);
      }
      targets.emplace_back(line_no, target);
      continue;
    }
    for (size_t i = line.find("]("); i != std::string::npos; i = line.find("](", i + 2)) {
      targets.emplace_back(line_no, InlineTarget(line, i + 1));
    }
  }
  const std::filesystem::path dir = markdown_file.parent_path();
  for (const auto& [line, target] : targets) {
    const std::string path = LinkedPath(target);
    if (path.empty()) continue;
    const std::filesystem::path resolved =
        path.front() == '/' ? repo_root / path.substr(1) : dir / path;
    std::error_code ec;
    if (!std::filesystem::exists(resolved, ec)) broken.push_back({markdown_file, line, target});
  }
  return broken;
}

}  // namespace kvport::docs
