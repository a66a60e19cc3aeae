// SPDX-License-Identifier: Apache-2.0
// Text from outside (a node's namespace and counter names, a config file's values) made safe to
// print on a terminal or into a line-oriented log: it can neither end a line, move the cursor,
// reorder what follows it, nor be cut short by a NUL. JSON output does not use this: it goes
// through nlohmann-json (see docs/configuration.md, "JSON output and escaping").
#pragma once

#include <string>
#include <string_view>

namespace kvport {

// `text` with every byte that is not printable, valid UTF-8 escaped, so that distinct inputs
// stay distinct and the result is one line of valid UTF-8:
//   - '\' becomes "\\", and `quote` (when not '\0') becomes '\' + quote;
//   - newline, carriage return and tab become "\n", "\r", "\t";
//   - any other C0 control byte, DEL, and every byte that is not part of a well-formed UTF-8
//     sequence (stray continuation bytes, truncated, overlong or surrogate sequences, code
//     points above U+10FFFF) become "\xNN", one per byte (so NUL is "\x00");
//   - C1 controls (U+0080..U+009F), the line and paragraph separators (U+2028, U+2029) and the
//     bidirectional formatting characters (U+200E, U+200F, U+202A..U+202E, U+2066..U+2069)
//     become "\uXXXX".
// Everything else, printable ASCII and the rest of Unicode, passes through unchanged.
std::string EscapeText(std::string_view text, char quote = '\0');

}  // namespace kvport
