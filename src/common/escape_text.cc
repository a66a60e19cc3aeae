// SPDX-License-Identifier: Apache-2.0
#include "common/escape_text.h"

#include <fmt/core.h>

#include <cstdint>

namespace kvport {
namespace {

// The length of the well-formed UTF-8 sequence at the start of `s` and its code point, or 0
// when `s` does not start with one (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
size_t DecodeUtf8(std::string_view s, char32_t* code_point) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  size_t length = 0;
  char32_t cp = 0;
  unsigned char min_b1 = 0x80, max_b1 = 0xBF;  // the second byte's range, narrowed below
  if (b0 < 0x80) {
    *code_point = b0;
    return 1;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) min_b1 = 0xA0;  // overlong
    if (b0 == 0xED) max_b1 = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    cp = b0 & 0x07;
    if (b0 == 0xF0) min_b1 = 0x90;  // overlong
    if (b0 == 0xF4) max_b1 = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong lead bytes) or F5..FF
  }
  if (s.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    const unsigned char b = byte(i);
    const unsigned char lo = i == 1 ? min_b1 : 0x80;
    const unsigned char hi = i == 1 ? max_b1 : 0xBF;
    if (b < lo || b > hi) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  *code_point = cp;
  return length;
}

// Code points that are valid UTF-8 but must not reach a terminal as they are.
bool IsInvisibleControl(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || cp == 0x200E ||
         cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string EscapeText(std::string_view text, char quote) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const char c = text.front();
    if (c == '\\' || (quote != '\0' && c == quote)) {
      out += '\\';
      out += c;
      text.remove_prefix(1);
      continue;
    }
    char32_t cp = 0;
    const size_t length = DecodeUtf8(text, &cp);
    if (length == 0 || cp < 0x20 || cp == 0x7F) {
      switch (c) {
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          out += fmt::format("\\x{:02x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
      }
      text.remove_prefix(1);
      continue;
    }
    if (IsInvisibleControl(cp)) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
    } else {
      out.append(text.substr(0, length));
    }
    text.remove_prefix(length);
  }
  return out;
}

}  // namespace kvport
