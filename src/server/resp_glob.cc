// SPDX-License-Identifier: Apache-2.0
// The glob automaton of resp_glob.h: a state per pattern token, a text byte moving every state
// at once (shift-and), so a match never revisits a byte of the text.
#include "server/resp_glob.h"

#include <algorithm>
#include <bitset>

namespace kvport::server {

namespace {

struct Token {
  bool star = false;
  std::bitset<256> bytes;  // what a non-star token takes
};

std::vector<Token> Tokens(std::string_view p) {
  std::vector<Token> tokens;
  auto byte = [](char ch) { return static_cast<unsigned char>(ch); };
  for (size_t i = 0; i < p.size();) {
    Token t;
    if (p[i] == '*') {
      ++i;
      if (!tokens.empty() && tokens.back().star) continue;  // "**" is "*"
      t.star = true;
    } else if (p[i] == '?') {
      t.bytes.set();
      ++i;
    } else if (p[i] == '[') {
      size_t j = i + 1;
      const bool negate = j < p.size() && p[j] == '^';
      if (negate) ++j;
      while (j < p.size() && p[j] != ']') {
        if (p[j] == '\\' && j + 1 < p.size()) {
          t.bytes.set(byte(p[j + 1]));
          j += 2;
        } else if (j + 2 < p.size() && p[j + 1] == '-' && p[j + 2] != ']') {
          const unsigned lo = std::min(byte(p[j]), byte(p[j + 2]));
          const unsigned hi = std::max(byte(p[j]), byte(p[j + 2]));
          for (unsigned b = lo; b <= hi; ++b)
            t.bytes.set(b);
          j += 3;
        } else {
          t.bytes.set(byte(p[j]));
          ++j;
        }
      }
      if (negate) t.bytes.flip();
      i = j < p.size() ? j + 1 : j;
    } else if (p[i] == '\\' && i + 1 < p.size()) {
      t.bytes.set(byte(p[i + 1]));
      i += 2;
    } else {
      t.bytes.set(byte(p[i]));
      ++i;
    }
    tokens.push_back(t);
  }
  return tokens;
}

}  // namespace

RespGlob::RespGlob(std::string_view pattern) : pattern_(pattern) {
  literal_ = pattern.find_first_of("*?[\\") == std::string_view::npos;
  if (literal_) return;
  const std::vector<Token> tokens = Tokens(pattern);
  accept_ = tokens.size();
  words_ = (tokens.size() + 1 + 63) / 64;
  by_byte_.assign(256 * words_, 0);
  star_.assign(words_, 0);
  for (size_t s = 0; s < tokens.size(); ++s) {
    const uint64_t bit = uint64_t{1} << (s % 64);
    if (tokens[s].star) {
      star_[s / 64] |= bit;
      continue;
    }
    for (size_t b = 0; b < 256; ++b) {
      if (tokens[s].bytes.test(b)) by_byte_[b * words_ + s / 64] |= bit;
    }
  }
}

bool RespGlob::Match(std::string_view text, uint64_t* steps) const {
  if (literal_) {
    if (steps != nullptr) *steps += text.size();
    return text == pattern_;
  }
  // A star state stays on (it takes any byte) and turns on the state after it (it takes none).
  auto close_stars = [this](std::vector<uint64_t>& s) {
    uint64_t carry = 0;
    for (size_t w = 0; w < words_; ++w) {
      const uint64_t stars = s[w] & star_[w];
      const uint64_t next_carry = stars >> 63;
      s[w] |= (stars << 1) | carry;
      carry = next_carry;
    }
  };
  std::vector<uint64_t> state(words_, 0), next(words_, 0);
  state[0] = 1;
  close_stars(state);
  for (char ch : text) {
    const uint64_t* takes = &by_byte_[static_cast<unsigned char>(ch) * words_];
    uint64_t carry = 0;
    bool any = false;
    for (size_t w = 0; w < words_; ++w) {
      const uint64_t moved = state[w] & takes[w];
      next[w] = (moved << 1) | carry | (state[w] & star_[w]);
      carry = moved >> 63;
      any |= next[w] != 0;
    }
    if (steps != nullptr) *steps += words_;
    if (!any) return false;  // no state left: nothing later can match
    close_stars(next);
    state.swap(next);
  }
  return (state[accept_ / 64] >> (accept_ % 64)) & 1;
}

bool RespGlobMatch(std::string_view pattern, std::string_view text) {
  return RespGlob(pattern).Match(text);
}

}  // namespace kvport::server
