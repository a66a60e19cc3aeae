// SPDX-License-Identifier: Apache-2.0
// Making room: evicting the least recently used object across the shards, and placing a
// reservation's space, evicting when it must (ObjectStore::Impl::EvictOne,
// ObjectStore::PlaceStep).
#include <cstdint>
#include <optional>

#include "common/thread_annotations.h"
#include "store/extent_allocator.h"
#include "store/object_store.h"
#include "store/object_store_impl.h"
#include "store/stored_object.h"

namespace kvport::store {

ObjectStore::Impl::EvictOutcome ObjectStore::Impl::EvictOne(uint64_t now_ms) {
  size_t oldest = kShardCount;
  uint64_t oldest_use = kNoTail;
  for (size_t i = 0; i < kShardCount; ++i) {
    const uint64_t use = tail_use[i].load(std::memory_order_relaxed);
    if (use < oldest_use) {
      oldest_use = use;
      oldest = i;
    }
  }
  if (oldest == kShardCount) return EvictOutcome::kNothingEvictable;
  Shard& shard = shards[oldest];
  StoredObject* victim = nullptr;
  bool offer = false;
  // What the sink is told: the object's names and bytes stay valid until the Unref below.
  auto evicted = [&] {
    return EvictedObject{
        victim->ns(),
        victim->key(),
        victim->Meta(),
        {victim->data, victim->value_len},
        victim->expires_at_ms == kNeverExpires ? 0 : TtlLeftMs(victim->expires_at_ms, now_ms),
        victim->sequence.load(std::memory_order_relaxed),
        victim->checksum};
  };
  {
    MutexLock lock(shard.mu);
    victim = shard.lru.tail();
    if (!victim) return EvictOutcome::kRaced;  // emptied meanwhile: look again
    // Pins are only taken under this mutex (a ReadHandle copy needs a pin already), so 1
    // (the index's reference alone) means unpinned and stays so while we hold it.
    if (victim->refs.load(std::memory_order_acquire) != 1) {
      // Pinned: someone is reading it right now, which is a use.
      LruUnlinkLocked(shard, victim);
      LruPushFrontLocked(shard, victim);
      return EvictOutcome::kSkippedPinned;
    }
    const bool expired = IsExpired(*victim, now_ms);
    const bool dropped = StaleLocked(*victim);  // DropAll's pass is on its way: not evicted
    // Told while the key's changes are held off: a commit or delete of it that follows this
    // eviction is ordered after the sink has the version in hand (and can drop it).
    offer = !expired && !dropped && eviction_sink != nullptr && eviction_sink->Leaving(evicted());
    RetireLocked(shard, victim);
    if (!dropped) {
      (expired ? shard.expirations : shard.evictions).fetch_add(1, std::memory_order_relaxed);
    }
  }
  // Out of the index, unpinned: nobody else reaches it, and its bytes stay until the Unref.
  if (offer) eviction_sink->Evicted(evicted());
  Unref(victim);  // the index's reference: frees the extent now
  return EvictOutcome::kRemoved;
}

// A reservation is placed so that it can grow in place: at the front of a hole with room for
// the whole value. Concurrent writers otherwise interleave their steps in the same hole, each
// blocking the other's growth, and a reservation that cannot grow in place moves (its written
// bytes copied). The order of preference:
//   1. extend `*grown` in place, or a hole with room for the whole value;
//   2. where the free space can hold the rest of the value (this write need not evict), any
//      hole: a move now beats evicting what need not be evicted;
//   3. else (a full cache: this write evicts whatever happens) evict in LRU order until 1.
//      holds, or until a step's worth (`bytes` for a new reservation, the growth for a grown
//      one) is evicted, after which any hole will do.
// So eviction still follows the bytes that arrived, a step at a time.
std::optional<Extent> ObjectStore::PlaceStep(uint64_t bytes, uint64_t value_len, Extent* grown,
                                             bool* in_place) {
  const uint64_t have = grown != nullptr ? grown->length : 0;
  const uint64_t step = allocator_->RoundUp(bytes) - have;
  const uint64_t rest = allocator_->RoundUp(value_len) - have;
  std::optional<Extent> placed;
  bool extended = false;
  auto with_room = [&] {
    extended = grown != nullptr && allocator_->Extend(grown, bytes);
    if (!extended) placed = allocator_->Allocate(bytes, value_len, /*room_required=*/true);
    return extended || placed.has_value();
  };
  auto anywhere = [&] {
    if (with_room()) return true;
    placed = allocator_->Allocate(bytes, value_len);
    return placed.has_value();
  };
  const uint64_t used_before = allocator_->used_bytes();
  const bool must_evict = allocator_->capacity_bytes() - used_before < rest;
  if (!(must_evict ? with_room() : anywhere())) {
    impl_->EvictUntil([&] {
      const bool stepped = allocator_->used_bytes() + step <= used_before;
      return stepped || !must_evict ? anywhere() : with_room();
    });
    if (!extended && !placed) anywhere();  // nothing (more) evictable: any hole left will do
  }
  if (in_place != nullptr) *in_place = extended;
  return placed;
}

}  // namespace kvport::store
