// SPDX-License-Identifier: Apache-2.0
// ObjectStore::Impl: the store's state across its shards (the shards, the LRU order across
// them, the sequence and DropAll generation, admission) and what every call does with it: put
// objects into view and out of it, find, pin, probe and remove them (private to store/).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/thread_annotations.h"
#include "kvport/log.h"
#include "store/admission.h"
#include "store/extent_allocator.h"
#include "store/object_index.h"
#include "store/object_store.h"
#include "store/stored_object.h"
#include "store/ttl_clock.h"

// Locks. Each of the 64 shards has one mutex guarding everything about the objects whose key
// hashes to it (the key alone, whatever its namespace: so every namespace's version of a key is
// in one shard, and an any-namespace search is one lock and one probe of that shard's by_key
// chains): its part of the index, its LRU list and its namespace counters. A hit or a commit
// takes that one mutex and nothing else, so uses of keys in different shards never wait for
// each other. Besides the shard mutexes there is one inner lock: the allocator's mutex (inside
// ExtentAllocator; taken by Reserve, Grow and the last Unref, never with a shard mutex held).
// Order (outer first): shard mutex -> allocator mutex; no path holds two shard mutexes at once.
//
// LRU across shards: every use (commit or hit) takes a stamp from one global counter (a relaxed
// fetch_add, no lock) and moves the object to the head of its shard's list, so each shard's
// list is ordered by stamp. Each shard publishes the stamp of its tail (its least recently used
// object) in `tail_use`; the evictor reads the 64 tails, picks the oldest, locks that shard and
// evicts its tail. With no concurrent use this is exactly the global LRU order.
//
// The locks are kvport::Mutex with clang thread-safety annotations (common/thread_annotations.h),
// checked by the clang build: what each one guards is declared with it (GUARDED_BY; the shard's
// in object_index.h), and each *Locked helper states the lock it needs (REQUIRES). What the
// analysis cannot express is commented instead: a StoredObject's `state`, `expires_at_ms`,
// `last_use` and LRU links are guarded by the mutex of the shard that `shard` names (the object
// does not know its shard's Mutex); the helpers that touch them require that shard's mutex.

namespace kvport::store {

inline constexpr uint64_t kNoTail = UINT64_MAX;  // tail_use of a shard with no visible object

struct ObjectStore::Impl {
  using Shard = IndexShard;

  enum class EvictOutcome { kRemoved, kSkippedPinned, kRaced, kNothingEvictable };

  ExtentAllocator* allocator = nullptr;
  const TtlClock* clock = nullptr;
  EvictionSink* eviction_sink = nullptr;  // StoreOptions::eviction_sink
  // The next sequence number (ReadHandle::sequence). Taken under the key's shard mutex by a
  // commit, so that one key's versions are numbered in the order they became visible.
  std::atomic<uint64_t> next_sequence{1};
  uint64_t NewSequence() { return next_sequence.fetch_add(1, std::memory_order_relaxed); }
  Admission admission;  // the caps beside the arena and their gauges

  // Bumped by DropAll: every object of an older generation is gone from view at that instant
  // (the finders below treat it as absent), and DropAll's pass then retires them. Read under a
  // shard mutex by Commit and the finders; DropAll bumps it before taking any shard mutex, so
  // a critical section that follows DropAll's on the same shard sees the new value.
  std::atomic<uint64_t> generation{0};
  bool StaleLocked(const StoredObject& o) const {
    return o.generation != generation.load(std::memory_order_acquire);
  }

  ObjectStore::UseHook use_hook;  // tests only; set before concurrent use
  std::array<Shard, kShardCount> shards;

  // The use counter (LRU stamps) and each shard's tail stamp, on their own cache lines.
  alignas(64) std::atomic<uint64_t> use_counter{0};
  alignas(64) std::array<std::atomic<uint64_t>, kShardCount> tail_use;

  Impl() {
    for (size_t i = 0; i < kShardCount; ++i) {
      shards[i].number = i;
      tail_use[i].store(kNoTail, std::memory_order_relaxed);
    }
  }

  Shard& ShardOf(const StoredObject& o) { return shards[o.shard]; }
  Shard& ShardFor(std::string_view index_key) { return shards[ShardIndexOf(index_key)]; }

  template <typename F>
  uint64_t Sum(F field) const {
    uint64_t total = 0;
    for (const Shard& shard : shards)
      total += (shard.*field).load(std::memory_order_relaxed);
    return total;
  }

  // --- a shard's LRU list (shard mutex held) ---
  void PublishTailLocked(Shard& shard) REQUIRES(shard.mu) {
    const StoredObject* lru_tail = shard.lru.tail();
    const uint64_t tail = lru_tail ? lru_tail->last_use : kNoTail;
    std::atomic<uint64_t>& published = tail_use[shard.number];
    if (published.load(std::memory_order_relaxed) != tail) {
      published.store(tail, std::memory_order_relaxed);
    }
  }
  // Stamps `o` as the most recent use and puts it at the head. `o` is not on the list.
  void LruPushFrontLocked(Shard& shard, StoredObject* o) REQUIRES(shard.mu) {
    o->last_use = use_counter.fetch_add(1, std::memory_order_relaxed) + 1;
    shard.lru.PushFront(o);
    PublishTailLocked(shard);
  }
  void LruUnlinkLocked(Shard& shard, StoredObject* o) REQUIRES(shard.mu) {
    shard.lru.Unlink(o);
    PublishTailLocked(shard);
  }
  // A use of a visible object: it becomes the most recently used.
  void LruTouchLocked(Shard& shard, StoredObject* o) REQUIRES(shard.mu) {
    LruUnlinkLocked(shard, o);
    LruPushFrontLocked(shard, o);
    if (use_hook) use_hook(o->ns(), o->key());
  }

  // Puts a just-committed object into view, except for the index entry (the caller has made
  // it): head of the LRU list, its key's chain, the expiry heap (with a TTL), namespace and
  // store counters.
  void ShowLocked(Shard& shard, StoredObject* o) REQUIRES(shard.mu) {
    o->state = ObjectState::kVisible;
    LruPushFrontLocked(shard, o);
    shard.ChainAddLocked(o);
    if (o->expires_at_ms != kNeverExpires) shard.expiry.Add(o);
    shard.namespaces.Add(o);
    shard.objects.fetch_add(1, std::memory_order_relaxed);
    shard.value_bytes.fetch_add(o->value_len, std::memory_order_relaxed);
    shard.visible_alloc_bytes.fetch_add(o->extent.length, std::memory_order_relaxed);
  }
  // Takes a visible object out of view, except for the index entry (the caller has removed or
  // replaced it). The index's reference is not dropped here: the caller Unrefs after unlocking,
  // so no free happens under a shard lock.
  void HideLocked(Shard& shard, StoredObject* o) REQUIRES(shard.mu) {
    o->state = ObjectState::kRetired;
    LruUnlinkLocked(shard, o);
    shard.ChainRemoveLocked(o);
    shard.expiry.Remove(o);
    shard.namespaces.Remove(o);
    shard.objects.fetch_sub(1, std::memory_order_relaxed);
    shard.value_bytes.fetch_sub(o->value_len, std::memory_order_relaxed);
    shard.visible_alloc_bytes.fetch_sub(o->extent.length, std::memory_order_relaxed);
  }
  // Removes a visible object from the index and from view.
  void RetireLocked(Shard& shard, StoredObject* o) REQUIRES(shard.mu) {
    shard.index.erase(o->index_key());
    HideLocked(shard, o);
  }

  // Takes the allocator's mutex (inside ExtentAllocator) when it frees: never with a shard
  // mutex held (frees happen outside them), though the lock order would allow it.
  void Unref(StoredObject* o) {
    if (o->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    Shard& shard = ShardOf(*o);
    if (o->state == ObjectState::kReserved) admission.EndReservation(*o);
    // What Reserve admitted for it, and AttachMeta for metadata attached since.
    admission.index_bytes.fetch_sub(ObjectStore::ChargeOf(o->ns(), o->key(), o->Meta()),
                                    std::memory_order_relaxed);
    Status freed = allocator->Free(o->extent);
    if (!freed.ok()) log::Error("store: {}", freed.ToString());
    StoredObject::Delete(o);
    shard.live_objects.fetch_sub(1, std::memory_order_relaxed);
  }

  // Looks up a visible, unexpired object (shard mutex held). An expired one met here is
  // retired and returned through *expired for the caller to Unref after unlocking.
  StoredObject* FindLiveLocked(Shard& shard, std::string_view index_key, uint64_t now_ms,
                               StoredObject** expired) REQUIRES(shard.mu) {
    return FindLiveLocked(shard, index_key, shard.index.hash_function()(index_key), now_ms,
                          expired);
  }
  // The same, given the index key's hash in the shard's index.
  StoredObject* FindLiveLocked(Shard& shard, std::string_view index_key, size_t hash,
                               uint64_t now_ms, StoredObject** expired) REQUIRES(shard.mu) {
    auto it = shard.index.find(index_key, hash);
    if (it == shard.index.end()) return nullptr;
    StoredObject* o = *it;
    if (StaleLocked(*o)) {  // dropped by a DropAll whose pass has not reached this shard yet
      RetireLocked(shard, o);
      *expired = o;
      return nullptr;
    }
    if (IsExpired(*o, now_ms)) {
      RetireLocked(shard, o);
      shard.expirations.fetch_add(1, std::memory_order_relaxed);
      *expired = o;
      return nullptr;
    }
    return o;
  }

  // The live version of `index_key` (in `shard`), pinned and made most recently used; null if
  // there is none, or (*over_cap set) when pinning it would take pinned_bytes over its cap.
  // Counts no hit or miss (callers count one per search).
  StoredObject* PinLive(Shard& shard, std::string_view index_key, uint64_t now_ms, bool* over_cap) {
    StoredObject* expired = nullptr;
    StoredObject* found = nullptr;
    {
      MutexLock lock(shard.mu);
      found = FindLiveLocked(shard, index_key, now_ms, &expired);
      if (found) found = PinFoundLocked(shard, found, over_cap);
    }
    if (expired) Unref(expired);
    return found;
  }

  // Pins a live object found under its shard's mutex and makes it most recently used; null
  // (*over_cap set) when pinning it would take pinned_bytes over its cap.
  StoredObject* PinFoundLocked(Shard& shard, StoredObject* found, bool* over_cap)
      REQUIRES(shard.mu) {
    // Unpinned now, and it cannot become pinned meanwhile (a first pin needs this mutex): this
    // pin is the one that adds its extent, if the cap lets it.
    const bool first = found->pins.load(std::memory_order_relaxed) == 0;
    if (first && !Admission::TryAdmit(admission.pinned_bytes, found->extent.length,
                                      admission.max_pinned_bytes)) {
      admission.pin_cap_refusals.fetch_add(1, std::memory_order_relaxed);
      *over_cap = true;
      return nullptr;
    }
    found->refs.fetch_add(1, std::memory_order_relaxed);
    admission.AddPin(found, first);
    LruTouchLocked(shard, found);
    return found;
  }

  // Objects retired under a shard's mutex, Unref'd after it (rarely more than one: no
  // allocation for up to four).
  struct Retired {
    std::array<StoredObject*, 4> first{};
    size_t count = 0;
    std::vector<StoredObject*> more;
    void Add(StoredObject* o) {
      if (count < first.size()) {
        first[count++] = o;
      } else {
        more.push_back(o);
      }
    }
  };
  void UnrefAll(const Retired& retired) {
    for (size_t i = 0; i < retired.count; ++i)
      Unref(retired.first[i]);
    for (StoredObject* o : retired.more)
      Unref(o);
  }

  // Visits the visible objects of `key` in the namespaces `allowed` admits (its shard's mutex
  // held: the chain is one snapshot), retiring into *retired the stale and expired ones met
  // (expired ones counted) and calling visit(o) for each live one.
  template <typename Visit>
  void ForEachLiveOfKeyLocked(Shard& shard, std::string_view key, uint64_t now_ms,
                              const ObjectStore::NamespaceFilter& allowed, Retired* retired,
                              Visit visit) REQUIRES(shard.mu) {
    auto it = shard.by_key.find(key);
    if (it == shard.by_key.end()) return;
    StoredObject* next = nullptr;
    for (StoredObject* o = *it; o != nullptr; o = next) {
      next = o->same_key_next;  // o may leave the chain below
      if (allowed && !allowed(o->ns())) continue;
      const bool stale = StaleLocked(*o);
      if (stale || IsExpired(*o, now_ms)) {
        RetireLocked(shard, o);
        if (!stale) shard.expirations.fetch_add(1, std::memory_order_relaxed);
        retired->Add(o);
        continue;
      }
      visit(o);
    }
  }

  // The first live object of `key` in the any-namespace search order ("" first, then by name)
  // among the namespaces `allowed` admits; null if none.
  StoredObject* FirstLiveOfKeyLocked(Shard& shard, std::string_view key, uint64_t now_ms,
                                     const ObjectStore::NamespaceFilter& allowed, Retired* retired)
      REQUIRES(shard.mu) {
    StoredObject* first = nullptr;
    ForEachLiveOfKeyLocked(shard, key, now_ms, allowed, retired, [&](StoredObject* o) {
      if (first == nullptr || o->ns() < first->ns()) first = o;
    });
    return first;
  }

  // True if `index_key` is live, with its value length in *value_length (when not null).
  bool ProbeLive(std::string_view index_key, uint64_t now_ms, uint64_t* value_length,
                 uint64_t* meta_length) {
    StoredObject* expired = nullptr;
    bool live = false;
    {
      Shard& shard = ShardFor(index_key);
      MutexLock lock(shard.mu);
      const StoredObject* o = FindLiveLocked(shard, index_key, now_ms, &expired);
      live = o != nullptr;
      if (live && value_length) *value_length = o->value_len;
      if (live && meta_length) *meta_length = o->Meta().size();
    }
    if (expired) Unref(expired);
    return live;
  }

  // Removes the live version of `index_key` from view; false if there was none.
  bool RemoveLive(std::string_view index_key, uint64_t now_ms) {
    StoredObject* expired = nullptr;
    StoredObject* removed = nullptr;
    {
      Shard& shard = ShardFor(index_key);
      MutexLock lock(shard.mu);
      removed = FindLiveLocked(shard, index_key, now_ms, &expired);
      if (removed) RetireLocked(shard, removed);
    }
    if (expired) Unref(expired);
    if (!removed) return false;
    Unref(removed);
    return true;
  }

  // Removes the least recently used object if nothing pins it: the tail of the shard whose
  // tail is the oldest.
  EvictOutcome EvictOne(uint64_t now_ms);  // in eviction.cc

  // Evicts in LRU order until `fits()` (tried again after every eviction) holds: an extent can
  // be allocated, or an object's charge fits max_index_bytes. Gives up (false) when no visible
  // object is left or every one left is pinned.
  template <typename Fits>
  bool EvictUntil(Fits fits) {
    const uint64_t visible = Sum(&Shard::objects);
    const uint64_t now_ms = clock->NowMillis();
    // Each pinned object gets a new stamp when skipped, so after `visible` skips every object
    // has been looked at once. The step cap guards against livelock with concurrent writers.
    uint64_t skips_left = visible + 1;
    uint64_t steps_left = 2 * visible + 64;
    while (steps_left-- > 0) {
      EvictOutcome outcome = EvictOne(now_ms);
      if (fits()) return true;
      if (outcome == EvictOutcome::kNothingEvictable) return false;
      if (outcome == EvictOutcome::kSkippedPinned && --skips_left == 0) return false;
    }
    return fits();
  }
};

}  // namespace kvport::store
