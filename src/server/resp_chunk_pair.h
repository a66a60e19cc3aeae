// SPDX-License-Identifier: Apache-2.0
// LMCache's Redis connector stores a chunk as two keys, `<P>kv_bytes` (the chunk) then
// `<P>metadata` (its 28-68-byte RemoteMetadata), and probes and reads `<P>metadata` first. As
// two objects they could be evicted apart, and a metadata without its data is a phantom hit.
// The Redis protocol's front end folds the pair into one object: a plain SET of `<P>metadata`
// while `<P>kv_bytes` is live and has no metadata becomes that object's metadata
// (ObjectStore::AttachMeta), so the pair is evicted, expired, moved to disk and replaced
// together. Every command reading `<P>metadata` finds it there when no plain key of that name
// is live (docs/resp.md, "LMCache's Redis connector").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "server/cache_service.h"

namespace kvport::server {

// The largest metadata folded into its data's object; a longer value is a plain key.
inline constexpr size_t kMaxFoldedMetaBytes = 1024;

// `<P>kv_bytes` for a key `<P>metadata`; empty for any other key.
std::string PairDataKeyOf(std::string_view key);

// The `<P>kv_bytes` whose object holds the value of `key` as its metadata: when `key` is a
// `<P>metadata` with no live plain key of that name and `<P>kv_bytes` holds metadata. nullopt
// otherwise: `key`'s own object holds its value. Probes (counting nothing) only for keys named
// `<P>metadata`; any other key costs a suffix compare.
std::optional<std::string> FoldedHomeOf(CacheService& service, const Grant& grant,
                                        std::string_view ns, std::string_view key);

// Folds `value` as the metadata of `key`'s pair when it can: `key` is a `<P>metadata`, the
// value at most kMaxFoldedMetaBytes and `<P>kv_bytes` live without metadata (or with these
// very bytes). Then a plain key `key` is deleted and the answer is OK. NotFound: not folded
// (the caller writes a plain key); any other error is the reply.
// `waiter`: the session's, for the changes (CacheService::Delete).
Status FoldPairMeta(CacheService& service, const Grant& grant, std::string_view ns,
                    std::string_view key, std::string_view value,
                    const CacheService::Waiter& waiter);

// `<P>metadata` when `data_key` is a `<P>kv_bytes` holding folded metadata and no plain key
// `<P>metadata` is live (which a listing names itself); else empty. What SCAN lists.
std::string FoldedMetaKeyOf(CacheService& service, const Grant& grant, std::string_view ns,
                            std::string_view data_key);

// Deletes `key`, and when it is a folded `<P>metadata`, its pair. OK when anything was deleted.
Status DeleteRespKey(CacheService& service, const Grant& grant, std::string_view ns,
                     std::string_view key, const CacheService::Waiter& waiter);

}  // namespace kvport::server
