// SPDX-License-Identifier: Apache-2.0
// The Redis protocol's keyspace commands: EXISTS, DEL, UNLINK, EXPIRE, PEXPIRE, TTL, PTTL,
// PERSIST, SCAN, DBSIZE and FLUSHDB, which probe, delete, list and time keys without reading
// their values.
#include <fmt/core.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "server/resp_chunk_pair.h"
#include "server/resp_command_parts.h"
#include "server/resp_glob.h"

namespace kvport::server::resp {

namespace {

// A SCAN cursor argument: unsigned decimal digits fitting 64 bits.
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

// `key`'s TTL in ms (0: none), read where it lives: its home (HomeOf, kept in *home and
// *folded), as a folded `<P>metadata` lives, and expires, with its pair. nullopt once replied:
// `missing` for a key that is not there, the refusal otherwise.
std::optional<uint64_t> TimeToLiveOrReply(Context& c, std::string_view key, int64_t missing,
                                          std::optional<std::string>* folded,
                                          std::string_view* home) {
  *home = HomeOf(c, key, folded);
  Result<uint64_t> left = c.service.TimeToLive(c.grant(), c.ns(), *home);
  if (left.ok()) return *left;
  if (left.status().code() == StatusCode::kNotFound) {
    c.w.Integer(missing);
  } else {
    ReplyStatus(c.w, left.status());
  }
  return std::nullopt;
}

// Sets the expiry of `home` (a key's home) to `ttl_ms` (0: none) and replies 1, or 0 when the
// key has gone since.
void SetExpiryAndReply(Context& c, std::string_view home, uint64_t ttl_ms) {
  Status s = c.service.SetExpiry(c.grant(), c.ns(), home, ttl_ms, c.client.durability);
  if (s.code() == StatusCode::kNotFound) return c.w.Integer(0);
  if (!s.ok()) return ReplyStatus(c.w, s);
  c.w.Integer(1);
}

}  // namespace

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

void Expire(Context& c, Args a, uint64_t unit_ms) {
  if (a.size() > 4) return WrongArity(c.w, a[0]);
  std::optional<int64_t> v = ParseInteger(a[2]);
  if (!v) return NotInteger(c.w);
  std::string_view option = a.size() == 4 ? a[3] : std::string_view();
  if (!option.empty() && !ArgIs(option, "NX") && !ArgIs(option, "XX") && !ArgIs(option, "GT") &&
      !ArgIs(option, "LT")) {
    return c.w.Error(fmt::format("ERR Unsupported option {}", option));
  }
  std::optional<std::string> folded;
  std::string_view key;
  std::optional<uint64_t> left = TimeToLiveOrReply(c, a[1], 0, &folded, &key);
  if (!left) return;
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
  SetExpiryAndReply(c, key, ttl_ms);
}

void Ttl(Context& c, Args a, bool millis) {
  std::optional<std::string> folded;
  std::string_view key;
  std::optional<uint64_t> left = TimeToLiveOrReply(c, a[1], -2, &folded, &key);
  if (!left) return;
  if (*left == 0) return c.w.Integer(-1);
  c.w.Integer(static_cast<int64_t>(millis ? *left : (*left + 500) / 1000));
}

void Persist(Context& c, Args a) {
  std::optional<std::string> folded;
  std::string_view key;
  std::optional<uint64_t> left = TimeToLiveOrReply(c, a[1], 0, &folded, &key);
  if (!left) return;
  if (*left == 0) return c.w.Integer(0);
  SetExpiryAndReply(c, key, 0);
}

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

}  // namespace kvport::server::resp
