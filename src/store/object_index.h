// SPDX-License-Identifier: Apache-2.0
// The object index: 64 shards, each one mutex over the objects whose key hashes to it, with
// their (namespace, key) map, their key chains across namespaces, LRU list, expiry heap,
// namespaces and counters (private to store/).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

// Before abseil, whose legacy thread_annotations.h defines GUARDED_BY and a few more of the same
// names (as the same clang attributes): from a system header its redefinitions are silent.
#include "common/thread_annotations.h"

#include <absl/container/flat_hash_set.h>
#include <absl/hash/hash.h>
#include "store/expiry_heap.h"
#include "store/key_order.h"
#include "store/lru_list.h"
#include "store/stored_object.h"

namespace kvport::store {

inline constexpr size_t kShardCount = 64;

// A key's shard, whatever its namespace (the index key less its namespace): every namespace's
// version of a key is in one shard, so an any-namespace search takes one lock and one probe.
inline size_t ShardIndexOfKey(std::string_view key) {
  return std::hash<std::string_view>{}(key) % kShardCount;
}
inline size_t ShardIndexOf(std::string_view index_key) {
  return ShardIndexOfKey(ObjectIdKey(index_key));
}

// ObjectId for a search: built in this thread's buffer, which keeps its capacity, so that
// looking a key up allocates nothing once the thread has seen a key as long. Valid until the
// thread's next LookupKey.
const std::string& LookupKey(std::string_view ns, std::string_view key);

// Hashes and compares objects by one of their names (index_key or key), and a search by that
// name: a set of objects keyed so holds a pointer per slot, and each name only in its object.
template <std::string_view (StoredObject::*kName)() const>
struct ObjectNameHash {
  using is_transparent = void;
  size_t operator()(std::string_view name) const { return absl::Hash<std::string_view>{}(name); }
  size_t operator()(const StoredObject* o) const { return (*this)((o->*kName)()); }
};
template <std::string_view (StoredObject::*kName)() const>
struct ObjectNameEq {
  using is_transparent = void;
  static std::string_view NameOf(const StoredObject* o) { return (o->*kName)(); }
  static std::string_view NameOf(std::string_view name) { return name; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return NameOf(a) == NameOf(b);
  }
};
// Objects by one of their names, in an open-addressing table (absl's SwissTable): 8 bytes a slot
// and one control byte, where a node-based map costs a node of 48 bytes and a bucket per entry
// (docs/performance.md, "Memory per object"). Holds at most one object per name.
template <std::string_view (StoredObject::*kName)() const>
using ObjectsByName =
    absl::flat_hash_set<StoredObject*, ObjectNameHash<kName>, ObjectNameEq<kName>>;

// Aligned so that two shards never share a cache line: threads working in different shards
// touch different lines.
struct alignas(64) IndexShard {
  size_t number = 0;  // its index in the store's shards
  Mutex mu;
  // The visible objects by index key (the object leaves the set before it is freed).
  ObjectsByName<&StoredObject::index_key> index GUARDED_BY(mu);
  // Every visible object of a key, whatever its namespace: the set holds the head of each key's
  // chain through StoredObject::same_key_next.
  ObjectsByName<&StoredObject::key> by_key GUARDED_BY(mu);
  // The visible objects with a TTL, a min-heap by expires_at_ms (each knows its slot), so
  // that Sweep visits what expired, not the whole index.
  ExpiryHeap expiry GUARDED_BY(mu);
  LruList lru GUARDED_BY(mu);
  ShardNamespaces namespaces GUARDED_BY(mu);
  // This shard's part of StoreStats: written under mu where they describe visible objects,
  // atomically elsewhere; Stats() sums them without taking any lock.
  std::atomic<uint64_t> objects{0}, value_bytes{0}, visible_alloc_bytes{0};
  std::atomic<uint64_t> hits{0}, misses{0}, evictions{0}, expirations{0};
  std::atomic<uint64_t> live_objects{0};  // allocated StoredObjects of this shard, any state

  // Puts `o` in the index, in place of the object of its index key if there is one; returns
  // that object or null.
  StoredObject* IndexReplaceLocked(StoredObject* o) REQUIRES(mu);

  // --- a key's chain of namespaces ---
  void ChainAddLocked(StoredObject* o) REQUIRES(mu);
  void ChainRemoveLocked(StoredObject* o) REQUIRES(mu);
};

}  // namespace kvport::store
