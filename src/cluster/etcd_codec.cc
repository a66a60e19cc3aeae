// SPDX-License-Identifier: Apache-2.0
// etcd's JSON gateway encoding (see etcd_codec.h).
#include "cluster/etcd_codec.h"

#include <array>
#include <charconv>

namespace kvport::cluster {
namespace {

using nlohmann::json;

// gRPC status codes the gateway reports in "code".

constexpr int kGrpcInvalidArgument = 3;
constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcNotFound = 5;
constexpr int kGrpcPermissionDenied = 7;
constexpr int kGrpcUnavailable = 14;
constexpr int kGrpcUnauthenticated = 16;

constexpr char kBase64Alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t n = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) |
                 uint32_t(uint8_t(in[i + 2]));
    out += kBase64Alphabet[(n >> 18) & 63];
    out += kBase64Alphabet[(n >> 12) & 63];
    out += kBase64Alphabet[(n >> 6) & 63];
    out += kBase64Alphabet[n & 63];
  }
  size_t rest = in.size() - i;
  if (rest > 0) {
    uint32_t n = uint32_t(uint8_t(in[i])) << 16;
    if (rest == 2) n |= uint32_t(uint8_t(in[i + 1])) << 8;
    out += kBase64Alphabet[(n >> 18) & 63];
    out += kBase64Alphabet[(n >> 12) & 63];
    out += rest == 2 ? kBase64Alphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Standard alphabet, padding optional (etcd always pads; being lenient costs nothing).
std::optional<std::string> Base64Decode(std::string_view in) {
  static const std::array<int8_t, 256> kValues = [] {
    std::array<int8_t, 256> values{};
    values.fill(-1);
    for (int i = 0; i < 64; ++i)
      values[uint8_t(kBase64Alphabet[i])] = int8_t(i);
    return values;
  }();
  while (!in.empty() && in.back() == '=')
    in.remove_suffix(1);
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t bits = 0;
  int count = 0;
  for (char c : in) {
    int8_t v = kValues[uint8_t(c)];
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | uint32_t(v);
    if (++count == 4) {
      out += char((bits >> 16) & 0xff);
      out += char((bits >> 8) & 0xff);
      out += char(bits & 0xff);
      bits = 0;
      count = 0;
    }
  }
  if (count == 2) out += char((bits >> 4) & 0xff);
  if (count == 3) {
    out += char((bits >> 10) & 0xff);
    out += char((bits >> 2) & 0xff);
  }
  return out;
}

// The first key after every key starting with `prefix`: etcd's range_end for a prefix. An
// all-0xff (or empty) prefix has none: "\0" means "to the end of the keyspace".
std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (uint8_t(end.back()) < 0xff) {
      end.back() = char(uint8_t(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

// An int64 field: a JSON string in the gateway's encoding, a number from other encoders, absent
// when 0.
Result<int64_t> Int64Field(const json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return int64_t{0};
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string& text = it->get_ref<const std::string&>();
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (!text.empty() && ec == std::errc() && end == text.data() + text.size()) return value;
  }
  return Status::Corruption(std::string("etcd answered a non-integer '") + field + "'");
}

Result<std::string> BytesField(const json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return std::string();
  if (!it->is_string())
    return Status::Corruption(std::string("etcd's '") + field + "' not a string");
  auto decoded = Base64Decode(it->get_ref<const std::string&>());
  if (!decoded) return Status::Corruption(std::string("etcd's '") + field + "' is not base64");
  return std::move(*decoded);
}

Result<EtcdKeyValue> ParseKeyValue(const json& kv) {
  if (!kv.is_object()) return Status::Corruption("etcd answered a key-value that is not an object");
  EtcdKeyValue out;
  KVPORT_ASSIGN_OR_RETURN(out.key, BytesField(kv, "key"));
  KVPORT_ASSIGN_OR_RETURN(out.value, BytesField(kv, "value"));
  KVPORT_ASSIGN_OR_RETURN(out.lease, Int64Field(kv, "lease"));
  KVPORT_ASSIGN_OR_RETURN(out.mod_revision, Int64Field(kv, "mod_revision"));
  return out;
}

// The revision in a response's header.
Result<int64_t> HeaderRevision(const json& response) {
  auto it = response.find("header");
  if (it == response.end() || !it->is_object()) return int64_t{0};
  return Int64Field(*it, "revision");
}

// An etcd error answer ({"error": "...", "message": "...", "code": N}, or streaming's
// {"error": {"grpc_code": N, "message": "..."}}) as a Status. `retry_elsewhere` says whether
// another endpoint might do better (this member has no leader, or timed out).
Status ErrorStatus(const json& error_body, std::string_view what, bool* retry_elsewhere) {
  const json* body = &error_body;
  if (auto it = error_body.find("error"); it != error_body.end() && it->is_object()) body = &*it;
  int code = -1;
  for (const char* field : {"code", "grpc_code"}) {
    if (auto it = body->find(field); it != body->end() && it->is_number_integer()) {
      code = it->get<int>();
    }
  }
  std::string message;
  for (const char* field : {"message", "error"}) {
    if (auto it = body->find(field); it != body->end() && it->is_string()) {
      message = it->get<std::string>();
      break;
    }
  }
  if (message.empty()) message = body->dump(-1, ' ', false, json::error_handler_t::replace);
  std::string text = std::string(what) + ": " + message;
  if (retry_elsewhere) *retry_elsewhere = code == kGrpcUnavailable || code == kGrpcDeadlineExceeded;
  switch (code) {
    case kGrpcNotFound:
      return Status::NotFound(std::move(text));
    case kGrpcInvalidArgument:
      return Status::InvalidArgument(std::move(text));
    case kGrpcDeadlineExceeded:
      return Status::Timeout(std::move(text));
    case kGrpcPermissionDenied:
    case kGrpcUnauthenticated:
      return Status::PermissionDenied(std::move(text));
    default:
      return Status::Unavailable(std::move(text));
  }
}

// True when etcd refused a call for its token (expired, or issued before the auth settings
// changed) or for having none (auth was enabled since): authenticating again may cure it.
bool TokenRejected(const Status& status) {
  const std::string& m = status.message();
  return m.find("invalid auth token") != std::string::npos ||
         m.find("auth revision is old") != std::string::npos ||
         m.find("user name is empty") != std::string::npos;
}

std::string Printable(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (uint8_t(c) >= 0x20 && uint8_t(c) < 0x7f) {
      out += c;
    } else {
      out += '?';
    }
  }
  return out;
}

}  // namespace kvport::cluster
