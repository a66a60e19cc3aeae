// SPDX-License-Identifier: Apache-2.0
// ObjectStore: the cache node's storage engine. Objects are (namespace, key) -> value bytes in
// the node's Arena plus a small metadata blob, with atomic visibility, reader pins, LRU
// eviction, TTLs and per-namespace accounting. No I/O; the store owns all of its locks.
//
// Write path (the server reads socket bytes straight into the arena):
//   Result<WriteHandle> w = store.Reserve(ns, key, value_len, meta, ttl_seconds);
//   recv(fd, w->data(), w->size());        // no store lock is held while the caller copies
//   store.Commit(std::move(*w));          // now visible, atomically replacing any old version
// Until Commit, nothing about the write is visible (Lookup/Exists/ListKeys do not see it and a
// previous version stays readable). Abort, or destroying an uncommitted WriteHandle, frees the
// space and leaves no trace.
//
// Stepwise reservations (a writer reading a value from a network peer): Reserve with
// `first_bytes` below the value's length takes only that much space now, at the front of a free
// extent with room for the whole value when there is one; the writer marks what it has written
// (WriteHandle::MarkWritten) and asks for more room as bytes arrive (Grow), in place when the
// blocks after the reservation are free, else by moving it (the written bytes are copied). So a
// peer that announces a large value and stops sending makes the store evict only for what it
// sent, plus one step.
//
// Read path (the server sends straight from the arena with writev):
//   Result<ReadHandle> r = store.Lookup(ns, key);
//   writev(..., {r->meta(), {r->data(), r->size()}});
// A ReadHandle pins the version it found: while any handle pins it, its bytes are never freed
// or reused, even if the key is overwritten, deleted, expired or evicted meanwhile. The old
// version stays readable, unchanged, to its pinners and its space is freed with the last pin.
//
// Eviction: when Reserve finds no free extent large enough, it evicts unpinned, committed
// objects in least-recently-used order (across the whole store, not per namespace) until one
// fits. Pinned objects and reservations are never evicted. If nothing evictable is left the
// key gets NoSpace; used bytes never exceed the capacity. Expired objects met by eviction are
// counted as expirations, not evictions. The order is exact when no other call runs at the
// same time; under concurrent uses a victim may be a few uses younger than the oldest object.
//
// Uses: Commit and a Lookup hit make an object the most recently used. Exists and ListKeys
// do not (a cache probe is not a use; LMCache probes before it fetches, and the fetch counts).
//
// TTL: ttl_seconds > 0 makes an object expire that many seconds after Commit (on the injected
// TtlClock); 0 means never. Expired objects are never returned by Lookup, Exists or ListKeys.
// Their space is reclaimed lazily (when a lookup, an eviction or an overwrite meets them) and
// by Sweep(), which the server calls periodically.
//
// Thread safety: every method may be called concurrently from many threads. Internals: 64
// index shards, each with its own mutex guarding its part of the index, its own LRU list and
// its own namespace counters, so uses of keys in different shards share no lock (a hit or a
// commit takes one shard mutex; freeing or allocating space takes the allocator's mutex). All
// are held for short, bounded work, never while the caller copies value bytes. Handles are not
// themselves synchronized: one handle object is used by one thread at a time (copies of a
// ReadHandle are independent). Every handle must be destroyed before the ObjectStore.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/status.h"
#include "store/arena.h"
#include "store/extent_allocator.h"
#include "store/ttl_clock.h"

namespace kvport::store {

class ObjectStore;
struct StoredObject;  // one version of one object; defined in store/stored_object.h

// Never expires.
inline constexpr uint32_t kNoExpiry = 0;

// An object leaving memory to make room (EvictionSink).
struct EvictedObject {
  std::string_view ns;
  std::string_view key;
  std::string_view meta;
  std::span<const uint8_t> value;
  uint64_t ttl_left_ms = 0;  // how long it had left to live; 0: no expiry
  uint64_t sequence = 0;     // which version it is (ReadHandle::sequence)
  uint64_t checksum = 0;     // its value's, as its writer gave it (ReadHandle::checksum)
};

// Where evicted objects go (the disk tier), told in two steps so that no change of a key can
// fall between an eviction and the copy it makes:
//   Leaving: the object is leaving the index, under the lock every change of its key takes (a
//     commit or a delete of the key is ordered wholly before or wholly after it). Must be quick,
//     copy no value and not call into the store. True when the sink wants the bytes.
//   Evicted: then, outside the store's locks, with the object's bytes valid until it returns
//     (only after a Leaving that answered true).
// Neither is called for expired, deleted or replaced objects.
class EvictionSink {
 public:
  virtual ~EvictionSink() = default;
  virtual bool Leaving(const EvictedObject& object) = 0;
  virtual void Evicted(const EvictedObject& object) = 0;
};

struct StoreOptions {
  // Arena size in bytes (the config's `capacity`, already parsed). Rounded down to a multiple
  // of Arena::kBlockBytes (4 KiB); less than that is InvalidArgument.
  uint64_t capacity_bytes = 0;
  // Largest value accepted; 0 means the capacity. Bigger values get TooLarge.
  uint64_t max_value_bytes = 0;
  // Limits checked by Reserve (the protocol layer enforces its own, usually tighter, first).
  uint32_t max_namespace_bytes = 256;   // longer: InvalidArgument (empty namespace is allowed)
  uint32_t max_key_bytes = 4096;        // longer or empty: InvalidArgument
  uint32_t max_meta_bytes = 64 * 1024;  // longer: TooLarge (metadata lives on the heap)
  Arena::Backing backing = Arena::Backing::kAuto;
  // Node-wide bounds beside the arena (0: none). Each admits one item larger than itself when
  // nothing else is held, so no single value that fits the capacity is refused forever.
  //   max_index_bytes: heap bytes of every object's index entry, key, namespace and metadata
  //     (ChargeOf() below, reserved and retired objects included). Over it, Reserve evicts LRU
  //     objects exactly as it does for arena space; NoSpace when nothing evictable is left.
  //   max_reserved_bytes: arena bytes of reservations not yet written (their extents less what
  //     their writers marked written; a whole reservation counts whole until committed). Beyond
  //     it Reserve and Grow are NoSpace at once and evict nothing.
  //   max_pinned_bytes: arena bytes of the objects that at least one ReadHandle pins (an object
  //     pinned by many readers counts once). Beyond it Lookup of an object nobody pins yet is
  //     NoSpace; copies of an existing handle are always allowed.
  uint64_t max_index_bytes = 0;
  uint64_t max_reserved_bytes = 0;
  uint64_t max_pinned_bytes = 0;
  // Heap bytes charged against max_index_bytes outside the store (the disk tier's index), or
  // null. The store admits its own charges up to max_index_bytes less these, less at most half
  // of max_index_bytes: whoever fills the other half, the store always has half. Must outlive
  // the store.
  const std::atomic<uint64_t>* index_bytes_elsewhere = nullptr;
  // Time source for TTLs; null means SteadyTtlClock::Get(). Must outlive the store.
  const TtlClock* ttl_clock = nullptr;
  // Told of each object evicted to make room, on the evicting thread (EvictionSink), or null.
  // Must outlive the store.
  EvictionSink* eviction_sink = nullptr;
  // The first sequence number the store hands out (ReadHandle::sequence): above every one
  // a disk tier already holds, so that a version committed now is newer than any found there.
  uint64_t first_sequence = 1;
};

struct StoreStats {
  uint64_t capacity_bytes = 0;            // the arena's size
  uint64_t used_bytes = 0;                // allocated arena bytes (rounded); always <= capacity
  uint64_t value_bytes = 0;               // sum of visible objects' value lengths (not rounded)
  uint64_t reserved_bytes = 0;            // allocated to reservations not yet committed or aborted
  uint64_t reserved_unwritten_bytes = 0;  // of those, not marked written: max_reserved_bytes
  uint64_t reservation_moves = 0;         // Grows that moved a reservation (no room in place)
  uint64_t reservation_moved_bytes = 0;   // written bytes those moves copied
  uint64_t retired_bytes = 0;       // held by removed/replaced versions that readers still pin
  uint64_t objects = 0;             // visible objects (committed, not removed)
  uint64_t hits = 0;                // Lookup found a live object
  uint64_t misses = 0;              // Lookup found nothing (or only an expired object)
  uint64_t evictions = 0;           // objects removed to make room
  uint64_t expirations = 0;         // expired objects removed (lazily, by Sweep or eviction)
  uint64_t free_extents = 0;        // fragmentation: number of free holes in the arena
  uint64_t largest_free_bytes = 0;  // fragmentation: the largest free hole
  uint64_t index_bytes = 0;         // heap charged for objects (ChargeOf), any state
  uint64_t pinned_bytes = 0;        // arena bytes of objects pinned by at least one reader
  uint64_t max_index_bytes = 0;     // the caps in force (StoreOptions; 0: none)
  uint64_t max_reserved_bytes = 0;
  uint64_t max_pinned_bytes = 0;
  uint64_t reserve_cap_refusals = 0;  // Reserve refused by max_reserved_bytes
  uint64_t pin_cap_refusals = 0;      // Lookup refused by max_pinned_bytes
};

// Visible objects of one namespace. Replacing an object updates the counts atomically with
// the replacement; a namespace whose last object is removed disappears from the list. The
// counts are exact: each shard keeps its own, and a read adds them up shard by shard (a read
// running while writes are in flight may count a write in one shard and not one made in
// another shard meanwhile; with no write in flight the sums are exact).
struct NamespaceUsage {
  std::string ns;
  uint64_t objects = 0;
  uint64_t value_bytes = 0;  // sum of value lengths (metadata not included)
  uint64_t meta_bytes = 0;   // sum of metadata blob lengths
};

// One page of ListKeys (the protocol's LIST; the client's page is kvport::KeyPage).
struct KeyListing {
  std::vector<std::string> keys;  // sorted ascending (bytewise)
  // Pass back to get the next page; empty when this page is the last.
  std::string next_cursor;
};

// A pin on one committed version of an object. Copyable (each copy is another pin) and
// movable; an empty (default-constructed or moved-from) handle has valid() == false and its
// accessors must not be called. All accessors are valid while the handle lives.
class ReadHandle {
 public:
  ReadHandle() = default;
  ReadHandle(const ReadHandle& other);
  ReadHandle& operator=(const ReadHandle& other);
  ReadHandle(ReadHandle&& other) noexcept;
  ReadHandle& operator=(ReadHandle&& other) noexcept;
  ~ReadHandle();

  bool valid() const { return object_ != nullptr; }
  const uint8_t* data() const;  // size() bytes in the arena (non-null even when size() == 0)
  uint64_t size() const;
  uint64_t arena_offset() const;  // data() - arena base: for same-host/RDMA clients
  std::string_view meta() const;
  std::string_view ns() const;
  std::string_view key() const;
  // How long the object has left to live, in ms by the store's clock: 0 when it never expires,
  // at least 1 otherwise (an object pinned past its expiry is still readable through its pin).
  uint64_t ttl_left_ms() const;
  // Which version this is: a number given at its commit (or at a change in place: SetExpiry,
  // AttachMeta), higher than that of every earlier version of the key. A disk copy carrying
  // the same number is this very version (value, meta and expiry).
  uint64_t sequence() const;
  // The value's checksum (xxh3-64) as its writer gave it (WriteHandle::SetChecksum); 0: none.
  // The store keeps it beside the value and never computes or checks it: a reader does.
  uint64_t checksum() const;
  // Drops the pin now; the handle becomes empty.
  void Reset();

 private:
  friend class ObjectStore;
  explicit ReadHandle(StoredObject* pinned) : object_(pinned) {}  // adopts an existing pin
  StoredObject* object_ = nullptr;
};

// Space reserved for one write. Move-only. The caller fills data()[0, size()) and then passes
// the handle to ObjectStore::Commit (or Abort). Destroying a handle that was neither committed
// nor aborted aborts it. The bytes are not initialized: a reader can only ever see them after
// Commit, so the caller must have written all of them by then.
class WriteHandle {
 public:
  WriteHandle() = default;
  WriteHandle(WriteHandle&& other) noexcept;
  WriteHandle& operator=(WriteHandle&& other) noexcept;  // aborts what *this held
  WriteHandle(const WriteHandle&) = delete;
  WriteHandle& operator=(const WriteHandle&) = delete;
  ~WriteHandle();

  bool valid() const { return object_ != nullptr; }
  // capacity() writable bytes in the arena (non-null even when size() == 0). Grow may move them.
  uint8_t* data() const;
  uint64_t size() const;  // the value's length
  // Bytes of data() reserved so far: size() unless reserved stepwise and not yet grown to it.
  uint64_t capacity() const;
  uint64_t arena_offset() const;
  // Declares data()[0, bytes) written (bytes <= capacity()): they no longer count as unwritten
  // (max_reserved_bytes), and a Grow that moves the reservation copies them. Never decreases.
  void MarkWritten(uint64_t bytes);
  // The expiry the value takes at Commit, in place of Reserve's (kNoExpiry: never): for a
  // writer that learns it after the value's bytes (a RESP SET's EX comes after its value).
  void SetTtlSeconds(uint32_t ttl_seconds);
  // The sequence number the version takes at Commit, in place of a new one: for a version
  // moved back into memory from the disk tier, which is that very version (it stays older than
  // anything committed since).
  void SetSequence(uint64_t sequence);
  // The value's checksum (xxh3-64 of its size() bytes, computed where they were produced; 0:
  // none), kept with it from Commit on (ReadHandle::checksum).
  void SetChecksum(uint64_t checksum);
  std::string_view ns() const;
  std::string_view key() const;

 private:
  friend class ObjectStore;
  explicit WriteHandle(StoredObject* reserved) : object_(reserved) {}
  StoredObject* object_ = nullptr;
};

class ObjectStore {
 public:
  // Maps the arena and builds an empty store. Errors: InvalidArgument for options that make
  // no sense (capacity < 4 KiB), IoError when the arena cannot be mapped.
  static Result<std::unique_ptr<ObjectStore>> Create(const StoreOptions& options);
  ~ObjectStore();
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // Reserves value_len bytes for (ns, key), evicting LRU objects if needed. meta is copied
  // into the handle; ttl_seconds is counted from Commit (kNoExpiry: never). Errors:
  //   InvalidArgument  empty or too long key, too long namespace;
  //   TooLarge         value_len > max_value_bytes or > capacity, meta > max_meta_bytes
  //                    (will never fit: retrying is pointless);
  //   NoSpace          no hole large enough even after evicting every evictable object
  //                    (capacity full of pinned objects and reservations); nothing of the
  //                    current visible state was lost beyond the LRU objects evicted trying.
  //   NoSpace          also: max_reserved_bytes reached (nothing is evicted), or
  //                    max_index_bytes cannot be met by evicting; the message names the cap.
  //   `first_bytes` < value_len reserves that much (rounded up to 4 KiB) now and the rest
  //   through Grow (see "Stepwise reservations" above); eviction is then only for that much.
  Result<WriteHandle> Reserve(std::string_view ns, std::string_view key, uint64_t value_len,
                              std::string_view meta, uint32_t ttl_seconds,
                              uint64_t first_bytes = UINT64_MAX);

  // Makes at least min(capacity, handle.size()) bytes of a stepwise reservation writable: in
  // place when the blocks after it are free, else in a new extent (evicting LRU objects as
  // Reserve does) into which the bytes marked written are copied, data() changing. Errors:
  // NoSpace (max_reserved_bytes, or nothing evictable left), the handle unchanged;
  // InvalidArgument for an empty handle.
  Status Grow(WriteHandle& handle, uint64_t capacity);

  // Heap bytes an object of this key, namespace and metadata is charged against
  // max_index_bytes: the bytes themselves (held once, with the object) plus
  // kObjectOverheadBytes for the object, its slots in the index's sets and key order, and
  // the allocator's headers (measured: about 230 bytes; `kvport scale`).
  static constexpr uint64_t kObjectOverheadBytes = 512;
  static uint64_t ChargeOf(std::string_view ns, std::string_view key, std::string_view meta) {
    return kObjectOverheadBytes + ns.size() + key.size() + meta.size();
  }

  // Makes the reserved object visible, atomically replacing the previous version of the key
  // if any (whose readers keep their pins). If two reservations of one key are committed, the
  // last Commit wins. Consumes the handle. InvalidArgument for an empty handle, or one not
  // grown to its whole value (the handle then stays the caller's). The version's sequence
  // number into *sequence when not null: above that of every version of the key committed
  // before (for one key, commit order and sequence order agree).
  Status Commit(WriteHandle&& handle, uint64_t* sequence = nullptr);

  // Commit unless a live version of the key is visible: then the reservation is freed, that
  // version stays, and the answer is Aborted. What moves an object from the disk tier back
  // into memory uses, so that it can never replace a version committed meanwhile.
  Status CommitIfAbsent(WriteHandle&& handle);

  // A sequence number nothing has yet: what a delete of a key in both tiers stamps its
  // tombstone with, so that it hides every version before it and none after.
  uint64_t NewSequence();

  // Frees the reservation; nothing becomes visible. An empty handle is a no-op.
  void Abort(WriteHandle&& handle);

  // Pins the live version of (ns, key). NotFound if absent or expired (an expired object
  // found here is removed and counted as an expiration); InvalidArgument for a bad key or
  // namespace. Counts a hit or a miss and makes the object most recently used. NoSpace when
  // pinning it would exceed max_pinned_bytes (counted in pin_cap_refusals, not as a miss).
  Result<ReadHandle> Lookup(std::string_view ns, std::string_view key);

  // OK if (ns, key) is live, NotFound if absent or expired, InvalidArgument for a bad key.
  // Pins nothing, counts no hit or miss and does not touch the LRU order. When OK and
  // value_length is not null, *value_length is the live version's value length (a snapshot:
  // the key may be overwritten or removed right after).
  // *meta_length likewise: the length of its metadata (AttachMeta's included).
  Status Exists(std::string_view ns, std::string_view key, uint64_t* value_length = nullptr,
                uint64_t* meta_length = nullptr);

  // Exists of each of `keys` in `ns`: codes[i] and value_lengths[i] (0 unless OK) are what
  // Exists(ns, keys[i], &value_length) answers. The spans are of one size. Each shard's lock
  // is taken once for the keys it holds, whose index slots are fetched from memory together
  // before any is searched: a probe of many keys in a large index pays its cache misses at
  // once, not one after another (docs/store.md, "Index").
  void ExistsMany(std::string_view ns, std::span<const std::string_view> keys,
                  std::span<StatusCode> codes, std::span<uint64_t> value_lengths);

  // Removes (ns, key) from view. OK if a live object was removed, NotFound otherwise.
  // Readers that pinned it keep reading it; its space is freed with their last pin.
  Status Delete(std::string_view ns, std::string_view key);

  // --- Any namespace: `key` matched in every namespace that holds it ------------------------
  // What the protocol's any-namespace MGET, MEXIST and MDEL do. The order of the search: the
  // default namespace "" first, then the others ascending by name (bytewise). Every version of
  // a key, whatever its namespace, lives in one index shard, chained by key, so a search takes
  // that shard's lock once and sees one snapshot of the key's namespaces. Cost: one probe plus
  // one step per namespace that holds this key, whatever the number of namespaces on the node
  // (a tenant creating many namespaces slows no one's probes). `allowed`, when set, limits the
  // search to the namespaces it returns true for (the node's access control: those a client's
  // token may read, or write for deletes), called under the shard's lock; unset, every
  // namespace is searched. Errors: InvalidArgument for an empty or too long key.
  using NamespaceFilter = std::function<bool(std::string_view ns)>;

  // Lookup of the first namespace in search order that holds a live (ns, key): pins it (its
  // ReadHandle::ns() says which namespace matched). NotFound if none does. Counts one hit or
  // one miss for the whole search, and makes the match most recently used.
  Result<ReadHandle> LookupInAnyNamespace(std::string_view key,
                                          const NamespaceFilter& allowed = {});

  // Exists of the first namespace in search order that holds a live (ns, key): OK with its
  // value length in *value_length (when not null), NotFound if none does. Like Exists: pins
  // nothing, counts nothing, leaves the LRU order alone.
  Status ExistsInAnyNamespace(std::string_view key, uint64_t* value_length = nullptr,
                              const NamespaceFilter& allowed = {});

  // Delete of (ns, key) in every namespace that holds it live. OK if at least one was removed
  // (*deleted, when not null, is how many), NotFound if none was. A namespace left without
  // objects disappears from NamespaceUsages(), as after any Delete.
  Status DeleteInEveryNamespace(std::string_view key, uint64_t* deleted = nullptr,
                                const NamespaceFilter& allowed = {});

  // Up to `limit` live keys of namespace `ns`, ascending, strictly after `cursor` (empty
  // cursor: from the start). Keys present for the whole paging are returned exactly once;
  // keys added or removed meanwhile may or may not appear. Cost: one pass over the index per
  // page (an operator's and a connector's list, not a hot path). InvalidArgument if limit==0.
  Result<KeyListing> ListKeys(std::string_view ns, std::string_view cursor, size_t limit);

  // Removes every expired object (counting expirations) and returns how many. Pinned expired
  // objects are removed from view too; their space is freed with their last pin.
  uint64_t Sweep();

  // Forgets every object, at once: from the moment DropAll starts, no Lookup, Exists, ListKeys
  // or any-namespace call finds an object committed before it (what a cluster node does when
  // it takes a new epoch: docs/cluster.md). A write reserved before the drop and committed
  // after it is OK and is dropped too (the commit is ordered just before the drop), so it never
  // becomes visible nor replaces a newer version. Writes reserved after the drop are not
  // affected. As with Delete, readers that pinned an object keep reading it and its space is
  // freed with their last pin; nothing is counted as an eviction or expiration. Returns how
  // many visible objects it removed. Cost: one pass over the index, shard by shard.
  uint64_t DropAll();

  // --- Expiry of a live object (the Redis protocol's EXPIRE, PERSIST, TTL: docs/resp.md) ----
  // Sets the live version of (ns, key) to expire `ttl_ms` from now (0: never), in place: its
  // value and LRU place unchanged, a new sequence number (into *sequence when not null: a copy
  // elsewhere of the number before is of the version before the change). NotFound when there is
  // no live version. A pin taken before keeps reading the object; its ttl_left_ms() reads the
  // new expiry.
  Status SetExpiry(std::string_view ns, std::string_view key, uint64_t ttl_ms,
                   uint64_t* sequence = nullptr);
  // --- Metadata of a live object (the Redis protocol's folded pairs: docs/resp.md) ---------
  // Attaches `meta` to the live version of (ns, key) committed without metadata, in place: its
  // value, expiry and LRU place unchanged, a new sequence number (into *sequence, as
  // SetExpiry); from then on it is the object's meta() (a pin taken before sees it too) and
  // goes wherever the object goes (eviction to the disk tier, removal). Once only: Aborted when
  // the version has metadata already. NotFound when there is no live version; InvalidArgument
  // for empty meta; TooLarge beyond max_meta_bytes; NoSpace when its bytes do not fit
  // max_index_bytes (nothing is evicted).
  Status AttachMeta(std::string_view ns, std::string_view key, std::string_view meta,
                    uint64_t* sequence = nullptr);

  // *ttl_left_ms: how long the live version of (ns, key) has left (0: it never expires).
  // NotFound when there is no live version. Counts nothing and leaves the LRU order alone.
  Status ExpiryOf(std::string_view ns, std::string_view key, uint64_t* ttl_left_ms);

  StoreStats Stats() const;
  // Every namespace with at least one visible object, sorted by name.
  std::vector<NamespaceUsage> NamespaceUsages() const;
  // Usage of one namespace (zeros if it has no objects).
  NamespaceUsage UsageOf(std::string_view ns) const;

  const Arena& arena() const { return *arena_; }
  const StoreOptions& options() const { return options_; }

  // Tests only: `hook` runs inside every use (a Commit, or a Lookup hit) of every key, with
  // every lock that the use holds at the moment it records the use, so a test can stall one
  // use and watch which other calls still proceed. Set it before any concurrent use of the
  // store; an empty function removes it.
  using UseHook = std::function<void(std::string_view ns, std::string_view key)>;
  void SetUseHookForTesting(UseHook hook);

 private:
  friend class ReadHandle;
  friend class WriteHandle;
  Status CommitVersion(WriteHandle&& handle, bool if_absent, uint64_t* sequence);
  // ExistsMany of at most a window of keys.
  void ExistsWindow(std::string_view ns, std::span<const std::string_view> keys,
                    std::span<StatusCode> codes, std::span<uint64_t> value_lengths);
  struct Impl;

  ObjectStore(StoreOptions options, std::unique_ptr<Arena> arena,
              std::unique_ptr<ExtentAllocator> allocator);

  // Space for `bytes` of a value of `value_len` bytes (a reservation, or a step of one),
  // evicting if it must: by extending `*grown` in place when given (true), else a new extent.
  // See eviction.cc for the order of preference.
  std::optional<Extent> PlaceStep(uint64_t bytes, uint64_t value_len, Extent* grown,
                                  bool* in_place);

  StoreOptions options_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<ExtentAllocator> allocator_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvport::store
