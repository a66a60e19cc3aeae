// SPDX-License-Identifier: Apache-2.0
// The Redis protocol's string commands: GET, SET, SETEX, PSETEX, MGET, MSET, STRLEN and GETDEL,
// which read and write values, each value written checksummed and, where LMCache's pairs fold,
// a `<P>metadata` read from and written into its pair's object (server/resp_chunk_pair.h).
#include <fmt/core.h>

#include <optional>
#include <string>
#include <vector>

#include "common/xxh3.h"
#include "server/resp_chunk_pair.h"
#include "server/resp_command_parts.h"
#include "server/resp_value_capture.h"

namespace kvport::server::resp {

namespace {

// Copies a non-empty `value` to `to` (its reservation) and returns its checksum, hashed chunk by
// chunk from the bytes as received while the copy has them in cache. (An empty value carries
// none, as a kvport client's.)
uint64_t CopyChecksummed(void* to, std::string_view value) {
  return CopyHashing(to, value.data(), value.size(), /*hash=*/true, /*hash_destination=*/false);
}

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

// A key's value as a read found it: a pin of the object holding it, and whether the value is
// that object's metadata (a folded pair's `<P>metadata`: server/resp_chunk_pair.h).
struct PinnedValue {
  store::ReadHandle pin;
  bool in_meta = false;
};

// Finds `key` for a read: nullopt for a miss; other errors are replied and *failed set.
std::optional<PinnedValue> FindOrMiss(Context& c, std::string_view key, bool* failed) {
  std::optional<std::string> folded;
  Result<store::ReadHandle> pin = c.service.Pin(c.grant(), c.ns(), HomeOf(c, key, &folded), false);
  if (pin.ok()) {
    // A version written since the probe without metadata: the pair's metadata is gone.
    if (folded && pin->meta().empty()) return std::nullopt;
    return PinnedValue{std::move(pin).value(), folded.has_value()};
  }
  if (pin.status().code() == StatusCode::kNotFound) return std::nullopt;
  ReplyStatus(c.w, pin.status());
  *failed = true;
  return std::nullopt;
}

// Replies with a value FindOrMiss found.
void ReplyValue(Context& c, PinnedValue&& found) {
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

}  // namespace

void Get(Context& c, Args a) {
  bool failed = false;
  std::optional<PinnedValue> found = FindOrMiss(c, a[1], &failed);
  if (failed) return;
  if (!found) return c.w.Null();
  ReplyValue(c, std::move(*found));
}

void GetDel(Context& c, Args a) {
  bool failed = false;
  std::optional<PinnedValue> found = FindOrMiss(c, a[1], &failed);
  if (failed) return;
  if (!found) return c.w.Null();
  Status deleted = DeleteKey(c, a[1]);
  if (!deleted.ok() && deleted.code() != StatusCode::kNotFound) return ReplyStatus(c.w, deleted);
  ReplyValue(c, std::move(*found));  // the pin keeps the deleted version readable
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
  std::optional<PinnedValue> old;
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
    if (old) return ReplyValue(c, std::move(*old));
    return c.w.Null();
  }
  if (!write) return c.w.Null();
  c.w.Simple("OK");
}

void SetWithExpiry(Context& c, Args a, uint64_t unit_ms) {
  std::optional<uint64_t> ms =
      ExpiryArgument(c, a[2], unit_ms, unit_ms == 1000 ? "setex" : "psetex");
  if (!ms) return;
  Status written = Write(c, a[1], a[3], *ms);
  if (!written.ok()) return ReplyStatus(c.w, written);
  c.w.Simple("OK");
}

// The binary MGET's rules (server/handle_mget.cc): the keys the disk tier holds were brought
// into memory in one batch before the command ran (RespProtocol::WaitForDisk), and an answer
// never carries more value bytes than the node's arena holds (only a key repeated within one
// command can ask for more), else the command is refused whole and the connection goes on.
void MGet(Context& c, Args a) {
  std::vector<std::optional<PinnedValue>> founds;
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
  for (std::optional<PinnedValue>& found : founds) {
    if (found) {
      ReplyValue(c, std::move(*found));
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

void StrLen(Context& c, Args a) {
  std::optional<std::string> folded;
  uint64_t length = 0, meta_length = 0;
  Status s =
      c.service.Exists(c.grant(), c.ns(), HomeOf(c, a[1], &folded), false, &length, &meta_length);
  if (s.code() == StatusCode::kNotFound) return c.w.Integer(0);
  if (!s.ok()) return ReplyStatus(c.w, s);
  c.w.Integer(static_cast<int64_t>(folded ? meta_length : length));
}

}  // namespace kvport::server::resp
