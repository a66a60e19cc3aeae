// SPDX-License-Identifier: Apache-2.0
#include "http/http_message.h"

namespace kvport::http {

namespace {

bool IsTokenChar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// A field value's bytes (RFC 9110 section 5.5): visible characters, obs-text, space and tab;
// never CR, LF, NUL or another control character.
bool IsFieldValue(std::string_view text) {
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 ? byte != '\t' : byte == 0x7f) return false;
  }
  return true;
}

// The request target's bytes: visible ASCII only.
bool IsTargetText(std::string_view text) {
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f) return false;
  }
  return true;
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view TrimWhitespace(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  return text;
}

// Takes the next line off `rest` (without its LF and one CR before it); false when no LF is left.
bool NextLine(std::string_view* rest, std::string_view* line) {
  const size_t lf = rest->find('\n');
  if (lf == std::string_view::npos) return false;
  *line = rest->substr(0, lf);
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  rest->remove_prefix(lf + 1);
  return true;
}

HeadParse Refuse(int status, std::string_view reason) {
  HeadParse parse;
  parse.status = status;
  parse.reason = reason;
  return parse;
}

// The path of an origin-form ("/a?b") or absolute-form ("http://host/a?b") target; "" when the
// target has neither form.
std::string_view TargetPath(std::string_view target) {
  if (target.front() != '/') {
    const size_t scheme_end = target.find("://");
    if (scheme_end == std::string_view::npos) return {};
    const std::string_view scheme = target.substr(0, scheme_end);
    if (!EqualsIgnoringCase(scheme, "http") && !EqualsIgnoringCase(scheme, "https")) return {};
    const size_t slash = target.find('/', scheme_end + 3);
    if (slash == std::string_view::npos) return "/";
    target.remove_prefix(slash);
  }
  return target.substr(0, target.find_first_of("?#"));
}

}  // namespace

size_t FindRequestHeadEnd(std::string_view bytes, size_t* scanned) {
  for (size_t i = *scanned; i < bytes.size(); ++i) {
    if (bytes[i] != '\n') continue;
    // The line ending here is empty when it starts at i (or at a CR just before it), right after
    // the previous line's LF or at the very start.
    size_t start = i;
    if (start > 0 && bytes[start - 1] == '\r') --start;
    if (start == 0 || bytes[start - 1] == '\n') return i + 1;
  }
  *scanned = bytes.size();
  return 0;
}

HeadParse ParseRequestHead(std::string_view head) {
  std::string_view rest = head;
  std::string_view line;
  if (!NextLine(&rest, &line) || line.empty()) return Refuse(400, "no request line");

  // request-line = method SP request-target SP HTTP-version
  const size_t first_space = line.find(' ');
  const size_t second_space =
      first_space == std::string_view::npos ? first_space : line.find(' ', first_space + 1);
  if (second_space == std::string_view::npos) return Refuse(400, "malformed request line");
  HeadParse parse;
  RequestHead& request = parse.head;
  request.method = line.substr(0, first_space);
  const std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
  const std::string_view version = line.substr(second_space + 1);
  if (!IsToken(request.method) || target.empty() || !IsTargetText(target)) {
    return Refuse(400, "malformed request line");
  }
  constexpr std::string_view kHttp = "HTTP/";
  if (version.size() != kHttp.size() + 3 || version.substr(0, kHttp.size()) != kHttp ||
      version[kHttp.size() + 1] != '.' || version[kHttp.size()] < '0' ||
      version[kHttp.size()] > '9' || version[kHttp.size() + 2] < '0' ||
      version[kHttp.size() + 2] > '9') {
    return Refuse(400, "malformed HTTP version");
  }
  if (version[kHttp.size()] != '1') return Refuse(505, "only HTTP/1.x is served");
  request.minor_version = version[kHttp.size() + 2] - '0';
  request.path = TargetPath(target);
  if (request.path.empty()) return Refuse(400, "malformed request target");

  bool close = false;
  bool keep_alive = false;
  bool have_authorization = false;
  for (;;) {
    if (!NextLine(&rest, &line)) return Refuse(400, "unterminated request head");
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {
      return Refuse(400, "folded header line (obsolete line folding)");
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      return Refuse(400, "malformed header line");
    }
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = TrimWhitespace(line.substr(colon + 1));
    if (!IsFieldValue(value)) return Refuse(400, "control character in a header value");
    if (EqualsIgnoringCase(name, "Content-Length")) {
      if (value.empty() || value.find_first_not_of("0123456789") != std::string_view::npos) {
        return Refuse(400, "malformed Content-Length");
      }
      if (value.find_first_not_of('0') != std::string_view::npos) {
        return Refuse(413, "request bodies are not accepted");
      }
    } else if (EqualsIgnoringCase(name, "Transfer-Encoding")) {
      return Refuse(413, "request bodies are not accepted");
    } else if (EqualsIgnoringCase(name, "Authorization")) {
      if (have_authorization) return Refuse(400, "more than one Authorization header");
      have_authorization = true;
      request.authorization = value;
    } else if (EqualsIgnoringCase(name, "Connection")) {
      std::string_view options = value;
      while (!options.empty()) {
        const size_t comma = options.find(',');
        const std::string_view option = TrimWhitespace(options.substr(0, comma));
        close = close || EqualsIgnoringCase(option, "close");
        keep_alive = keep_alive || EqualsIgnoringCase(option, "keep-alive");
        options.remove_prefix(comma == std::string_view::npos ? options.size() : comma + 1);
      }
    }
  }
  // HTTP/1.1 keeps the connection unless told to close; HTTP/1.0 only when asked to keep it.
  request.keep_alive = !close && (request.minor_version >= 1 || keep_alive);
  parse.ok = true;
  return parse;
}

std::string_view BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() <= kScheme.size() ||
      !EqualsIgnoringCase(authorization.substr(0, kScheme.size()), kScheme)) {
    return {};
  }
  return authorization.substr(kScheme.size());
}

namespace {

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

}  // namespace

std::string SerializeResponse(const HttpResponse& response, bool keep_alive, bool head_only) {
  std::string out;
  out.reserve(160 + (head_only ? 0 : response.body.size()));
  out += "HTTP/1.1 ";
  out += std::to_string(response.status);
  out += ' ';
  out += ReasonPhrase(response.status);
  out += "\r\n";
  if (!response.content_type.empty()) {
    out += "Content-Type: ";
    out += response.content_type;
    out += "\r\n";
  }
  out += "Content-Length: ";
  out += std::to_string(response.body.size());
  out += keep_alive ? "\r\nConnection: keep-alive\r\n" : "\r\nConnection: close\r\n";
  for (const auto& [name, value] : response.headers) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  out += "\r\n";
  if (!head_only) out += response.body;
  return out;
}

HttpResponse TextResponse(int status, std::string_view reason) {
  HttpResponse response;
  response.status = status;
  response.content_type = "text/plain";
  response.body = std::string(reason) + "\n";
  return response;
}

}  // namespace kvport::http
