// SPDX-License-Identifier: Apache-2.0
// The HTTP/1.1 messages the operations endpoint speaks (RFC 9112), as a pure codec: a request
// head found and parsed from the bytes a connection has received, and a response written out.
// No I/O, no allocation while parsing (a parsed head is views into the caller's bytes), so every
// hostile head is tested directly (tests/http/http_message_test.cc).
//
// The endpoint serves three small pages to GET, so it reads a request head and nothing else:
// a head is bounded (kMaxRequestHeadBytes), and a request that announces a body
// (Content-Length other than 0, or any Transfer-Encoding) is refused, never read. Refusals carry
// the status to answer; the connection is closed after it, since the peer's next bytes cannot
// be trusted to start a request.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvport::http {

// The largest request head (request line, headers and the empty line) read; larger is a 431.
// Real probes and scrapers send a few hundred bytes; a bearer token fits many times over.
inline constexpr size_t kMaxRequestHeadBytes = 8 * 1024;

// Where the head that starts `bytes` ends: its length including the empty line that ends it
// (CRLF or a bare LF, RFC 9112 section 2.2), or 0 when that line has not arrived. `scanned`
// carries what an earlier call on a prefix of the same bytes already searched (0 at first), so
// that a head arriving one byte at a time is searched once, not once per byte.
size_t FindRequestHeadEnd(std::string_view bytes, size_t* scanned);

struct RequestHead {
  std::string_view method;         // "GET", case-sensitive as in RFC 9110
  std::string_view path;           // "/metrics": the target without its query
  int minor_version = 1;           // HTTP/1.<minor_version>
  bool keep_alive = true;          // the connection may carry another request after this one
  std::string_view authorization;  // the Authorization header's value; "" when none
};

struct HeadParse {
  bool ok = false;
  RequestHead head;         // when ok
  int status = 0;           // when not ok: 400, 413 or 505
  std::string_view reason;  // when not ok: why, for the response body (a static string)
};

// Parses a whole head as FindRequestHeadEnd delimited it (its empty line included). Accepts the
// origin form ("/path?query") and the absolute form ("http://host/path") of the target.
HeadParse ParseRequestHead(std::string_view head);

// The token of an "Authorization: Bearer <token>" value (the scheme matched case-insensitively);
// "" for any other value.
std::string_view BearerToken(std::string_view authorization);

struct HttpResponse {
  int status = 200;
  std::string content_type;  // "" for none (then the body should be empty)
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beside the ones written for it
};

// The response's bytes: status line, Content-Type, Content-Length, Connection (keep-alive or
// close), `headers`, the empty line and, unless `head_only` (a HEAD request), the body.
std::string SerializeResponse(const HttpResponse& response, bool keep_alive, bool head_only);

// A plain-text response ("<reason>\n") with `status`, for refusals.
HttpResponse TextResponse(int status, std::string_view reason);

}  // namespace kvport::http
