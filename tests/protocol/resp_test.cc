// SPDX-License-Identifier: Apache-2.0
// The RESP codec (protocol/resp.h): the command parser's caps and its byte-by-byte arrival,
// and the reply encoder in RESP2 and RESP3.
#include "protocol/resp.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace kvport::protocol {
namespace {

struct Parsed {
  RespParse result;
  std::vector<std::string> args;
  size_t consumed = 0;
  size_t needed = 0;
  std::string error;
};

Parsed Parse(std::string_view input, const RespLimits& limits = RespLimits{}) {
  Parsed p;
  std::vector<std::string_view> views;
  p.result = ParseRespCommand(input, limits, &views, &p.consumed, &p.needed, &p.error);
  for (std::string_view v : views)
    p.args.emplace_back(v);
  return p;
}

TEST(RespParserTest, ArrayOfBulkStrings) {
  const std::string input = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\na\r\nb!\r\n*1\r\n";
  Parsed p = Parse(input);
  ASSERT_EQ(p.result, RespParse::kComplete) << p.error;
  EXPECT_EQ(p.args, (std::vector<std::string>{"SET", "k", "a\r\nb!"}));
  EXPECT_EQ(p.consumed, input.size() - 4);
}

TEST(RespParserTest, InlineCommands) {
  Parsed p = Parse("  GET\t key  \r\nrest");
  ASSERT_EQ(p.result, RespParse::kComplete);
  EXPECT_EQ(p.args, (std::vector<std::string>{"GET", "key"}));
  EXPECT_EQ(p.consumed, 14u);
  p = Parse("PING\n");
  EXPECT_EQ(p.args, (std::vector<std::string>{"PING"}));
  p = Parse("\r\n");  // a blank line: an empty command, skipped by the session
  ASSERT_EQ(p.result, RespParse::kComplete);
  EXPECT_TRUE(p.args.empty());
  EXPECT_EQ(Parse("*0\r\n").result, RespParse::kComplete);
}

TEST(RespParserTest, EveryPrefixIsIncompleteAndNamesWhatItNeeds) {
  const std::string input = "*2\r\n$3\r\nGET\r\n$10\r\n0123456789\r\n";
  for (size_t n = 0; n < input.size(); ++n) {
    Parsed p = Parse(input.substr(0, n));
    ASSERT_EQ(p.result, RespParse::kIncomplete) << n;
    EXPECT_GT(p.needed, n);
    EXPECT_LE(p.needed, input.size());
  }
  // Once the bulk's header is in, the whole command's size is known without its bytes.
  EXPECT_EQ(Parse(input.substr(0, 20)).needed, input.size());
}

// With a RespProgress, a command arriving piece by piece is parsed once: each call goes on
// from where the last stopped and never reads the arguments already parsed again (here they
// are overwritten after being parsed, and the command still comes out as it was sent).
TEST(RespParserTest, ACommandArrivingInPiecesIsParsedFromWhereItStopped) {
  std::vector<std::string> sent{"MSET"};
  for (int i = 0; i < 200; ++i)
    sent.push_back("key" + std::to_string(i));
  std::string input = "*" + std::to_string(sent.size()) + "\r\n";
  for (const std::string& a : sent)
    input += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  RespProgress progress;
  std::vector<std::string_view> views;
  size_t consumed = 0;
  size_t needed = 0;
  std::string error;
  std::string buffer;
  size_t parsed_through = 0;  // bytes a call has seen whole arguments in
  for (size_t n = 0; n < input.size(); ++n) {
    buffer.push_back(input[n]);
    // What the parser has read past already may be anything now: it must not look back.
    if (progress.pos > parsed_through) {
      for (size_t i = 0; i < progress.pos; ++i)
        if (buffer[i] != '\r' && buffer[i] != '\n' && buffer[i] != '$' && buffer[i] != '*')
          buffer[i] = '?';
      parsed_through = progress.pos;
    }
    const RespParse r = ParseRespCommand(buffer, RespLimits{}, &views, &consumed, &needed, &error,
                                         nullptr, &progress);
    ASSERT_NE(r, RespParse::kError) << error;
    if (n + 1 < input.size()) {
      ASSERT_EQ(r, RespParse::kIncomplete) << n;
      continue;
    }
    ASSERT_EQ(r, RespParse::kComplete);
    EXPECT_EQ(consumed, input.size());
    ASSERT_EQ(views.size(), sent.size());
    EXPECT_EQ(views.back(), "key199");
    EXPECT_NE(views[1], "key0") << "parsed again from its first byte";
  }
}

TEST(RespParserTest, AnIncompleteBulkSaysWhereItIsAndTheRestParsesApart) {
  const std::string input =
      "*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n"
      "$2\r\nEX\r\n$2\r\n10\r\n";
  const size_t value_at = input.find("0123");
  std::vector<std::string_view> args;
  size_t consumed = 0, needed = 0;
  std::string error;
  RespPartialBulk partial;
  // Stopped inside the value: the arguments before it, where it starts, its length.
  ASSERT_EQ(ParseRespCommand(std::string_view(input).substr(0, value_at + 4), RespLimits{}, &args,
                             &consumed, &needed, &error, &partial),
            RespParse::kIncomplete);
  EXPECT_EQ(args, (std::vector<std::string_view>{"SET", "k"}));
  EXPECT_EQ(partial.index, 2u);
  EXPECT_EQ(partial.data_pos, value_at);
  EXPECT_EQ(partial.length, 10u);
  EXPECT_EQ(partial.arg_count, 5u);
  // Stopped before a bulk's bytes: no partial.
  RespPartialBulk untouched;
  untouched.length = 99;
  ASSERT_EQ(ParseRespCommand(std::string_view(input).substr(0, value_at - 2), RespLimits{}, &args,
                             &consumed, &needed, &error, &untouched),
            RespParse::kIncomplete);
  EXPECT_EQ(untouched.length, 99u);
  // The arguments after the value, on their own (after its CRLF).
  const std::string_view tail = std::string_view(input).substr(value_at + 12);
  args.clear();
  ASSERT_EQ(ParseRespBulks(tail, 2, value_at + 12, RespLimits{}, &args, &consumed, &needed, &error),
            RespParse::kComplete)
      << error;
  EXPECT_EQ(args, (std::vector<std::string_view>{"EX", "10"}));
  EXPECT_EQ(consumed, tail.size());
  args.clear();
  EXPECT_EQ(
      ParseRespBulks(tail.substr(0, 5), 2, 0, RespLimits{}, &args, &consumed, &needed, &error),
      RespParse::kIncomplete);
  // The command's bytes before the tail count against max_command_bytes.
  RespLimits small;
  small.max_command_bytes = value_at + 12 + 8;
  args.clear();
  EXPECT_EQ(ParseRespBulks(tail, 2, value_at + 12, small, &args, &consumed, &needed, &error),
            RespParse::kError);
  EXPECT_NE(error.find("max_command_bytes"), std::string::npos) << error;
}

TEST(RespParserTest, AnnouncedLengthsAreCheckedBeforeUse) {
  RespLimits limits;
  limits.max_bulk_bytes = 1 << 20;
  Parsed p = Parse("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1099511627776\r\n", limits);
  ASSERT_EQ(p.result, RespParse::kError);
  EXPECT_NE(p.error.find("1099511627776"), std::string::npos) << p.error;
  EXPECT_NE(p.error.find("max_value_bytes (1048576)"), std::string::npos) << p.error;
  p = Parse("*1\r\n$99999999999999999999\r\n");
  EXPECT_EQ(p.result, RespParse::kError);
  p = Parse("*1\r\n$-1\r\n");
  EXPECT_EQ(p.error, "Protocol error: invalid bulk length");
  limits.max_args = 4;
  p = Parse("*5\r\n", limits);
  ASSERT_EQ(p.result, RespParse::kError);
  EXPECT_NE(p.error.find("at most 4"), std::string::npos) << p.error;
  p = Parse("*1048576000000\r\n");
  EXPECT_EQ(p.result, RespParse::kError);
  limits = RespLimits{};
  limits.max_command_bytes = 32;
  p = Parse("*2\r\n$3\r\nSET\r\n$20\r\n", limits);
  ASSERT_EQ(p.result, RespParse::kError);
  EXPECT_NE(p.error.find("max_command_bytes"), std::string::npos);
}

TEST(RespParserTest, MalformedInput) {
  EXPECT_EQ(Parse("*1\r\n*1\r\n$1\r\nx\r\n").error, "Protocol error: expected '$', got '*'");
  EXPECT_EQ(Parse("*1\r\n:1\r\n").error, "Protocol error: expected '$', got ':'");
  EXPECT_EQ(Parse("*x\r\n").error, "Protocol error: invalid multibulk length");
  EXPECT_EQ(Parse("*1\r\n$1\r\nxy\r\n").error,
            "Protocol error: a bulk string not followed by CRLF");
  // A header line that never ends is an error once it is longer than any number.
  EXPECT_EQ(Parse("*" + std::string(40, '1')).result, RespParse::kError);
  RespLimits limits;
  limits.max_inline_bytes = 16;
  EXPECT_EQ(Parse(std::string(17, 'a'), limits).result, RespParse::kError);
  EXPECT_EQ(Parse(std::string(16, 'a'), limits).result, RespParse::kIncomplete);
}

TEST(RespWriterTest, Resp2) {
  std::string out;
  RespWriter w(&out, 2);
  w.Simple("OK");
  w.Error("ERR bad\r\nline");
  w.Integer(-3);
  w.Bulk(std::string_view("a\0b", 3));
  w.Null();
  w.NullArray();
  w.Array(2);
  w.Map(2);
  w.Set(1);
  w.Boolean(true);
  w.Verbatim("txt", "hi");
  EXPECT_EQ(out, std::string("+OK\r\n-ERR bad  line\r\n:-3\r\n$3\r\na\0b\r\n$-1\r\n*-1\r\n*2\r\n"
                             "*4\r\n*1\r\n:1\r\n$2\r\nhi\r\n",
                             69));
}

TEST(RespWriterTest, Resp3) {
  std::string out;
  RespWriter w(&out, 3);
  w.Null();
  w.NullArray();
  w.Map(2);
  w.Set(1);
  w.Boolean(false);
  w.Verbatim("txt", "hi");
  EXPECT_EQ(out, "_\r\n_\r\n%2\r\n~1\r\n#f\r\n=6\r\ntxt:hi\r\n");
}

}  // namespace
}  // namespace kvport::protocol
