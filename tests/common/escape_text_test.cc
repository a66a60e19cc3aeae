// SPDX-License-Identifier: Apache-2.0
#include "common/escape_text.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace kvport {
namespace {

using namespace std::string_literals;

TEST(EscapeText, PrintableAsciiAndUtf8PassThrough) {
  EXPECT_EQ(EscapeText("plain name-1_x.y"), "plain name-1_x.y");
  EXPECT_EQ(EscapeText("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(EscapeText(""), "");
}

TEST(EscapeText, ControlBytesCannotEndOrRewriteALine) {
  EXPECT_EQ(EscapeText("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(EscapeText("\x1b[2J\x7f\x01"), "\\x1b[2J\\x7f\\x01");
  // A NUL is escaped, not a terminator: what follows it is still there.
  EXPECT_EQ(EscapeText("a\0b"s), "a\\x00b");
}

TEST(EscapeText, InvalidUtf8BecomesOneEscapePerByte) {
  EXPECT_EQ(EscapeText("\xff"), "\\xff");
  EXPECT_EQ(EscapeText("x\x80y"), "x\\x80y");                         // stray continuation byte
  EXPECT_EQ(EscapeText("\xc3"), "\\xc3");                             // truncated sequence
  EXPECT_EQ(EscapeText("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(EscapeText("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");           // overlong, 3 bytes
  EXPECT_EQ(EscapeText("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a UTF-16 surrogate
  EXPECT_EQ(EscapeText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(EscapeText("\xe6\x97\n"), "\\xe6\\x97\\n");               // cut short by a newline
}

TEST(EscapeText, InvisibleFormattingCharactersAreEscaped) {
  EXPECT_EQ(EscapeText("\xc2\x85"), "\\u0085");  // NEL, a C1 control
  EXPECT_EQ(EscapeText("a\xe2\x80\xa8"
                       "b"),
            "a\\u2028b");  // line separator
  EXPECT_EQ(EscapeText("\xe2\x80\xae"
                       "evil"),
            "\\u202eevil");                       // right-to-left override
  EXPECT_EQ(EscapeText("\xc2\xa0"), "\xc2\xa0");  // U+00A0 is printable
}

TEST(EscapeText, BackslashAndTheChosenQuoteAreEscapedSoDistinctInputsStayDistinct) {
  EXPECT_EQ(EscapeText("a\\b"), "a\\\\b");
  EXPECT_EQ(EscapeText("it's"), "it's");
  EXPECT_EQ(EscapeText("it's", '\''), "it\\'s");
  EXPECT_EQ(EscapeText("say \"x\"", '"'), "say \\\"x\\\"");
  // A name that spells an escape is not confused with the byte it spells.
  const std::set<std::string> escaped = {EscapeText("\n"),   EscapeText("\\n"),
                                         EscapeText("\xff"), EscapeText("\\xff"),
                                         EscapeText("\0"s),  EscapeText("\\x00")};
  EXPECT_EQ(escaped.size(), 6u);
  for (const std::string& e : escaped) {
    for (char c : e)
      EXPECT_GE(static_cast<unsigned char>(c), 0x20) << e;
  }
}

}  // namespace
}  // namespace kvport
