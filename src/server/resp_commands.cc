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

#include "common/xxh3.h"
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
  // Whether LMCache's key pairs fold here (docs/resp.md): asked for by the namespace's setting or
  // by the client; plain Redis keys otherwise.
  bool folds() const { return client.folds_pairs || service.FoldsRespPairs(client.ns); }
};

// Copies a non-empty `value` to `to` (its reservation) and returns its checksum, hashed chunk by
// chunk from the bytes as received while the copy has them in cache. (An empty value carries
// none, as a kvport client's.)
uint64_t CopyChecksummed(void* to, std::string_view value) {
  return CopyHashing(to, value.data(), value.size(), /*hash=*/true, /*hash_destination=*/false);
}

// The largest TTL a write can carry (the store's whole seconds, 32 bits).
constexpr uint64_t kMaxTtlMs = uint64_t{UINT32_MAX} * 1000;

// Writes `value` as (ns, key) with `ttl_ms` (0: none): reserved whole, copied, committed; or,
// when it is the value the session read into its reservation, that reservation committed.
// Either way with the value's checksum (the copy hashes each chunk as it copies it), so that a
// kvport client reading the key checks the bytes the Redis client sent.
Status Write(Context& c, std::string_view key, std::string_view value, uint64_t ttl_ms) {
  const uint32_t ttl_seconds =
      ttl_ms == 0 ? store::kNoExpiry : static_cast<uint32_t>((ttl_ms + 999) / 1000);
  if (c.captured != nullptr && c.captured->Holds(value)) {
    KVPORT_RETURN_IF_ERROR(c.captured->Commit(ttl_seconds));
  } else {
    KVPORT_ASSIGN_OR_RETURN(
        store::WriteHandle handle,
        c.service.Reserve(c.grant(), c.ns(), key, value.size(), "", ttl_seconds));
    if (!value.empty()) handle.SetChecksum(CopyChecksummed(handle.data(), value));
    KVPORT_RETURN_IF_ERROR(c.service.Commit(std::move(handle), c.client.durability));
  }
  // Whole seconds above; a PX of a fraction of a second is set exactly now.
  if (ttl_ms % 1000 != 0) {
    (void)c.service.SetExpiry(c.grant(), c.ns(), key, ttl_ms, c.client.durability);
  }
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
  if (!c.folds()) {
    folded->reset();
    return key;
  }
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
  if (ttl_ms == 0 && c.folds()) {
    Status folded = FoldPairMeta(c.service, c.grant(), c.ns(), key, value, c.client.durability);
    if (folded.code() != StatusCode::kNotFound) return folded;
  }
  return Write(c, key, value, ttl_ms);
}

// Deletes `key`: with folding, a folded `<P>metadata` takes its pair along.
Status DeleteKey(Context& c, std::string_view key) {
  if (c.folds()) return DeleteRespKey(c.service, c.grant(), c.ns(), key, c.client.durability);
  return c.service.Delete(c.grant(), c.ns(), key, /*any_namespace=*/false, c.client.durability);
}

// --- connection -----------------------------------------------------------------------------

void Ping(Context& c, Args a) {
  if (a.size() > 2) return WrongArity(c.w, a[0]);  // the table says "at least 1"
  if (a.size() == 2) return c.w.Bulk(a[1]);
  c.w.Simple("PONG");
}

void Echo(Context& c, Args a) {
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

// Whether a client or library name is LMCache's ("lmcache", "LMCache-redis", ...): such a client
// stores its chunks as folded pairs.
bool NamesLMCache(std::string_view name) {
  return name.size() >= 7 && ArgIs(name.substr(0, 7), "LMCACHE");
}

void SetClientName(RespClient& client, std::string_view name) {
  client.name.assign(name);
  if (NamesLMCache(name)) client.folds_pairs = true;
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

void ClientSetName(Context& c, Args a) {
  if (a[2].find_first_of(" \n\r") != std::string_view::npos) {
    return c.w.Error("ERR Client names cannot contain spaces, newlines or special characters.");
  }
  SetClientName(c.client, a[2]);
  c.w.Simple("OK");
}

void ClientGetName(Context& c, Args) {
  if (c.client.name.empty()) return c.w.Null();
  c.w.Bulk(c.client.name);
}

void ClientId(Context& c, Args) {
  c.w.Integer(static_cast<int64_t>(c.client.id));
}

void ClientNamespace(Context& c, Args a) {
  if (a.size() > 3) return WrongArity(c.w, "client|namespace");
  if (a.size() == 2) return c.w.Bulk(c.client.ns);
  if (!c.grant().may_read(a[2]) && !c.grant().may_write(a[2])) {
    return c.w.Error(
        fmt::format("NOPERM token '{}' may not use namespace '{}'", c.grant().name(), a[2]));
  }
  c.client.ns.assign(a[2]);
  c.w.Simple("OK");
}

// redis-py and others announce their library: kept only to tell LMCache (NamesLMCache).
void ClientSetInfo(Context& c, Args a) {
  if (ArgIs(a[2], "LIB-NAME") && NamesLMCache(a[3])) c.client.folds_pairs = true;
  c.w.Simple("OK");
}

void Select(Context& c, Args a) {
  std::optional<int64_t> db = ParseInteger(a[1]);
  if (!db) return NotInteger(c.w);
  if (*db != 0) return c.w.Error("ERR DB index is out of range");
  c.w.Simple("OK");
}

// --- strings ----------------------------------------------------------------------------------

void Get(Context& c, Args a) {
  bool failed = false;
  std::optional<Found> found = FindOrMiss(c, a[1], &failed);
  if (failed) return;
  if (!found) return c.w.Null();
  ReplyFound(c, std::move(*found));
}

void GetDel(Context& c, Args a) {
  bool failed = false;
  std::optional<Found> found = FindOrMiss(c, a[1], &failed);
  if (failed) return;
  if (!found) return c.w.Null();
  Status deleted = DeleteKey(c, a[1]);
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
  std::optional<uint64_t> ms =
      ExpiryArgument(c, a[2], unit_ms, unit_ms == 1000 ? "setex" : "psetex");
  if (!ms) return;
  Status written = Write(c, a[1], a[3], *ms);
  if (!written.ok()) return ReplyStatus(c.w, written);
  c.w.Simple("OK");
}

// The binary MGET's rules (server/handle_mget.cc): the keys the disk tier holds are read in one
// batch ahead of the pins, and an answer never carries more value bytes than the node's arena
// holds (only a key repeated within one command can ask for more), else the command is refused
// whole and the connection goes on.
void MGet(Context& c, Args a) {
  if (c.service.has_disk()) {
    std::vector<std::optional<std::string>> folded(a.size() - 1);
    std::vector<std::string_view> homes(a.size() - 1);
    for (size_t i = 1; i < a.size(); ++i)
      homes[i - 1] = HomeOf(c, a[i], &folded[i - 1]);
    c.service.PromoteAhead(c.grant(), c.ns(), false, homes);
  }
  std::vector<std::optional<Found>> founds;
  founds.reserve(a.size() - 1);
  const uint64_t answer_limit = c.service.arena_bytes();
  uint64_t answer_bytes = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    bool failed = false;
    founds.push_back(FindOrMiss(c, a[i], &failed));
    if (failed) return;
    if (founds.back() && !founds.back()->in_meta) answer_bytes += founds.back()->pin.size();
  }
  if (answer_bytes > answer_limit) {
    return ReplyStatus(c.w, Status::TooLarge(fmt::format(
                                "an MGET answer of {} value bytes is more than the node holds "
                                "({}): a key is repeated in the command",
                                answer_bytes, answer_limit)));
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
  if (a.size() % 2 != 1) return WrongArity(c.w, a[0]);
  // Every item reserved before any is committed: a refusal leaves none of them written.
  WriteBatch batch(&c.service, c.client.access.shared_grant(), /*stepwise=*/false,
                   c.client.durability);
  for (size_t i = 1; i < a.size(); i += 2) {
    batch.Reserve(c.ns(), a[i], a[i + 1].size(), "", store::kNoExpiry);
    const size_t item = batch.size() - 1;
    if (batch.status(item) != StatusCode::kOk) {
      return ReplyStatus(
          c.w, Status(batch.status(item), fmt::format("MSET of key #{} refused", item + 1)));
    }
    if (!a[i + 1].empty())
      batch.SetChecksum(item, CopyChecksummed(batch.destination(item), a[i + 1]));
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
  int64_t count = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    Status s = DeleteKey(c, a[i]);
    if (s.ok()) {
      ++count;
    } else if (s.code() != StatusCode::kNotFound) {
      return ReplyStatus(c.w, s);
    }
  }
  c.w.Integer(count);
}

void StrLen(Context& c, Args a) {
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
  if (a.size() > 4) return WrongArity(c.w, a[0]);
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
    Status s = DeleteKey(c, a[1]);
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
  Status s = c.service.SetExpiry(c.grant(), c.ns(), key, ttl_ms, c.client.durability);
  if (s.code() == StatusCode::kNotFound) return c.w.Integer(0);
  if (!s.ok()) return ReplyStatus(c.w, s);
  c.w.Integer(1);
}

void Ttl(Context& c, Args a, bool millis) {
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
  // A folded `<P>metadata` lives, and expires, with its pair.
  std::optional<std::string> folded;
  const std::string_view key = HomeOf(c, a[1], &folded);
  Result<uint64_t> left = c.service.TimeToLive(c.grant(), c.ns(), key);
  if (!left.ok()) {
    if (left.status().code() == StatusCode::kNotFound) return c.w.Integer(0);
    return ReplyStatus(c.w, left.status());
  }
  if (*left == 0) return c.w.Integer(0);
  Status s = c.service.SetExpiry(c.grant(), c.ns(), key, 0, c.client.durability);
  if (s.code() == StatusCode::kNotFound) return c.w.Integer(0);
  if (!s.ok()) return ReplyStatus(c.w, s);
  c.w.Integer(1);
}

// --- keyspace ---------------------------------------------------------------------------------

void Scan(Context& c, Args a) {
  // Cursors are the node's 64-bit LIST cursors: unsigned, all 64 bits.
  std::optional<uint64_t> cursor = ParseCursor(a[1]);
  if (!cursor) return c.w.Error("ERR invalid cursor");
  std::optional<std::string_view> match;
  int64_t count = 10;
  for (size_t i = 2; i < a.size(); ++i) {
    if (ArgIs(a[i], "MATCH") && i + 1 < a.size()) {
      match = a[++i];
      if (match->size() > RespGlob::kMaxPatternBytes) {
        return c.w.Error(
            fmt::format("ERR MATCH pattern of {} bytes is longer than {} (docs/resp.md)",
                        match->size(), RespGlob::kMaxPatternBytes));
      }
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
  std::optional<RespGlob> glob;
  if (match && *match != "*") glob.emplace(*match);
  auto add = [&](std::string key) {
    if (!glob || glob->Match(key)) keys.push_back(std::move(key));
  };
  for (std::string& key : page->keys) {
    // A folded pair is two keys to a Redis client: its `<P>metadata` comes with its data.
    std::string meta_key = c.folds() ? FoldedMetaKeyOf(c.service, c.grant(), c.ns(), key) : "";
    add(std::move(key));
    if (!meta_key.empty()) add(std::move(meta_key));
  }
  c.w.Array(2);
  c.w.Bulk(std::to_string(page->next_cursor));
  c.w.Array(keys.size());
  for (const std::string& key : keys)
    c.w.Bulk(key);
}

void DbSize(Context& c, Args) {
  Result<uint64_t> keys = c.service.KeysIn(c.grant(), c.ns());
  if (!keys.ok()) return ReplyStatus(c.w, keys.status());
  c.w.Integer(static_cast<int64_t>(*keys));
}

void FlushDb(Context& c, Args a) {
  if (a.size() > 2 || (a.size() == 2 && !ArgIs(a[1], "ASYNC") && !ArgIs(a[1], "SYNC"))) {
    return SyntaxError(c.w);
  }
  Result<uint64_t> deleted = c.service.DeleteNamespace(c.grant(), c.ns(), c.client.durability);
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
  const ServerStats stats = c.service.Counters();
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
    Result<uint64_t> counted = c.service.KeysIn(c.grant(), c.ns());
    const uint64_t keys = counted.ok() ? *counted : 0;  // a namespace it may not read: none
    if (keys > 0) line("db0", fmt::format("keys={},expires=0,avg_ttl=0", keys));
    text += "\r\n";
  }
  c.w.Verbatim("txt", text);
}

struct ConfigValue {
  std::string_view name;
  std::string value;
};

void ConfigGet(Context& c, Args a) {
  const ServerStats stats = c.service.Counters();
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
  std::vector<RespGlob> patterns;
  std::vector<std::string> uppers;  // the globs view them
  uppers.reserve(a.size() - 2);
  for (size_t i = 2; i < a.size(); ++i) {
    if (a[i].size() > RespGlob::kMaxPatternBytes) {
      return c.w.Error(fmt::format("ERR pattern of {} bytes is longer than {} (docs/resp.md)",
                                   a[i].size(), RespGlob::kMaxPatternBytes));
    }
    patterns.emplace_back(uppers.emplace_back(Upper(a[i])));
  }
  std::vector<const ConfigValue*> found;
  for (const ConfigValue& v : values) {
    for (const RespGlob& pattern : patterns) {
      if (pattern.Match(Upper(v.name))) {
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
void CommandCount(Context& c, Args a);
void CommandDocs(Context& c, Args a);
void CommandInfo(Context& c, Args a);
void CommandGetKeys(Context& c, Args a);
void CommandList(Context& c, Args a);

void Quit(Context& c, Args) {
  c.client.quit = true;
  c.w.Simple("OK");
}

// What the dispatcher checks before a command runs, and what COMMAND tells clients (Redis's
// flag names). Access is the connection's namespace's: kWrite needs write of it, kReadonly read
// of it (or admin, as for LIST and STATS), kAdmin an admin token.
enum Flag : uint32_t {
  kWrite = 1 << 0,
  kReadonly = 1 << 1,
  kAdmin = 1 << 2,
  kNoAuth = 1 << 3,  // served before AUTH on a node with tokens
  kDenyOom = 1 << 4,
  kFast = 1 << 5,
  kLoading = 1 << 6,
  kStale = 1 << 7,
  kNoScript = 1 << 8,
  kAllowBusy = 1 << 9,
};
constexpr std::pair<Flag, std::string_view> kFlagNames[] = {
    {kWrite, "write"},          {kReadonly, "readonly"}, {kAdmin, "admin"},
    {kNoAuth, "no_auth"},       {kDenyOom, "denyoom"},   {kFast, "fast"},
    {kLoading, "loading"},      {kStale, "stale"},       {kNoScript, "noscript"},
    {kAllowBusy, "allow_busy"},
};

struct Command {
  std::string_view name;  // upper case; a subcommand's own word ("SETNAME")
  void (*run)(Context& c, Args a);
  // Redis's convention: N, exactly N arguments (the name included); -N, at least N. A
  // subcommand counts its container's name too (CLIENT SETNAME name: 3).
  int arity;
  uint32_t flags;
  // The keys: arguments first_key..last_key (negative: counted from the end, -1 the last)
  // every `step`; 0 0 0 for none.
  int first_key = 0, last_key = 0, step = 0;
  std::string_view acl = "";  // Redis's ACL categories, blank-separated
  // A container's (CLIENT, CONFIG, COMMAND) subcommands, each checked as a command of its own.
  const Command* subs = nullptr;
  size_t sub_count = 0;
  std::span<const Command> subcommands() const { return {subs, sub_count}; }
};

constexpr uint32_t kConnection = kNoScript | kLoading | kStale | kFast;
constexpr Command kClientSubcommands[] = {
    {"SETNAME", ClientSetName, 3, kConnection, 0, 0, 0, "@slow @connection"},
    {"GETNAME", ClientGetName, 2, kConnection, 0, 0, 0, "@slow @connection"},
    {"ID", ClientId, 2, kConnection, 0, 0, 0, "@slow @connection"},
    {"SETINFO", ClientSetInfo, 4, kConnection, 0, 0, 0, "@slow @connection"},
    {"NAMESPACE", ClientNamespace, -2, kConnection, 0, 0, 0, "@slow @connection"},
};
constexpr Command kCommandSubcommands[] = {
    {"COUNT", CommandCount, 2, kLoading | kStale, 0, 0, 0, "@slow @connection"},
    {"DOCS", CommandDocs, -2, kLoading | kStale, 0, 0, 0, "@slow @connection"},
    {"INFO", CommandInfo, -2, kLoading | kStale, 0, 0, 0, "@slow @connection"},
    {"GETKEYS", CommandGetKeys, -3, kLoading | kStale, 0, 0, 0, "@slow @connection"},
    {"LIST", CommandList, -2, kLoading | kStale, 0, 0, 0, "@slow @connection"},
};
// CONFIG GET is not admin here (Redis's is): redis-benchmark asks it of any token at start,
// and it tells nothing a client could not learn from INFO.
constexpr Command kConfigSubcommands[] = {
    {"GET", ConfigGet, -3, kNoScript | kLoading | kStale, 0, 0, 0, "@slow"},
};

// The RESP commands, in the order of their counters' slots (ServerCounters::RecordRespCommand).
// clang-format off
constexpr Command kCommands[] = {
    {"PING", Ping, -1, kFast, 0, 0, 0, "@fast @connection"},
    {"ECHO", Echo, 2, kFast, 0, 0, 0, "@fast @connection"},
    {"HELLO", Hello, -1, kConnection | kNoAuth | kAllowBusy, 0, 0, 0, "@fast @connection"},
    {"AUTH", Auth, -2, kConnection | kNoAuth | kAllowBusy, 0, 0, 0, "@fast @connection"},
    {"CLIENT", nullptr, -2, 0, 0, 0, 0, "", kClientSubcommands, std::size(kClientSubcommands)},
    {"SELECT", Select, 2, kLoading | kStale | kFast, 0, 0, 0, "@fast @connection"},
    {"GET", Get, 2, kReadonly | kFast, 1, 1, 1, "@read @string @fast"},
    {"SET", SetCommand, -3, kWrite | kDenyOom, 1, 1, 1, "@write @string @slow"},
    {"SETEX", [](Context& c, Args a) { SetWithExpiry(c, a, 1000); }, 4, kWrite | kDenyOom, 1, 1, 1,
     "@write @string @slow"},
    {"PSETEX", [](Context& c, Args a) { SetWithExpiry(c, a, 1); }, 4, kWrite | kDenyOom, 1, 1, 1,
     "@write @string @slow"},
    {"MGET", MGet, -2, kReadonly | kFast, 1, -1, 1, "@read @string @fast"},
    {"MSET", MSet, -3, kWrite | kDenyOom, 1, -1, 2, "@write @string @slow"},
    {"EXISTS", Exists, -2, kReadonly | kFast, 1, -1, 1, "@keyspace @read @fast"},
    {"DEL", Del, -2, kWrite, 1, -1, 1, "@keyspace @write @slow"},
    {"UNLINK", Del, -2, kWrite | kFast, 1, -1, 1, "@keyspace @write @fast"},
    {"EXPIRE", [](Context& c, Args a) { Expire(c, a, 1000); }, -3, kWrite | kFast, 1, 1, 1,
     "@keyspace @write @fast"},
    {"PEXPIRE", [](Context& c, Args a) { Expire(c, a, 1); }, -3, kWrite | kFast, 1, 1, 1,
     "@keyspace @write @fast"},
    {"TTL", [](Context& c, Args a) { Ttl(c, a, false); }, 2, kReadonly | kFast, 1, 1, 1,
     "@keyspace @read @fast"},
    {"PTTL", [](Context& c, Args a) { Ttl(c, a, true); }, 2, kReadonly | kFast, 1, 1, 1,
     "@keyspace @read @fast"},
    {"PERSIST", Persist, 2, kWrite | kFast, 1, 1, 1, "@keyspace @write @fast"},
    {"STRLEN", StrLen, 2, kReadonly | kFast, 1, 1, 1, "@read @string @fast"},
    {"GETDEL", GetDel, 2, kWrite | kFast, 1, 1, 1, "@write @string @fast"},
    {"SCAN", Scan, -2, kReadonly, 0, 0, 0, "@keyspace @read @slow"},
    {"DBSIZE", DbSize, 1, kReadonly | kFast, 0, 0, 0, "@keyspace @read @fast"},
    {"INFO", Info, -1, kLoading | kStale, 0, 0, 0, "@slow @dangerous"},
    {"COMMAND", CommandCommand, -1, kLoading | kStale, 0, 0, 0, "@slow @connection",
     kCommandSubcommands, std::size(kCommandSubcommands)},
    {"CONFIG", nullptr, -2, 0, 0, 0, 0, "", kConfigSubcommands, std::size(kConfigSubcommands)},
    {"QUIT", Quit, -1, kConnection | kNoAuth | kAllowBusy, 0, 0, 0, "@fast @connection"},
    // kvport deletes a namespace for an admin token only (docs/security.md).
    {"FLUSHDB", FlushDb, -1, kWrite | kAdmin, 0, 0, 0, "@keyspace @write @slow @dangerous"},
};
// clang-format on
static_assert(std::size(kCommands) <= ServerCounters::kRespCommandSlots,
              "each RESP command has a slot in the node's counters");

const Command* FindIn(std::span<const Command> table, std::string_view name) {
  for (const Command& candidate : table) {
    if (ArgIs(name, candidate.name)) return &candidate;
  }
  return nullptr;
}

std::string Lower(std::string_view text) {
  std::string lower(text);
  for (char& ch : lower)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower;
}

// Redis's cmdstat lines: calls, usec (the time spent running it), usec_per_call, rejected_calls
// (always 0: a command refused before it runs, as NOAUTH, is not counted) and failed_calls (its
// error replies).
void AppendCommandStats(Context& c, std::string* text) {
  *text += "# Commandstats\r\n";
  for (size_t slot = 0; slot < std::size(kCommands); ++slot) {
    const ServerCounters::RespCommandCounts counts = c.service.counters().RespCommand(slot);
    if (counts.calls == 0) continue;
    const double usec = static_cast<double>(counts.sum_ns) / 1e3;
    *text += fmt::format(
        "cmdstat_{}:calls={},usec={:.0f},usec_per_call={:.2f},rejected_calls=0,failed_calls={}"
        "\r\n",
        Lower(kCommands[slot].name), counts.calls, usec, usec / static_cast<double>(counts.calls),
        counts.errors);
  }
  *text += "\r\n";
}

// One command's COMMAND INFO entry, as Redis 7 writes it: name, arity, flags, first key, last
// key, step, ACL categories, tips, key specifications, subcommands. `container`: the name of the
// command a subcommand belongs to ("client|setname").
void WriteCommandInfo(RespWriter& w, const Command& command, std::string_view container = {}) {
  w.Array(10);
  w.Bulk(container.empty() ? Lower(command.name) : Lower(container) + "|" + Lower(command.name));
  w.Integer(command.arity);
  size_t flags = 0;
  for (const auto& [flag, name] : kFlagNames)
    flags += (command.flags & flag) != 0 ? 1 : 0;
  w.Set(flags);
  for (const auto& [flag, name] : kFlagNames) {
    if ((command.flags & flag) != 0) w.Simple(name);
  }
  w.Integer(command.first_key);
  w.Integer(command.last_key);
  w.Integer(command.step);
  std::vector<std::string_view> categories;
  for (std::string_view rest = command.acl; !rest.empty();) {
    const size_t blank = rest.find(' ');
    categories.push_back(rest.substr(0, blank));
    rest = blank == std::string_view::npos ? std::string_view() : rest.substr(blank + 1);
  }
  w.Set(categories.size());
  for (std::string_view category : categories)
    w.Simple(category);
  w.Array(0);  // tips
  // One key specification: the range first..last every step, as Redis gives for such commands
  // (find_keys' lastkey counts from the first key when not negative).
  if (command.first_key == 0) {
    w.Array(0);
  } else {
    w.Array(1);
    w.Map(3);
    w.Bulk("flags");
    w.Set(1);
    w.Simple((command.flags & kWrite) != 0 ? "RW" : "RO");
    w.Bulk("begin_search");
    w.Map(2);
    w.Bulk("type");
    w.Bulk("index");
    w.Bulk("spec");
    w.Map(1);
    w.Bulk("index");
    w.Integer(command.first_key);
    w.Bulk("find_keys");
    w.Map(2);
    w.Bulk("type");
    w.Bulk("range");
    w.Bulk("spec");
    w.Map(3);
    w.Bulk("lastkey");
    w.Integer(command.last_key < 0 ? command.last_key : command.last_key - command.first_key);
    w.Bulk("keystep");
    w.Integer(command.step);
    w.Bulk("limit");
    w.Integer(0);
  }
  w.Array(command.sub_count);
  for (const Command& sub : command.subcommands())
    WriteCommandInfo(w, sub, command.name);
}

// COMMAND: every command's entry (what cluster-aware clients read at start to find keys).
void CommandCommand(Context& c, Args) {
  c.w.Array(std::size(kCommands));
  for (const Command& command : kCommands)
    WriteCommandInfo(c.w, command);
}

void CommandCount(Context& c, Args) {
  c.w.Integer(static_cast<int64_t>(std::size(kCommands)));
}

// COMMAND DOCS: an empty map (no documentation is served; clients then show no hints).
void CommandDocs(Context& c, Args) {
  c.w.Map(0);
}

// COMMAND INFO [name...]: each named command's entry, null for a name not served ("client|id"
// names a subcommand); every command without a name.
void CommandInfo(Context& c, Args a) {
  if (a.size() == 2) return CommandCommand(c, a);
  c.w.Array(a.size() - 2);
  for (size_t i = 2; i < a.size(); ++i) {
    const size_t bar = a[i].find('|');
    const Command* command = FindIn(kCommands, a[i].substr(0, bar));
    if (command != nullptr && bar != std::string_view::npos) {
      const Command* sub = FindIn(command->subcommands(), a[i].substr(bar + 1));
      if (sub == nullptr) {
        c.w.NullArray();
        continue;
      }
      WriteCommandInfo(c.w, *sub, command->name);
      continue;
    }
    if (command == nullptr) {
      c.w.NullArray();
      continue;
    }
    WriteCommandInfo(c.w, *command);
  }
}

// COMMAND LIST: the names of the commands served (no FILTERBY: every one).
void CommandList(Context& c, Args a) {
  if (a.size() > 2) return c.w.Error("ERR COMMAND LIST FILTERBY is not supported by kvport");
  c.w.Array(std::size(kCommands));
  for (const Command& command : kCommands)
    c.w.Bulk(Lower(command.name));
}

// Whether `arity` (Redis's convention) admits `count` arguments.
bool ArityAdmits(int arity, size_t count) {
  return arity >= 0 ? count == static_cast<size_t>(arity)
                    : count >= static_cast<size_t>(-static_cast<int64_t>(arity));
}

// The positions of the keys among `args` (args[0] the command's name) by the table's key
// positions, or nullopt when the command takes none.
std::optional<std::vector<size_t>> KeyPositions(const Command& command, size_t count) {
  if (command.first_key == 0 || count <= static_cast<size_t>(command.first_key)) {
    return std::nullopt;
  }
  const int64_t last =
      command.last_key < 0 ? static_cast<int64_t>(count) + command.last_key : command.last_key;
  std::vector<size_t> positions;
  for (int64_t i = command.first_key; i <= last && i < static_cast<int64_t>(count);
       i += command.step) {
    positions.push_back(static_cast<size_t>(i));
  }
  return positions;
}

// COMMAND GETKEYS command arg...: the keys the command would act on, by the table.
void CommandGetKeys(Context& c, Args a) {
  Args command_args = a.subspan(2);
  const Command* command = FindIn(kCommands, command_args[0]);
  if (command != nullptr && !command->subcommands().empty() && command_args.size() >= 2) {
    command = FindIn(command->subcommands(), command_args[1]);
  }
  if (command == nullptr) return c.w.Error("ERR Invalid command specified");
  if (!ArityAdmits(command->arity, command_args.size())) {
    return c.w.Error("ERR Invalid number of arguments specified for command");
  }
  std::optional<std::vector<size_t>> positions = KeyPositions(*command, command_args.size());
  if (!positions) return c.w.Error("ERR The command has no key arguments");
  c.w.Array(positions->size());
  for (size_t i : *positions)
    c.w.Bulk(command_args[i]);
}

// The access a command needs on the connection's namespace, checked before it runs: its
// refusal, or OK. The service checks again on every store access (the one authority); this
// refuses a command whole before any of its work, with one message per right.
Status CheckAccess(const Context& c, const Command& command) {
  // A client that has not authenticated runs only the commands that need no access (the
  // dispatcher answered NOAUTH to the others), and holds no grant to look at.
  if ((command.flags & (kAdmin | kWrite | kReadonly)) == 0 || !c.client.access.authenticated()) {
    return Status::Ok();
  }
  const Grant& grant = c.grant();
  auto denied = [&](std::string_view right) {
    return Status::PermissionDenied(
        fmt::format("token '{}' may not {} namespace '{}'", grant.name(), right, c.ns()));
  };
  if ((command.flags & kAdmin) != 0 && !grant.admin()) {
    return Status::PermissionDenied(fmt::format(
        "token '{}' may not run {}: it needs an admin token", grant.name(), command.name));
  }
  if ((command.flags & kWrite) != 0 && !grant.may_write(c.ns())) return denied("write");
  if ((command.flags & kReadonly) != 0 && !grant.may_read(c.ns()) && !grant.admin()) {
    return denied("read");
  }
  return Status::Ok();
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

std::vector<std::string> KeysItReads(CacheService& service, const RespClient& client, Args args) {
  std::vector<std::string> keys;
  if (args.empty()) return keys;
  const Command* command = FindIn(kCommands, args[0]);
  if (command == nullptr || !ArityAdmits(command->arity, args.size())) return keys;
  // Writes of whole values, deletes and probes read no value.
  for (std::string_view blind : {"SET", "SETEX", "PSETEX", "MSET", "DEL", "UNLINK", "EXISTS"}) {
    if (command->name == blind) return keys;
  }
  std::optional<std::vector<size_t>> positions = KeyPositions(*command, args.size());
  if (!positions) return keys;
  const bool folds = client.folds_pairs || service.FoldsRespPairs(client.ns);
  for (size_t i : *positions) {
    keys.emplace_back(args[i]);
    if (std::string pair = folds ? PairDataKeyOf(args[i]) : std::string(); !pair.empty()) {
      keys.push_back(std::move(pair));
    }
  }
  return keys;
}

bool RunRespCommand(CacheService& service, RespClient& client, Args args, RespOutput& out,
                    RespValueCapture* captured) {
  RespWriter w(&out.text(), client.version);
  if (args.empty()) return false;
  const Command* command = FindIn(kCommands, args[0]);
  if (command == nullptr) {
    std::string shown(args[0].substr(0, 128));
    for (char& ch : shown)
      if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
    w.Error(fmt::format("ERR unknown command '{}', with args beginning with: ", shown));
    return true;
  }
  if (!client.access.authenticated() && (command->flags & kNoAuth) == 0) {
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
  // The table's checks, in Redis's order: the subcommand, the arity, then the access; a refusal
  // is the command's (failed) reply.
  const Command* runs = command;
  if (!command->subcommands().empty() && (args.size() >= 2 || command->run == nullptr)) {
    runs = args.size() >= 2 ? FindIn(command->subcommands(), args[1]) : nullptr;
    if (runs == nullptr && args.size() >= 2) {
      w.Error(fmt::format("ERR unknown subcommand '{}'. Try {} HELP.", args[1].substr(0, 128),
                          command->name));
    } else if (runs == nullptr) {
      WrongArity(w, command->name);
    }
  }
  if (runs != nullptr) {
    if (!ArityAdmits(runs->arity, args.size())) {
      WrongArity(w, runs == command ? std::string(command->name)
                                    : fmt::format("{}|{}", command->name, runs->name));
    } else if (Status access = CheckAccess(c, *runs); !access.ok()) {
      ReplyStatus(w, access);
    } else {
      runs->run(c, args);
    }
  }
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  // An error reply starts with '-' (a value sent from the arena never comes first).
  const bool error = out.text().size() > before && out.text()[before] == '-';
  service.counters().RecordRespCommand(static_cast<size_t>(command - kCommands), &command->name,
                                       error, static_cast<uint64_t>(ns));
  return error;
}

}  // namespace kvport::server
