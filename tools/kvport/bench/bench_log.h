// SPDX-License-Identifier: Apache-2.0
// BenchLog: the progress notes of a `kvport bench` run, for the person waiting.
#pragma once

#include <functional>
#include <string_view>

namespace kvport::bench {

// Progress notes ("starting redis-server ...") for the person waiting; may be empty.
using BenchLog = std::function<void(std::string_view)>;

// Passes `text` to `log`, when there is one.
inline void Note(const BenchLog& log, std::string_view text) {
  if (log) log(text);
}

}  // namespace kvport::bench
