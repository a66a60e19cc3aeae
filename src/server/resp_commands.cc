// SPDX-License-Identifier: Apache-2.0
#include "server/resp_commands.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "kvport/size.h"
#include "server/resp_chunk_pair.h"
#include "server/resp_value_capture.h"
#include "server/unauthenticated.h"

namespace kvport::server {

namespace {

using protocol::RespWriter;
using Args = std::span<const std::string_view>;

// What the node reports as its Redis version (HELLO, INFO): clients gate features on it, and
// kvport serves the commands of docs/resp.md as Redis 7 does.
constexpr std::string_view kRedisVersion = "7.2.0";

std::string Upper(std::string_view text) {
  std::string upper(text);
  for (char& c : upper)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return upper;
}

// A Redis integer argument: optional '-', digits, fitting int64.
std::optional<int64_t> ParseInteger(std::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  bool negative = text[0] == '-';
  size_t i = negative ? 1 : 0;
  if (i == text.size()) return std::nullopt;
  uint64_t v = 0;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
}

std::optional<uint64_t> ParseCursor(std::string_view text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(ch - '0');
    if (v > (UINT64_MAX - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return v;
}

void NotInteger(RespWriter& w) {
  w.Error("ERR value is not an integer or out of range");
}

void SyntaxError(RespWriter& w) {
  w.Error("ERR syntax error");
}

void WrongArity(RespWriter& w, std::string_view name) {
  w.Error(fmt::format("ERR wrong number of arguments for '{}' command", Upper(name)));
}

// A service error as Redis's kind of error: NOPERM for what the token may not do, OOM when the
// node cannot make room, ERR otherwise; the message is kvport's.

struct Context {
  CacheService& service;
  RespClient& client;
  RespWriter& w;
  RespOutput& out;
  RespValueCapture* captured;  // the value read into its reservation, if any (RespValueCapture)
  const Grant& grant() const { return client.access.grant(); }
  const std::string& ns() const { return client.ns; }
};

// The largest TTL a write can carry (the store's whole seconds, 32 bits).
constexpr uint64_t kMaxTtlMs = uint64_t{UINT32_MAX} * 1000;

// Writes `value` as (ns, key) with `ttl_ms` (0: none): reserved whole, copied, committed; or,
// when it is the value the session read into its reservation, that reservation committed.
Status Write(Context& c, std::string_view key, std::string_view value, uint64_t ttl_ms) {
  const uint32_t ttl_seconds =
      ttl_ms == 0 ? store::kNoExpiry : static_cast<uint32_t>((ttl_ms + 999) / 1000);
  if (c.captured != nullptr && c.captured->Holds(value)) {
    KVPORT_RETURN_IF_ERROR(c.captured->Commit(ttl_seconds));
  } else {
    KVPORT_ASSIGN_OR_RETURN(
        store::WriteHandle handle,
        c.service.Reserve(c.grant(), c.ns(), key, value.size(), "", ttl_seconds));
    if (!value.empty()) std::memcpy(handle.data(), value.data(), value.size());
    KVPORT_RETURN_IF_ERROR(c.service.Commit(std::move(handle)));
  }
  // Whole seconds above; a PX of a fraction of a second is set exactly now.
  if (ttl_ms % 1000 != 0) (void)c.service.SetExpiry(c.grant(), c.ns(), key, ttl_ms);
  return Status::Ok();
}

// What a read of a key found: a pin of the object holding it, and whether the value is that
// object's metadata (a folded pair's `<P>metadata`: server/resp_chunk_pair.h).
struct Found {
  store::ReadHandle pin;
  bool in_meta = false;
};

// The key of the object a command on `key` acts on: `key`, or for a folded `<P>metadata` its
// pair's data key (kept in *folded, which the answer may point into).
std::string_view HomeOf(Context& c, std::string_view key, std::optional<std::string>* folded) {
  *folded = FoldedHomeOf(c.service, c.grant(), c.ns(), key);
  return folded->has_value() ? std::string_view(**folded) : key;
}

// Finds `key` for a read: nullopt for a miss; other errors are replied and *failed set.
std::optional<Found> FindOrMiss(Context& c, std::string_view key, bool* failed) {
  std::optional<std::string> folded;
  Result<store::ReadHandle> pin = c.service.Pin(c.grant(), c.ns(), HomeOf(c, key, &folded), false);
  if (pin.ok()) {
    // A version written since the probe without metadata: the pair's metadata is gone.
    if (folded && pin->meta().empty()) return std::nullopt;
    return Found{std::move(pin).value(), folded.has_value()};
  }
  if (pin.status().code() == StatusCode::kNotFound) return std::nullopt;
  ReplyStatus(c.w, pin.status());
  *failed = true;
  return std::nullopt;
}

// Replies with what FindOrMiss found.
void ReplyFound(Context& c, Found&& found) {
  if (found.in_meta) return c.w.Bulk(found.pin.meta());
  c.out.Value(std::move(found.pin));
}

// Writes a plain SET's value: folded into its pair when it is LMCache's `<P>metadata` and has
// no expiry, else as its own key.
Status Store(Context& c, std::string_view key, std::string_view value, uint64_t ttl_ms) {
  if (ttl_ms == 0) {
    Status folded = FoldPairMeta(c.service, c.grant(), c.ns(), key, value);
    if (folded.code() != StatusCode::kNotFound) return folded;
  }
  return Write(c, key, value, ttl_ms);
}

// --- connection -----------------------------------------------------------------------------

void Ping(Context& c, Args a) {
  if (a.size() > 2) return WrongArity(c.w, a[0]);
  if (a.size() == 2) return c.w.Bulk(a[1]);
  c.w.Simple("PONG");
}

void Echo(Context& c, Args a) {
  if (a.size() != 2) return WrongArity(c.w, a[0]);
  c.w.Bulk(a[1]);
}

// The namespace a client's keys live in once authenticated: its token's default, else "".
void TakeDefaultNamespace(RespClient& client) {
  const std::optional<std::string>& ns = client.access.grant().default_namespace();
  client.ns = ns ? *ns : std::string();
}

// AUTH [name] secret: a kvport token. With a name, the token must be the one of that name.
// On a node with tokens a peer that failed too often is refused before its secret is looked at,
// and the connection closes once its peer is backed off, so guesses cannot be pipelined on it
// (server/auth_throttle.h).
bool Authenticate(Context& c, std::optional<std::string_view> name, std::string_view secret) {
  UnauthenticatedConnections* table = c.service.unauthenticated();
  AuthThrottle* throttle = table != nullptr ? table->throttle() : nullptr;
  std::string peer;
  if (throttle != nullptr) {
    // Until its first success the connection is in the table, under its address; after it, a
    // new AUTH is charged to the token it holds.
    if (std::optional<std::string> address = table->AddressOf(c.client.id)) {
      peer = std::move(*address);
    } else if (c.client.access.authenticated()) {
      peer = AuthThrottle::TokenPeer(c.client.access.grant().name());
    }
    Status admitted = throttle->Admit(peer);
    if (!admitted.ok()) {
      c.service.counters().CountAuthThrottled();
      c.w.Error("ERR " + admitted.message());
      c.client.quit = true;
      return false;
    }
  }
  SessionAccess attempt;
  Status s = attempt.Authenticate(c.service.access(), secret);
  if (s.ok() && name && c.service.access().required() && attempt.grant().name() != *name &&
      *name != "default") {
    s = Status::PermissionDenied("token name mismatch");
  }
  if (!s.ok()) {
    c.service.counters().CountAuthFailure();
    c.w.Error("WRONGPASS invalid username-password pair or user is disabled.");
    if (throttle != nullptr && !secret.empty() && throttle->Charge(peer)) c.client.quit = true;
    return false;
  }
  c.client.access = std::move(attempt);
  TakeDefaultNamespace(c.client);
  return true;
}

void Auth(Context& c, Args a) {
  if (a.size() != 2 && a.size() != 3) return WrongArity(c.w, a[0]);
  const bool named = a.size() == 3;
  if (Authenticate(c, named ? std::optional<std::string_view>(a[1]) : std::nullopt, a.back())) {
    c.w.Simple("OK");
  }
}

void SetClientName(RespClient& client, std::string_view name) {
  client.name.assign(name);
  // "kvport.ns=NAME" selects the namespace NAME (docs/resp.md, "Namespaces").
  constexpr std::string_view kPrefix = "kvport.ns=";
  if (name.substr(0, kPrefix.size()) == kPrefix) client.ns.assign(name.substr(kPrefix.size()));
}

void Hello(Context& c, Args a) {
  int version = c.client.version;
  size_t i = 1;
  if (a.size() >= 2) {
    std::optional<int64_t> v = ParseInteger(a[1]);
    if (!v) return c.w.Error("ERR Protocol version is not an integer or out of range");
    if (*v != 2 && *v != 3) return c.w.Error("NOPROTO unsupported protocol version");
    version = static_cast<int>(*v);
    i = 2;
  }
  std::optional<std::string_view> name;
  for (; i < a.size(); ++i) {
    if (ArgIs(a[i], "AUTH") && i + 2 < a.size()) {
      if (!Authenticate(c, a[i + 1], a[i + 2])) return;
      i += 2;
    } else if (ArgIs(a[i], "SETNAME") && i + 1 < a.size()) {
      name = a[++i];
    } else {
      return c.w.Error(fmt::format("ERR Syntax error in HELLO option '{}'", a[i]));
    }
  }
  if (!c.client.access.authenticated()) {
    return c.w.Error(
        "NOAUTH HELLO must be called with the client already authenticated, "
        "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
        "authenticate the client and select the RESP protocol version at the same "
        "time");
  }
  if (name) SetClientName(c.client, *name);
  c.client.version = version;
  RespWriter w(c.w.out(), version);  // the reply is already in the new version
  w.Map(7);
  w.Bulk("server");
  w.Bulk("redis");
  w.Bulk("version");
  w.Bulk(kRedisVersion);
  w.Bulk("proto");
  w.Integer(version);
  w.Bulk("id");
  w.Integer(static_cast<int64_t>(c.client.id));
  w.Bulk("mode");
  w.Bulk("standalone");
  w.Bulk("role");
  w.Bulk("master");
  w.Bulk("modules");
  w.Array(0);
}

void Client(Context& c, Args a) {
  if (a.size() < 2) return WrongArity(c.w, a[0]);
  if (ArgIs(a[1], "SETNAME") && a.size() == 3) {
    if (a[2].find_first_of(" \n\r") != std::string_view::npos) {
      return c.w.Error("ERR Client names cannot contain spaces, newlines or special characters.");
    }
    SetClientName(c.client, a[2]);
    return c.w.Simple("OK");
  }
  if (ArgIs(a[1], "GETNAME") && a.size() == 2) {
    if (c.client.name.empty()) return c.w.Null();
    return c.w.Bulk(c.client.name);
  }
  if (ArgIs(a[1], "ID") && a.size() == 2) return c.w.Integer(static_cast<int64_t>(c.client.id));
  if (ArgIs(a[1], "NAMESPACE") && a.size() <= 3) {
    if (a.size() == 2) return c.w.Bulk(c.client.ns);
    if (!c.grant().may_read(a[2]) && !c.grant().may_write(a[2])) {
      return c.w.Error(
          fmt::format("NOPERM token '{}' may not use namespace '{}'", c.grant().name(), a[2]));
    }
    c.client.ns.assign(a[2]);
    return c.w.Simple("OK");
  }
  // redis-py and others announce their library; nothing to keep.
  if (ArgIs(a[1], "SETINFO") && a.size() == 4) return c.w.Simple("OK");
  c.w.Error(fmt::format("ERR unknown subcommand '{}'. Try CLIENT HELP.", a[1]));
}

void Select(Context& c, Args a) {
  if (a.size() != 2) return WrongArity(c.w, a[0]);
  std::optional<int64_t> db = ParseInteger(a[1]);
  if (!db) return NotInteger(c.w);
  if (*db != 0) return c.w.Error("ERR DB index is out of range");
  c.w.Simple("OK");
}

// --- strings ----------------------------------------------------------------------------------

void Get(Context& c, Args a) {
  if (a.size() != 2) return WrongArity(c.w, a[0]);
  bool failed = false;
  std::optional<Found> found = FindOrMiss(c, a[1], &failed);
  if (failed) return;
  if (!found) return c.w.Null();
  ReplyFound(c, std::move(*found));
}

void GetDel(Context& c, Args a) {
  if (a.size() != 2) return WrongArity(c.w, a[0]);
  bool failed = false;
  std::optional<Found> found = FindOrMiss(c, a[1], &failed);
  if (failed) return;
  if (!found) return c.w.Null();
  Status deleted = DeleteRespKey(c.service, c.grant(), c.ns(), a[1]);
  if (!deleted.ok() && deleted.code() != StatusCode::kNotFound) return ReplyStatus(c.w, deleted);
  ReplyFound(c, std::move(*found));  // the pin keeps the deleted version readable
}

// An expiry argument in `unit_ms` units: > 0 and within kMaxTtlMs, else an error reply.
std::optional<uint64_t> ExpiryArgument(Context& c, std::string_view text, uint64_t unit_ms,
                                       std::string_view command) {
  std::optional<int64_t> v = ParseInteger(text);
  if (!v) {
    NotInteger(c.w);
    return std::nullopt;
  }
  if (*v <= 0 || static_cast<uint64_t>(*v) > kMaxTtlMs / unit_ms) {
    c.w.Error(fmt::format("ERR invalid expire time in '{}' command", command));
    return std::nullopt;
  }
  return static_cast<uint64_t>(*v) * unit_ms;
}

void SetCommand(Context& c, Args a) {
  if (a.size() < 3) return WrongArity(c.w, a[0]);
  bool nx = false, xx = false, keep_ttl = false, get = false;
  uint64_t ttl_ms = 0;
  bool has_ttl = false;
  for (size_t i = 3; i < a.size(); ++i) {
    if (ArgIs(a[i], "NX") && !xx) {
      nx = true;
    } else if (ArgIs(a[i], "XX") && !nx) {
      xx = true;
    } else if (ArgIs(a[i], "GET")) {
      get = true;
    } else if (ArgIs(a[i], "KEEPTTL") && !has_ttl) {
      keep_ttl = true;
    } else if ((ArgIs(a[i], "EX") || ArgIs(a[i], "PX") || ArgIs(a[i], "EXAT") ||
                ArgIs(a[i], "PXAT")) &&
               !keep_ttl && !has_ttl && i + 1 < a.size()) {
      if (ArgIs(a[i], "EXAT") || ArgIs(a[i], "PXAT")) {
        return c.w.Error("ERR SET EXAT/PXAT are not supported by kvport (docs/resp.md)");
      }
      std::optional<uint64_t> ms = ExpiryArgument(c, a[i + 1], ArgIs(a[i], "EX") ? 1000 : 1, "set");
      if (!ms) return;
      ttl_ms = *ms;
      has_ttl = true;
      ++i;
    } else {
      return SyntaxError(c.w);
    }
  }
  std::string_view key = a[1];
  std::optional<Found> old;
  bool exists = false;
  if (get) {
    bool failed = false;
    old = FindOrMiss(c, key, &failed);
    if (failed) return;
    exists = old.has_value();
  } else if (nx || xx) {
    std::optional<std::string> folded;
    Status probe = c.service.Exists(c.grant(), c.ns(), HomeOf(c, key, &folded), false, nullptr);
    if (!probe.ok() && probe.code() != StatusCode::kNotFound) return ReplyStatus(c.w, probe);
    exists = probe.ok();
  }
  const bool write = !(nx && exists) && !(xx && !exists);
  if (write) {
    if (keep_ttl) {
      std::optional<std::string> folded;
      Result<uint64_t> left = c.service.TimeToLive(c.grant(), c.ns(), HomeOf(c, key, &folded));
      if (left.ok()) ttl_ms = *left;
    }
    Status written = Store(c, key, a[2], ttl_ms);
    if (!written.ok()) return ReplyStatus(c.w, written);
  }
  if (get) {
    if (old) return ReplyFound(c, std::move(*old));
    return c.w.Null();
  }
  if (!write) return c.w.Null();
  c.w.Simple("OK");
}

// SETEX key seconds value, PSETEX key ms value.
void SetWithExpiry(Context& c, Args a, uint64_t unit_ms) {
  if (a.size() != 4) return WrongArity(c.w, a[0]);
  std::optional<uint64_t> ms =
      ExpiryArgument(c, a[2], unit_ms, unit_ms == 1000 ? "setex" : "psetex");
  if (!ms) return;
  Status written = Write(c, a[1], a[3], *ms);
  if (!written.ok()) return ReplyStatus(c.w, written);
  c.w.Simple("OK");
}

void MGet(Context& c, Args a) {
  if (a.size() < 2) return WrongArity(c.w, a[0]);
  std::vector<std::optional<Found>> founds;
  founds.reserve(a.size() - 1);
  for (size_t i = 1; i < a.size(); ++i) {
    bool failed = false;
    founds.push_back(FindOrMiss(c, a[i], &failed));
    if (failed) return;
  }
  c.w.Array(founds.size());
  for (std::optional<Found>& found : founds) {
    if (found) {
      ReplyFound(c, std::move(*found));
    } else {
      c.w.Null();
    }
  }
}

void MSet(Context& c, Args a) {
  if (a.size() < 3 || a.size() % 2 != 1) return WrongArity(c.w, a[0]);
  // Every item reserved before any is committed: a refusal leaves none of them written.
  WriteBatch batch(&c.service, c.client.access.shared_grant());
  for (size_t i = 1; i < a.size(); i += 2) {
    batch.Reserve(c.ns(), a[i], a[i + 1].size(), "", store::kNoExpiry);
    const size_t item = batch.size() - 1;
    if (batch.status(item) != StatusCode::kOk) {
      return ReplyStatus(
          c.w, Status(batch.status(item), fmt::format("MSET of key #{} refused", item + 1)));
    }
    if (!a[i + 1].empty()) std::memcpy(batch.destination(item), a[i + 1].data(), a[i + 1].size());
  }
  std::vector<StatusCode> committed = batch.Commit();
  for (size_t i = 0; i < committed.size(); ++i) {
    if (committed[i] != StatusCode::kOk) {
      return ReplyStatus(c.w, Status(committed[i], fmt::format("MSET of key #{} failed", i + 1)));
    }
  }
  c.w.Simple("OK");
}

void Exists(Context& c, Args a) {
  if (a.size() < 2) return WrongArity(c.w, a[0]);
  int64_t count = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    std::optional<std::string> folded;
    Status s = c.service.Exists(c.grant(), c.ns(), HomeOf(c, a[i], &folded), false, nullptr);
    if (s.ok()) {
      ++count;
    } else if (s.code() != StatusCode::kNotFound) {
      return ReplyStatus(c.w, s);
    }
  }
  c.w.Integer(count);
}

void Del(Context& c, Args a) {
  if (a.size() < 2) return WrongArity(c.w, a[0]);
  int64_t count = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    Status s = DeleteRespKey(c.service, c.grant(), c.ns(), a[i]);
    if (s.ok()) {
      ++count;
    } else if (s.code() != StatusCode::kNotFound) {
      return ReplyStatus(c.w, s);
    }
  }
  c.w.Integer(count);
}

void StrLen(Context& c, Args a) {
  if (a.size() != 2) return WrongArity(c.w, a[0]);
  std::optional<std::string> folded;
  uint64_t length = 0, meta_length = 0;
  Status s =
      c.service.Exists(c.grant(), c.ns(), HomeOf(c, a[1], &folded), false, &length, &meta_length);
  if (s.code() == StatusCode::kNotFound) return c.w.Integer(0);
  if (!s.ok()) return ReplyStatus(c.w, s);
  c.w.Integer(static_cast<int64_t>(folded ? meta_length : length));
}

// EXPIRE key seconds [NX|XX|GT|LT], PEXPIRE key ms [...].
void Expire(Context& c, Args a, uint64_t unit_ms) {
  if (a.size() != 3 && a.size() != 4) return WrongArity(c.w, a[0]);
  std::optional<int64_t> v = ParseInteger(a[2]);
  if (!v) return NotInteger(c.w);
  std::string_view option = a.size() == 4 ? a[3] : std::string_view();
  if (!option.empty() && !ArgIs(option, "NX") && !ArgIs(option, "XX") && !ArgIs(option, "GT") &&
      !ArgIs(option, "LT")) {
    return c.w.Error(fmt::format("ERR Unsupported option {}", option));
  }
  // A folded `<P>metadata` lives, and expires, with its pair.
  std::optional<std::string> folded;
  const std::string_view key = HomeOf(c, a[1], &folded);
  Result<uint64_t> left = c.service.TimeToLive(c.grant(), c.ns(), key);
  if (!left.ok()) {
    if (left.status().code() == StatusCode::kNotFound) return c.w.Integer(0);
    return ReplyStatus(c.w, left.status());
  }
  // A time in the past deletes the key (as Redis does).
  if (*v <= 0) {
    Status s = DeleteRespKey(c.service, c.grant(), c.ns(), a[1]);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return ReplyStatus(c.w, s);
    return c.w.Integer(s.ok() ? 1 : 0);
  }
  if (static_cast<uint64_t>(*v) > kMaxTtlMs / unit_ms) {
    return c.w.Error(fmt::format("ERR invalid expire time in '{}' command", Upper(a[0])));
  }
  const uint64_t ttl_ms = static_cast<uint64_t>(*v) * unit_ms;
  const bool has_ttl = *left != 0;
  // No expiry counts as an infinite TTL for GT and LT, as in Redis.
  if ((ArgIs(option, "NX") && has_ttl) || (ArgIs(option, "XX") && !has_ttl) ||
      (ArgIs(option, "GT") && (!has_ttl || ttl_ms <= *left)) ||
      (ArgIs(option, "LT") && has_ttl && ttl_ms >= *left)) {
    return c.w.Integer(0);
  }
  Status s = c.service.SetExpiry(c.grant(), c.ns(), key, ttl_ms);
  if (s.code() == StatusCode::kNotFound) return c.w.Integer(0);
  if (!s.ok()) return ReplyStatus(c.w, s);
  c.w.Integer(1);
}

void Ttl(Context& c, Args a, bool millis) {
  if (a.size() != 2) return WrongArity(c.w, a[0]);
  // A folded `<P>metadata` lives, and expires, with its pair.
  std::optional<std::string> folded;
  const std::string_view key = HomeOf(c, a[1], &folded);
  Result<uint64_t> left = c.service.TimeToLive(c.grant(), c.ns(), key);
  if (!left.ok()) {
    if (left.status().code() == StatusCode::kNotFound) return c.w.Integer(-2);
    return ReplyStatus(c.w, left.status());
  }
  if (*left == 0) return c.w.Integer(-1);
  c.w.Integer(static_cast<int64_t>(millis ? *left : (*left + 500) / 1000));
}

void Persist(Context& c, Args a) {
  if (a.size() != 2) return WrongArity(c.w, a[0]);
  // A folded `<P>metadata` lives, and expires, with its pair.
  std::optional<std::string> folded;
  const std::string_view key = HomeOf(c, a[1], &folded);
  Result<uint64_t> left = c.service.TimeToLive(c.grant(), c.ns(), key);
  if (!left.ok()) {
    if (left.status().code() == StatusCode::kNotFound) return c.w.Integer(0);
    return ReplyStatus(c.w, left.status());
  }
  if (*left == 0) return c.w.Integer(0);
  Status s = c.service.SetExpiry(c.grant(), c.ns(), key, 0);
  if (s.code() == StatusCode::kNotFound) return c.w.Integer(0);
  if (!s.ok()) return ReplyStatus(c.w, s);
  c.w.Integer(1);
}

// --- keyspace ---------------------------------------------------------------------------------

void Scan(Context& c, Args a) {
  if (a.size() < 2) return WrongArity(c.w, a[0]);
  // Cursors are the node's 64-bit LIST cursors: unsigned, all 64 bits.
  std::optional<uint64_t> cursor = ParseCursor(a[1]);
  if (!cursor) return c.w.Error("ERR invalid cursor");
  std::string_view match;
  int64_t count = 10;
  for (size_t i = 2; i < a.size(); ++i) {
    if (ArgIs(a[i], "MATCH") && i + 1 < a.size()) {
      match = a[++i];
    } else if (ArgIs(a[i], "COUNT") && i + 1 < a.size()) {
      std::optional<int64_t> n = ParseInteger(a[++i]);
      if (!n) return NotInteger(c.w);
      if (*n < 1) return SyntaxError(c.w);
      count = *n;
    } else if (ArgIs(a[i], "TYPE") && i + 1 < a.size()) {
      if (!ArgIs(a[++i], "STRING")) {  // every kvport value is a string
        c.w.Array(2);
        c.w.Bulk("0");
        return c.w.Array(0);
      }
    } else {
      return SyntaxError(c.w);
    }
  }
  const uint32_t page_keys = static_cast<uint32_t>(
      std::min<int64_t>(count, static_cast<int64_t>(c.service.limits().max_batch_keys)));
  Result<CacheService::ListPage> page =
      c.service.List(c.grant(), c.client.id, c.ns(), *cursor, page_keys);
  if (!page.ok()) {
    if (page.status().code() == StatusCode::kInvalidArgument) {
      return c.w.Error("ERR invalid cursor: " + page.status().message());
    }
    return ReplyStatus(c.w, page.status());
  }
  std::vector<std::string> keys;
  auto add = [&](std::string key) {
    if (match.empty() || RespGlobMatch(match, key)) keys.push_back(std::move(key));
  };
  for (std::string& key : page->keys) {
    // A folded pair is two keys to a Redis client: its `<P>metadata` comes with its data.
    std::string meta_key = FoldedMetaKeyOf(c.service, c.grant(), c.ns(), key);
    add(std::move(key));
    if (!meta_key.empty()) add(std::move(meta_key));
  }
  c.w.Array(2);
  c.w.Bulk(std::to_string(page->next_cursor));
  c.w.Array(keys.size());
  for (const std::string& key : keys)
    c.w.Bulk(key);
}

uint64_t ObjectsIn(const ServerStats& stats, std::string_view ns) {
  for (const ServerStats::Namespace& n : stats.namespaces) {
    if (n.ns == ns) return n.objects;
  }
  return 0;
}

void DbSize(Context& c, Args a) {
  if (a.size() != 1) return WrongArity(c.w, a[0]);
  if (!c.grant().may_read(c.ns()) && !c.grant().admin()) {
    return ReplyStatus(
        c.w, Status::PermissionDenied(
                 fmt::format("token '{}' may not read namespace '{}'", c.grant().name(), c.ns())));
  }
  c.w.Integer(static_cast<int64_t>(ObjectsIn(c.service.Stats(c.grant()), c.ns())));
}

void FlushDb(Context& c, Args a) {
  if (a.size() > 2 || (a.size() == 2 && !ArgIs(a[1], "ASYNC") && !ArgIs(a[1], "SYNC"))) {
    return SyntaxError(c.w);
  }
  Result<uint64_t> deleted = c.service.DeleteNamespace(c.grant(), c.ns());
  if (!deleted.ok()) return ReplyStatus(c.w, deleted.status());
  c.w.Simple("OK");
}

// --- server -----------------------------------------------------------------------------------

// INFO's Commandstats section (after the command table).
void AppendCommandStats(Context& c, std::string* text);

void Info(Context& c, Args a) {
  std::vector<std::string> sections;
  for (size_t i = 1; i < a.size(); ++i)
    sections.push_back(Upper(a[i]));
  auto wanted = [&](std::string_view name) {
    if (sections.empty()) return true;
    return std::any_of(sections.begin(), sections.end(), [&](const std::string& s) {
      return s == name || s == "ALL" || s == "EVERYTHING" || s == "DEFAULT";
    });
  };
  const ServerStats stats = c.service.Stats(c.grant());
  std::string text;
  auto line = [&](std::string_view key, auto value) {
    text += fmt::format("{}:{}\r\n", key, value);
  };
  if (wanted("SERVER")) {
    text += "# Server\r\n";
    line("redis_version", kRedisVersion);
    line("redis_mode", "standalone");
    line("kvport_server", c.service.server_name());
    line("process_id", getpid());
    line("run_id", fmt::format("{:040x}", c.service.identity().node_id));
    text += "\r\n";
  }
  if (wanted("CLIENTS")) {
    text += "# Clients\r\n";
    line("connected_clients", stats.Get("connections"));
    line("maxclients", c.service.options().max_connections);
    line("blocked_clients", 0);
    text += "\r\n";
  }
  if (wanted("MEMORY")) {
    const uint64_t used = stats.Get("used_bytes");
    const uint64_t capacity = stats.Get("capacity_bytes");
    text += "# Memory\r\n";
    line("used_memory", used);
    line("used_memory_human", FormatSize(used));
    line("maxmemory", capacity);
    line("maxmemory_human", FormatSize(capacity));
    line("maxmemory_policy", "allkeys-lru");
    line("kvport_pinned_bytes", stats.Get("pinned_bytes"));
    line("kvport_reserved_bytes", stats.Get("reserved_bytes"));
    text += "\r\n";
  }
  if (wanted("STATS")) {
    text += "# Stats\r\n";
    line("total_connections_received", stats.Get("connections_accepted"));
    line("rejected_connections", stats.Get("connections_refused"));
    line("total_net_input_bytes", stats.Get("bytes_received"));
    line("total_net_output_bytes", stats.Get("bytes_sent"));
    line("keyspace_hits", stats.Get("hits"));
    line("keyspace_misses", stats.Get("misses"));
    line("evicted_keys", stats.Get("evictions"));
    line("expired_keys", stats.Get("expirations"));
    line("kvport_error_responses", stats.Get("error_responses"));
    text += "\r\n";
  }
  // Not among the default sections, as in Redis: INFO commandstats, all or everything.
  if (std::any_of(sections.begin(), sections.end(), [](const std::string& s) {
        return s == "COMMANDSTATS" || s == "ALL" || s == "EVERYTHING";
      })) {
    AppendCommandStats(c, &text);
  }
  if (wanted("KEYSPACE")) {
    text += "# Keyspace\r\n";
    const uint64_t keys = ObjectsIn(stats, c.ns());
    if (keys > 0) line("db0", fmt::format("keys={},expires=0,avg_ttl=0", keys));
    text += "\r\n";
  }
  c.w.Verbatim("txt", text);
}

struct ConfigValue {
  std::string_view name;
  std::string value;
};

void Config(Context& c, Args a) {
  if (a.size() < 2) return WrongArity(c.w, a[0]);
  if (!ArgIs(a[1], "GET")) {
    return c.w.Error(fmt::format("ERR CONFIG {} is not supported by kvport (docs/resp.md)", a[1]));
  }
  if (a.size() < 3) return WrongArity(c.w, "config|get");
  const ServerStats stats = c.service.Stats(c.grant());
  const std::vector<ConfigValue> values = {
      {"maxmemory", std::to_string(stats.Get("capacity_bytes"))},
      {"maxmemory-policy", "allkeys-lru"},
      {"maxclients", std::to_string(c.service.options().max_connections)},
      {"proto-max-bulk-len", std::to_string(c.service.limits().max_value_bytes)},
      {"databases", "1"},
      {"save", ""},
      {"appendonly", "no"},
      {"timeout", "0"},
  };
  std::vector<const ConfigValue*> found;
  for (const ConfigValue& v : values) {
    for (size_t i = 2; i < a.size(); ++i) {
      if (RespGlobMatch(Upper(a[i]), Upper(v.name))) {
        found.push_back(&v);
        break;
      }
    }
  }
  c.w.Map(found.size());
  for (const ConfigValue* v : found) {
    c.w.Bulk(v->name);
    c.w.Bulk(v->value);
  }
}

void CommandCommand(Context& c, Args a);

void Quit(Context& c, Args) {
  c.client.quit = true;
  c.w.Simple("OK");
}

struct Command {
  std::string_view name;
  void (*run)(Context& c, Args a);
  bool before_auth;  // served before AUTH on a node with tokens
};

const Command kCommands[] = {
    {"PING", Ping, false},
    {"ECHO", Echo, false},
    {"HELLO", Hello, true},
    {"AUTH", Auth, true},
    {"CLIENT", Client, false},
    {"SELECT", Select, false},
    {"GET", Get, false},
    {"SET", SetCommand, false},
    {"SETEX", [](Context& c, Args a) { SetWithExpiry(c, a, 1000); }, false},
    {"PSETEX", [](Context& c, Args a) { SetWithExpiry(c, a, 1); }, false},
    {"MGET", MGet, false},
    {"MSET", MSet, false},
    {"EXISTS", Exists, false},
    {"DEL", Del, false},
    {"UNLINK", Del, false},
    {"EXPIRE", [](Context& c, Args a) { Expire(c, a, 1000); }, false},
    {"PEXPIRE", [](Context& c, Args a) { Expire(c, a, 1); }, false},
    {"TTL", [](Context& c, Args a) { Ttl(c, a, false); }, false},
    {"PTTL", [](Context& c, Args a) { Ttl(c, a, true); }, false},
    {"PERSIST", Persist, false},
    {"STRLEN", StrLen, false},
    {"GETDEL", GetDel, false},
    {"SCAN", Scan, false},
    {"DBSIZE", DbSize, false},
    {"INFO", Info, false},
    {"COMMAND", CommandCommand, false},
    {"CONFIG", Config, false},
    {"QUIT", Quit, true},
    {"FLUSHDB", FlushDb, false},
};
static_assert(std::size(kCommands) <= ServerCounters::kRespCommandSlots,
              "each RESP command has a slot in the node's counters");

// COMMAND: what clients ask at start. COMMAND (no argument) and COMMAND DOCS answer empty (a
// client then has no hints, nothing else), COMMAND COUNT the number of commands served.
// Redis's cmdstat lines: calls, usec (the time spent running it), usec_per_call, rejected_calls
// (always 0: a command refused before it runs, as NOAUTH, is not counted) and failed_calls (its
// error replies).
void AppendCommandStats(Context& c, std::string* text) {
  *text += "# Commandstats\r\n";
  for (size_t slot = 0; slot < std::size(kCommands); ++slot) {
    const ServerCounters::RespCommandCounts counts = c.service.counters().RespCommand(slot);
    if (counts.calls == 0) continue;
    std::string name(kCommands[slot].name);
    for (char& ch : name)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const double usec = static_cast<double>(counts.sum_ns) / 1e3;
    *text += fmt::format(
        "cmdstat_{}:calls={},usec={:.0f},usec_per_call={:.2f},rejected_calls=0,failed_calls={}"
        "\r\n",
        name, counts.calls, usec, usec / static_cast<double>(counts.calls), counts.errors);
  }
  *text += "\r\n";
}

void CommandCommand(Context& c, Args a) {
  if (a.size() == 1) return c.w.Array(0);
  if (ArgIs(a[1], "COUNT")) return c.w.Integer(static_cast<int64_t>(std::size(kCommands)));
  if (ArgIs(a[1], "DOCS")) return c.w.Map(0);
  if (ArgIs(a[1], "INFO")) {
    c.w.Array(a.size() - 2);
    for (size_t i = 2; i < a.size(); ++i)
      c.w.NullArray();
    return;
  }
  c.w.Error(fmt::format("ERR unknown subcommand '{}'. Try COMMAND HELP.", a[1]));
}

}  // namespace

void RespOutput::Value(store::ReadHandle pin) {
  const uint64_t size = pin.size();
  RespWriter(&text_, 2).BulkHeader(size);
  if (size < kCopyBelowBytes) {
    // The replies of a pipeline gather here: room for a few values of this size at once, not
    // regrown by doubling from a few bytes with every readiness event (the text leaves with
    // Commit), nor 64 KiB for a 60-byte value.
    if (text_.capacity() - text_.size() < size + 2) {
      text_.reserve(std::max({text_.size() + size + 2, 2 * text_.capacity(), 4 * (size + 64)}));
    }
    text_.append(reinterpret_cast<const char*>(pin.data()), size);
  } else {
    queue_->Append(std::exchange(text_, std::string()));
    auto held = std::make_shared<store::ReadHandle>(std::move(pin));
    const uint8_t* data = held->data();
    queue_->AppendBorrowed(data, size, std::move(held));
  }
  text_.append("\r\n");
}

void RespOutput::Commit() {
  if (!text_.empty()) queue_->Append(std::exchange(text_, std::string()));
}

void ReplyStatus(RespWriter& w, const Status& status) {
  switch (status.code()) {
    case StatusCode::kPermissionDenied:
      w.Error("NOPERM " + status.message());
      return;
    case StatusCode::kNoSpace:
      w.Error("OOM " + status.message());
      return;
    default:
      w.Error(fmt::format("ERR {} ({})", status.message(), StatusCodeName(status.code())));
      return;
  }
}

bool ArgIs(std::string_view arg, std::string_view upper_name) {
  if (arg.size() != upper_name.size()) return false;
  for (size_t i = 0; i < arg.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(arg[i])) != upper_name[i]) return false;
  }
  return true;
}

bool RunRespCommand(CacheService& service, RespClient& client, Args args, RespOutput& out,
                    RespValueCapture* captured) {
  RespWriter w(&out.text(), client.version);
  if (args.empty()) return false;
  const Command* command = nullptr;
  for (const Command& candidate : kCommands) {
    if (ArgIs(args[0], candidate.name)) {
      command = &candidate;
      break;
    }
  }
  if (command == nullptr) {
    std::string shown(args[0].substr(0, 128));
    for (char& ch : shown)
      if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
    w.Error(fmt::format("ERR unknown command '{}', with args beginning with: ", shown));
    return true;
  }
  if (!client.access.authenticated() && !command->before_auth) {
    w.Error("NOAUTH Authentication required.");
    return true;
  }
  if (client.access.authenticated()) {
    // The node's tokens may have been replaced (SIGHUP) since this client's AUTH.
    Status still = client.access.Refresh(service.access());
    if (!still.ok()) {
      // As a binary session: the connection ends (its grant is gone).
      w.Error("NOAUTH " + still.message());
      client.quit = true;
      return true;
    }
  }
  Context c{service, client, w, out, captured};
  const size_t before = out.text().size();
  const auto start = std::chrono::steady_clock::now();
  command->run(c, args);
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  // An error reply starts with '-' (a value sent from the arena never comes first).
  const bool error = out.text().size() > before && out.text()[before] == '-';
  service.counters().RecordRespCommand(static_cast<size_t>(command - kCommands), &command->name,
                                       error, static_cast<uint64_t>(ns));
  return error;
}

bool RespGlobMatch(std::string_view p, std::string_view s) {
  // Iterative with one backtrack point for the last '*': linear in practice, no recursion.
  size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
      continue;
    }
    bool matched = false;
    size_t next = pi;
    if (pi < p.size()) {
      if (p[pi] == '?') {
        matched = true;
        next = pi + 1;
      } else if (p[pi] == '[') {
        size_t j = pi + 1;
        const bool negate = j < p.size() && p[j] == '^';
        if (negate) ++j;
        bool in = false;
        while (j < p.size() && p[j] != ']') {
          if (p[j] == '\\' && j + 1 < p.size()) {
            in |= p[j + 1] == s[si];
            j += 2;
          } else if (j + 2 < p.size() && p[j + 1] == '-' && p[j + 2] != ']') {
            char lo = std::min(p[j], p[j + 2]), hi = std::max(p[j], p[j + 2]);
            in |= s[si] >= lo && s[si] <= hi;
            j += 3;
          } else {
            in |= p[j] == s[si];
            ++j;
          }
        }
        matched = in != negate;
        next = j < p.size() ? j + 1 : j;
      } else if (p[pi] == '\\' && pi + 1 < p.size()) {
        matched = p[pi + 1] == s[si];
        next = pi + 2;
      } else {
        matched = p[pi] == s[si];
        next = pi + 1;
      }
    }
    if (matched) {
      pi = next;
      ++si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*')
    ++pi;
  return pi == p.size();
}

}  // namespace kvport::server
