// SPDX-License-Identifier: Apache-2.0
// The endpoint's HTTP/1.1 codec on its own: where a head ends (however its bytes arrive), what
// a head says, every malformed or hostile head refused with its status, and responses.
#include "http/http_message.h"

#include <gtest/gtest.h>

#include <string>

namespace kvport::http {
namespace {

size_t EndOf(std::string_view bytes) {
  size_t scanned = 0;
  return FindRequestHeadEnd(bytes, &scanned);
}

TEST(HttpMessage, AHeadEndsAtItsFirstEmptyLine) {
  EXPECT_EQ(EndOf("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 27u);
  EXPECT_EQ(EndOf("GET / HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\n\r\n"), 18u);  // pipelined
  EXPECT_EQ(EndOf("GET / HTTP/1.1\nHost: a\n\n"), 24u);                    // bare LFs
  EXPECT_EQ(EndOf("GET / HTTP/1.1\r\nHost: a\r\n"), 0u);
  EXPECT_EQ(EndOf("GET / HTTP/1.1\r\nHost: a\r\n\r"), 0u);
  EXPECT_EQ(EndOf(""), 0u);
  EXPECT_EQ(EndOf("\r\n"), 2u);  // an empty request line: a head that ParseRequestHead refuses
}

TEST(HttpMessage, AHeadArrivingByteByByteIsFoundAndSearchedOnce) {
  const std::string head = "GET /health HTTP/1.1\r\nHost: node\r\nAccept: */*\r\n\r\n";
  std::string received;
  size_t scanned = 0;
  size_t end = 0;
  for (char c : head + "GET") {
    received += c;
    const size_t before = scanned;
    end = FindRequestHeadEnd(received, &scanned);
    if (end != 0) break;
    EXPECT_EQ(scanned, received.size());
    EXPECT_LE(before, scanned);
  }
  EXPECT_EQ(end, head.size());
}

TEST(HttpMessage, ParsesARequest) {
  const HeadParse p = ParseRequestHead(
      "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAuthorization:  Bearer s3cret \r\n"
      "Connection: keep-alive\r\n\r\n");
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_EQ(p.head.method, "GET");
  EXPECT_EQ(p.head.path, "/metrics");
  EXPECT_EQ(p.head.minor_version, 1);
  EXPECT_TRUE(p.head.keep_alive);
  EXPECT_EQ(p.head.authorization, "Bearer s3cret");
  EXPECT_EQ(BearerToken(p.head.authorization), "s3cret");
}

TEST(HttpMessage, KeepAliveFollowsTheVersionAndTheConnectionHeader) {
  EXPECT_TRUE(ParseRequestHead("GET / HTTP/1.1\r\n\r\n").head.keep_alive);
  EXPECT_FALSE(ParseRequestHead("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n").head.keep_alive);
  EXPECT_FALSE(
      ParseRequestHead("GET / HTTP/1.1\r\nconnection: upgrade, close\r\n\r\n").head.keep_alive);
  EXPECT_FALSE(ParseRequestHead("GET / HTTP/1.0\r\n\r\n").head.keep_alive);
  EXPECT_TRUE(ParseRequestHead("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").head.keep_alive);
}

TEST(HttpMessage, TargetsInAbsoluteFormHaveTheirPath) {
  EXPECT_EQ(ParseRequestHead("GET http://node:9470/stats HTTP/1.1\r\n\r\n").head.path, "/stats");
  EXPECT_EQ(ParseRequestHead("GET HTTP://node HTTP/1.1\r\n\r\n").head.path, "/");
  EXPECT_EQ(ParseRequestHead("GET /health#frag HTTP/1.1\r\n\r\n").head.path, "/health");
}

TEST(HttpMessage, ABodyIsNeverAccepted) {
  EXPECT_EQ(ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n").status, 413);
  EXPECT_EQ(ParseRequestHead("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").status, 413);
  EXPECT_EQ(
      ParseRequestHead("GET / HTTP/1.1\r\ncontent-length: 99999999999999999999999\r\n\r\n").status,
      413);
  EXPECT_EQ(ParseRequestHead("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n").status, 400);
  EXPECT_EQ(ParseRequestHead("GET / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n").status, 400);
  EXPECT_TRUE(ParseRequestHead("GET / HTTP/1.1\r\nContent-Length: 000\r\n\r\n").ok);
}

TEST(HttpMessage, MalformedHeadsAreRefused) {
  struct Case {
    const char* head;
    int status;
  };
  const Case cases[] = {
      {"\r\n", 400},                                       // empty request line
      {"GET\r\n\r\n", 400},                                // no target
      {"GET /\r\n\r\n", 400},                              // no version
      {"GET  / HTTP/1.1\r\n\r\n", 400},                    // empty target
      {"GET / HTTP/1.1 x\r\n\r\n", 400},                   // junk after the version
      {"G(T / HTTP/1.1\r\n\r\n", 400},                     // not a token
      {"GET /a\x01 HTTP/1.1\r\n\r\n", 400},                // control in the target
      {"GET /\xff HTTP/1.1\r\n\r\n", 400},                 // not ASCII
      {"GET * HTTP/1.1\r\n\r\n", 400},                     // asterisk form
      {"GET ftp://x/ HTTP/1.1\r\n\r\n", 400},              // another scheme
      {"GET / HTTP/1.1\r\n\r\n", 0},                       // (fine)
      {"GET / HTTP/2.0\r\n\r\n", 505},                     // another major version
      {"GET / HTTP/1.10\r\n\r\n", 400},                    // not one digit
      {"GET / http/1.1\r\n\r\n", 400},                     // case matters
      {"GET / HTTP/1.1\r\nNo colon\r\n\r\n", 400},         // header without a colon
      {"GET / HTTP/1.1\r\n: empty name\r\n\r\n", 400},     // empty name
      {"GET / HTTP/1.1\r\nName : space\r\n\r\n", 400},     // space before the colon
      {"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400},  // obsolete line folding
      {"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", 400},          // bare CR in a value
      {"GET / HTTP/1.1\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: a\r\n", 400},  // unterminated (not what FindRequestHeadEnd cuts)
  };
  for (const Case& c : cases) {
    const HeadParse p = ParseRequestHead(c.head);
    EXPECT_EQ(p.ok, c.status == 0) << c.head;
    EXPECT_EQ(p.status, c.status) << c.head;
    if (!p.ok) {
      EXPECT_FALSE(p.reason.empty()) << c.head;
    }
  }
  // NUL in a value (a C string literal would end there).
  const std::string nul = std::string("GET / HTTP/1.1\r\nA: b") + '\0' + "c\r\n\r\n";
  EXPECT_EQ(ParseRequestHead(nul).status, 400);
}

TEST(HttpMessage, EveryPrefixAndEveryByteFlipOfAHeadIsSafe) {
  // Not a fuzzer, but every truncation and every single-byte corruption of a real head must
  // parse or be refused with a status, never crash or read outside the bytes (ASan checks).
  const std::string head =
      "GET http://h:1/metrics?a HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer t\r\n"
      "Connection: close\r\nContent-Length: 0\r\n\r\n";
  for (size_t n = 0; n <= head.size(); ++n) {
    const HeadParse p = ParseRequestHead(std::string_view(head).substr(0, n));
    EXPECT_TRUE(p.ok || p.status >= 400) << n;
  }
  for (size_t i = 0; i < head.size(); ++i) {
    for (int value : {0, int{'\r'}, int{'\n'}, int{' '}, int{':'}, 0x7f, 0xff}) {
      std::string bad = head;
      bad[i] = static_cast<char>(value);
      size_t scanned = 0;
      const size_t end = FindRequestHeadEnd(bad, &scanned);
      if (end == 0) continue;
      const HeadParse p = ParseRequestHead(std::string_view(bad).substr(0, end));
      EXPECT_TRUE(p.ok || p.status >= 400) << i;
    }
  }
}

TEST(HttpMessage, BearerTokens) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bEARER abc"), "abc");
  EXPECT_EQ(BearerToken("Bearer "), "");
  EXPECT_EQ(BearerToken("Basic abc"), "");
  EXPECT_EQ(BearerToken(""), "");
}

TEST(HttpMessage, ResponsesCarryLengthAndConnection) {
  HttpResponse r;
  r.status = 401;
  r.content_type = "application/json";
  r.body = "{}\n";
  r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"kvport\"");
  EXPECT_EQ(SerializeResponse(r, true, false),
            "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 3\r\n"
            "Connection: keep-alive\r\nWWW-Authenticate: Bearer realm=\"kvport\"\r\n\r\n{}\n");
  // HEAD: the same head, no body.
  EXPECT_EQ(SerializeResponse(TextResponse(404, "no"), false, true),
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
            "Connection: close\r\n\r\n");
}

}  // namespace
}  // namespace kvport::http
