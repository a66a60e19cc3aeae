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
#include <unordered_map>

#include "common/thread_annotations.h"
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

// Aligned so that two shards never share a cache line: threads working in different shards
// touch different lines.
struct alignas(64) IndexShard {
  size_t number = 0;  // its index in the store's shards
  Mutex mu;
  // By index key; the map's key views the object's own index_key (the object leaves the map
  // before it is freed), so a key is held once.
  std::unordered_map<std::string_view, StoredObject*> index GUARDED_BY(mu);
  // Every visible object of a key, whatever its namespace: a chain through
  // StoredObject::same_key_next. The map's key views the key of an object of its chain.
  std::unordered_map<std::string_view, StoredObject*> by_key GUARDED_BY(mu);
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

  // --- a key's chain of namespaces ---
  void ChainAddLocked(StoredObject* o) REQUIRES(mu);
  void ChainRemoveLocked(StoredObject* o) REQUIRES(mu);
};

}  // namespace kvport::store
