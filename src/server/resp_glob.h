// SPDX-License-Identifier: Apache-2.0
// Redis's glob patterns (SCAN MATCH, CONFIG GET) matched in time linear in the text: the pattern
// is compiled once into a bit-parallel automaton, so no pattern can make a match backtrack.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kvport::server {

// A compiled glob: '*' (any run), '?' (any byte), '[...]' (a set, with '^' to negate, ranges
// `a-z` in either order, '\' to escape; an unclosed '[' takes the rest of the pattern), '\x'
// (x itself). Matching costs one step per byte of the text for every 64 states of the pattern
// (a state per '?', set or literal byte; consecutive '*'s are one), whatever the pattern.
class RespGlob {
 public:
  // The longest pattern SCAN accepts (docs/resp.md): a MATCH longer is refused, so a page's cost
  // stays within a small factor of the keys it reads.
  static constexpr size_t kMaxPatternBytes = 1024;

  explicit RespGlob(std::string_view pattern);
  // Whether `text` matches. `steps` (when not null) is increased by the work done: one per
  // text byte and 64 pattern states.
  bool Match(std::string_view text, uint64_t* steps = nullptr) const;

 private:
  size_t words_ = 1;               // 64-bit words per state set: states 0..tokens
  size_t accept_ = 0;              // the state after the last token
  bool literal_ = false;           // no special character: an exact compare
  std::string_view pattern_;       // for literal_ (the caller keeps it alive)
  std::vector<uint64_t> by_byte_;  // [byte * words_ + w]: states whose token takes the byte
  std::vector<uint64_t> star_;     // states whose token is '*'
};

// One match of `pattern` against `text` (compiles the pattern: for one-off matches).
bool RespGlobMatch(std::string_view pattern, std::string_view text);

}  // namespace kvport::server
