// SPDX-License-Identifier: Apache-2.0
// Finds relative links in Markdown files that do not resolve to an existing file, so that the
// README and docs/ never point at a page that was renamed or never written.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kvport::docs {

struct BrokenLink {
  std::filesystem::path file;  // the Markdown file
  int line = 0;                // 1-based
  std::string target;          // the link as written
};

// Every relative link in `markdown_file` (inline [text](target), images, and reference
// definitions [label]: target) whose file does not exist. Links with a scheme (https:, mailto:)
// and same-page anchors (#section) are not checked; a "#fragment" or "?query" suffix is ignored;
// %XX escapes are decoded. A target starting with '/' is resolved against `repo_root`, any other
// against the file's folder. Links inside fenced code blocks and `code spans` are not links.
// A file that cannot be read is reported as one BrokenLink with line 0.
std::vector<BrokenLink> FindBrokenLinks(const std::filesystem::path& markdown_file,
                                        const std::filesystem::path& repo_root);

}  // namespace kvport::docs
