// SPDX-License-Identifier: Apache-2.0
// StoredObject: one version of one object of the ObjectStore, with the links by which its
// shard's index, LRU list, key chain and expiry heap hold it (private to store/).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "store/extent_allocator.h"
#include "store/object_id.h"

namespace kvport::store {

class ObjectStore;

inline constexpr uint64_t kNeverExpires = UINT64_MAX;

// What an object expiring at `expires_at_ms` has left at `now_ms`: 0 when it never expires, at
// least 1 otherwise (an object pinned past its expiry is still readable through its pin).
inline uint64_t TtlLeftMs(uint64_t expires_at_ms, uint64_t now_ms) {
  if (expires_at_ms == kNeverExpires) return 0;
  return expires_at_ms > now_ms ? expires_at_ms - now_ms : 1;
}

enum class ObjectState : uint8_t {
  kReserved,  // owned by a WriteHandle, invisible
  kVisible,   // in the index and in its shard's LRU list
  kRetired,   // removed from the index; lives on while pinned
};

// One version of one object. Lifetime is a reference count: the WriteHandle (while reserved)
// or the index (while visible) holds one reference, and each ReadHandle holds one more. The
// last Unref frees the extent and the object.
//
// An object and its names are one allocation: its index key ((namespace, key) as one string,
// store/object_id.h) and the metadata it was reserved with follow the struct, so a node of
// millions of small objects pays for neither a string's header nor a second heap block per
// name (docs/performance.md, "How many objects and clients a node holds").
struct StoredObject {
  // An object of (ns, key) with `meta`, every other field at its initial value. Freed with
  // Delete, never with delete.
  static StoredObject* New(std::string_view ns, std::string_view key, std::string_view meta);
  static void Delete(StoredObject* o);

  ObjectStore* store = nullptr;
  // Metadata attached after the commit (ObjectStore::AttachMeta), once, to an object committed
  // without any: published with a release store so a reader that loads it sees its bytes, and
  // freed with the object. Readers see the reserved metadata when there is some, else this.
  std::atomic<const std::string*> attached_meta{nullptr};
  Extent extent;
  uint8_t* data = nullptr;
  // While reserved: the bytes of the extent its writer marked written
  // (Admission::unwritten_bytes counts the rest).
  uint64_t written = 0;
  // ReadHandle::sequence: set at commit (or before it, WriteHandle::SetSequence; 0: none set)
  // and at a change in place, under the shard mutex; read by pinners without it.
  std::atomic<uint64_t> sequence{0};
  // ReadHandle::checksum: set by the writer before the commit, constant after.
  uint64_t checksum = 0;
  // The use counter's value at the last commit or hit: the LRU order across shards.
  uint64_t last_use = 0;
  // The shard's LRU list runs from the most (head) to the least (tail) recently used.
  StoredObject* lru_prev = nullptr;
  StoredObject* lru_next = nullptr;
  // The next visible object with the same key in another namespace (IndexShard::by_key's chain).
  StoredObject* same_key_next = nullptr;
  // Its place in its shard's expiry heap (ExpiryHeap) while visible with a TTL; SIZE_MAX
  // otherwise.
  size_t expiry_slot = SIZE_MAX;
  std::atomic<uint32_t> refs{1};
  // ReadHandles on this version: the first adds its extent to Admission::pinned_bytes, the last
  // takes it away. 0 -> 1 happens only under the shard mutex (Lookup) or from a live pin.
  std::atomic<uint32_t> pins{0};

  // What a probe reads (ObjectStore::Exists, ExistsMany): last, beside the names that follow
  // the struct, so that a probe of an uncached object touches as few cache lines as it can.
  uint64_t value_len = 0;
  // ObjectStore::Impl::generation when the object was reserved: a version from before the last
  // DropAll never becomes (or stays) visible.
  uint64_t generation = 0;
  uint64_t expires_at_ms = kNeverExpires;
  // Guarded by the mutex of shards[shard] once the object has been committed (before that, the
  // WriteHandle's thread owns it alone).
  ObjectState state = ObjectState::kReserved;
  uint8_t shard = 0;  // its index shard (object_index.h: kShardCount of them)
  uint32_t ttl_seconds = 0;

  std::string_view index_key() const { return {Names(), index_key_bytes_}; }
  std::string_view ns() const { return ObjectIdNamespace(index_key()); }
  std::string_view key() const { return ObjectIdKey(index_key()); }
  std::string_view Meta() const {
    if (meta_bytes_ != 0) return {Names() + index_key_bytes_, meta_bytes_};
    const std::string* attached = attached_meta.load(std::memory_order_acquire);
    return attached != nullptr ? std::string_view(*attached) : std::string_view();
  }

 private:
  StoredObject() = default;
  ~StoredObject() { delete attached_meta.load(std::memory_order_relaxed); }
  const char* Names() const { return reinterpret_cast<const char*>(this + 1); }

  uint32_t index_key_bytes_ = 0;
  uint32_t meta_bytes_ = 0;
};

inline bool IsExpired(const StoredObject& o, uint64_t now_ms) {
  return now_ms >= o.expires_at_ms;
}

}  // namespace kvport::store
