// SPDX-License-Identifier: Apache-2.0
#include "store/object_store.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "common/thread_annotations.h"
#include "kvport/log.h"
#include "store/admission.h"
#include "store/extent_allocator.h"
#include "store/object_id.h"
#include "store/object_index.h"
#include "store/stored_object.h"

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

namespace {

constexpr uint64_t kNoTail = UINT64_MAX;  // tail_use of a shard with no visible object

// A miss. The code says it all and a batched request may meet thousands, so it carries no
// message (and so allocates nothing).
Status Miss() {
  return Status(StatusCode::kNotFound, std::string());
}

}  // namespace

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
  Shard& ShardFor(const std::string& index_key) { return shards[ShardIndexOf(index_key)]; }

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
    if (use_hook) use_hook(o->ns, o->key);
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
    shard.index.erase(o->index_key);
    HideLocked(shard, o);
  }

  // Takes the allocator's mutex (inside ExtentAllocator) when it frees: never with a shard
  // mutex held (frees happen outside them), though the lock order would allow it.
  void Unref(StoredObject* o) {
    if (o->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    Shard& shard = ShardOf(*o);
    if (o->state == ObjectState::kReserved) admission.EndReservation(*o);
    admission.index_bytes.fetch_sub(o->charge, std::memory_order_relaxed);
    Status freed = allocator->Free(o->extent);
    if (!freed.ok()) log::Error("store: {}", freed.ToString());
    delete o;
    shard.live_objects.fetch_sub(1, std::memory_order_relaxed);
  }

  // Looks up a visible, unexpired object (shard mutex held). An expired one met here is
  // retired and returned through *expired for the caller to Unref after unlocking.
  StoredObject* FindLiveLocked(Shard& shard, const std::string& index_key, uint64_t now_ms,
                               StoredObject** expired) REQUIRES(shard.mu) {
    auto it = shard.index.find(index_key);
    if (it == shard.index.end()) return nullptr;
    StoredObject* o = it->second;
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
  StoredObject* PinLive(Shard& shard, const std::string& index_key, uint64_t now_ms,
                        bool* over_cap) {
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
    for (StoredObject* o = it->second; o != nullptr; o = next) {
      next = o->same_key_next;  // o may leave the chain below
      if (allowed && !allowed(o->ns)) continue;
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
      if (first == nullptr || o->ns < first->ns) first = o;
    });
    return first;
  }

  // True if `index_key` is live, with its value length in *value_length (when not null).
  bool ProbeLive(const std::string& index_key, uint64_t now_ms, uint64_t* value_length,
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
  bool RemoveLive(const std::string& index_key, uint64_t now_ms) {
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
  EvictOutcome EvictOne(uint64_t now_ms) {
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
          victim->ns,
          victim->key,
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

// ---------------------------------------------------------------------------------------------
// Handles

ReadHandle::ReadHandle(const ReadHandle& other) : object_(other.object_) {
  if (object_) {
    object_->refs.fetch_add(1, std::memory_order_relaxed);
    object_->store->impl_->admission.AddPin(object_, /*admitted=*/false);
  }
}

ReadHandle& ReadHandle::operator=(const ReadHandle& other) {
  if (this != &other) {
    ReadHandle copy(other);
    *this = std::move(copy);
  }
  return *this;
}

ReadHandle::ReadHandle(ReadHandle&& other) noexcept
    : object_(std::exchange(other.object_, nullptr)) {}

ReadHandle& ReadHandle::operator=(ReadHandle&& other) noexcept {
  if (this != &other) {
    Reset();
    object_ = std::exchange(other.object_, nullptr);
  }
  return *this;
}

ReadHandle::~ReadHandle() {
  Reset();
}

void ReadHandle::Reset() {
  if (!object_) return;
  StoredObject* o = std::exchange(object_, nullptr);
  o->store->impl_->admission.DropPin(o);
  o->store->impl_->Unref(o);
}

const uint8_t* ReadHandle::data() const {
  return object_->data;
}
uint64_t ReadHandle::size() const {
  return object_->value_len;
}
uint64_t ReadHandle::arena_offset() const {
  return object_->extent.offset;
}
std::string_view ReadHandle::meta() const {
  return object_->Meta();
}
std::string_view ReadHandle::ns() const {
  return object_->ns;
}
std::string_view ReadHandle::key() const {
  return object_->key;
}
uint64_t ReadHandle::ttl_left_ms() const {
  ObjectStore::Impl& impl = *object_->store->impl_;
  const uint64_t now_ms = impl.clock->NowMillis();
  uint64_t expires_at_ms = 0;
  {
    // Under its shard's mutex: SetExpiry may change it while the object is pinned.
    MutexLock lock(impl.ShardOf(*object_).mu);
    expires_at_ms = object_->expires_at_ms;
  }
  return TtlLeftMs(expires_at_ms, now_ms);
}

uint64_t ReadHandle::sequence() const {
  return object_->sequence.load(std::memory_order_relaxed);
}
uint64_t ReadHandle::checksum() const {
  return object_->checksum;
}

WriteHandle::WriteHandle(WriteHandle&& other) noexcept
    : object_(std::exchange(other.object_, nullptr)) {}

WriteHandle& WriteHandle::operator=(WriteHandle&& other) noexcept {
  if (this != &other) {
    if (object_) object_->store->Abort(std::move(*this));
    object_ = std::exchange(other.object_, nullptr);
  }
  return *this;
}

WriteHandle::~WriteHandle() {
  if (object_) object_->store->Abort(std::move(*this));
}

uint8_t* WriteHandle::data() const {
  return object_->data;
}
uint64_t WriteHandle::size() const {
  return object_->value_len;
}
uint64_t WriteHandle::capacity() const {
  return std::min(object_->value_len, object_->extent.length);
}
void WriteHandle::SetTtlSeconds(uint32_t ttl_seconds) {
  object_->ttl_seconds = ttl_seconds;
}
void WriteHandle::SetSequence(uint64_t sequence) {
  object_->sequence.store(sequence, std::memory_order_relaxed);
}
void WriteHandle::SetChecksum(uint64_t checksum) {
  object_->checksum = checksum;
}
void WriteHandle::MarkWritten(uint64_t bytes) {
  // The last block's rounding counts as written with the value's last byte.
  const uint64_t written = bytes >= object_->value_len ? object_->extent.length
                                                       : std::min(bytes, object_->extent.length);
  if (written <= object_->written) return;
  object_->store->impl_->admission.unwritten_bytes.fetch_sub(written - object_->written,
                                                             std::memory_order_relaxed);
  object_->written = written;
}
uint64_t WriteHandle::arena_offset() const {
  return object_->extent.offset;
}
std::string_view WriteHandle::ns() const {
  return object_->ns;
}
std::string_view WriteHandle::key() const {
  return object_->key;
}

// ---------------------------------------------------------------------------------------------
// ObjectStore

Result<std::unique_ptr<ObjectStore>> ObjectStore::Create(const StoreOptions& options) {
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<Arena> arena,
                          Arena::Create(options.capacity_bytes, options.backing));
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<ExtentAllocator> allocator,
                          ExtentAllocator::Create(arena->size(), Arena::kBlockBytes));
  return std::unique_ptr<ObjectStore>(
      new ObjectStore(options, std::move(arena), std::move(allocator)));
}

ObjectStore::ObjectStore(StoreOptions options, std::unique_ptr<Arena> arena,
                         std::unique_ptr<ExtentAllocator> allocator)
    : options_(std::move(options)),
      arena_(std::move(arena)),
      allocator_(std::move(allocator)),
      impl_(std::make_unique<Impl>()) {
  options_.capacity_bytes = arena_->size();
  if (options_.max_value_bytes == 0 || options_.max_value_bytes > arena_->size()) {
    options_.max_value_bytes = arena_->size();
  }
  impl_->allocator = allocator_.get();
  impl_->clock = options_.ttl_clock ? options_.ttl_clock : SteadyTtlClock::Get();
  impl_->eviction_sink = options_.eviction_sink;
  impl_->next_sequence.store(std::max<uint64_t>(options_.first_sequence, 1));
  impl_->admission.max_index_bytes = options_.max_index_bytes;
  impl_->admission.max_reserved_bytes = options_.max_reserved_bytes;
  impl_->admission.max_pinned_bytes = options_.max_pinned_bytes;
  impl_->admission.index_bytes_elsewhere = options_.index_bytes_elsewhere;
}

ObjectStore::~ObjectStore() {
  std::vector<StoredObject*> retired;
  for (auto& shard : impl_->shards) {
    MutexLock lock(shard.mu);
    while (!shard.index.empty()) {
      StoredObject* o = shard.index.begin()->second;
      impl_->RetireLocked(shard, o);
      retired.push_back(o);
    }
  }
  for (StoredObject* o : retired)
    impl_->Unref(o);
  const uint64_t outstanding = impl_->Sum(&Impl::Shard::live_objects);
  if (outstanding != 0) {
    // A contract violation by the caller: releasing those handles later is use-after-free.
    log::Error("store: destroyed while {} handle(s) still pin objects or reservations",
               outstanding);
  }
}

namespace {

Status CheckName(const StoreOptions& options, std::string_view ns, std::string_view key) {
  if (key.empty()) return Status::InvalidArgument("empty key");
  if (key.size() > options.max_key_bytes) {
    return Status::InvalidArgument("key of " + std::to_string(key.size()) +
                                   " bytes is longer than the limit of " +
                                   std::to_string(options.max_key_bytes));
  }
  if (ns.size() > options.max_namespace_bytes) {
    return Status::InvalidArgument("namespace of " + std::to_string(ns.size()) +
                                   " bytes is longer than the limit of " +
                                   std::to_string(options.max_namespace_bytes));
  }
  return Status::Ok();
}

}  // namespace

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

Result<WriteHandle> ObjectStore::Reserve(std::string_view ns, std::string_view key,
                                         uint64_t value_len, std::string_view meta,
                                         uint32_t ttl_seconds, uint64_t first_bytes) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, ns, key));
  if (value_len > options_.max_value_bytes) {
    return Status::TooLarge("value of " + std::to_string(value_len) +
                            " bytes is larger than the limit of " +
                            std::to_string(options_.max_value_bytes) + " bytes");
  }
  if (meta.size() > options_.max_meta_bytes) {
    return Status::TooLarge("metadata of " + std::to_string(meta.size()) +
                            " bytes is larger than the limit of " +
                            std::to_string(options_.max_meta_bytes) + " bytes");
  }
  // Caps first, cheapest first: a reservation over max_reserved_bytes evicts nothing.
  const uint64_t extent_bytes =
      value_len == 0 ? 0 : allocator_->RoundUp(std::clamp<uint64_t>(first_bytes, 1, value_len));
  if (!Admission::TryAdmit(impl_->admission.unwritten_bytes, extent_bytes,
                           impl_->admission.max_reserved_bytes)) {
    impl_->admission.reserve_cap_refusals.fetch_add(1, std::memory_order_relaxed);
    return Status::NoSpace("writes in progress already reserve " +
                           std::to_string(impl_->admission.max_reserved_bytes) +
                           " bytes, the node's max_reserved_bytes; retry once some complete");
  }
  const uint64_t charge = ChargeOf(ns, key, meta);
  auto admit_charge = [&] {
    return Admission::TryAdmit(impl_->admission.index_bytes, charge, impl_->admission.IndexCap());
  };
  if (!admit_charge() && !impl_->EvictUntil(admit_charge)) {
    impl_->admission.unwritten_bytes.fetch_sub(extent_bytes, std::memory_order_relaxed);
    return Status::NoSpace("no room for another object's key and metadata (max_index_bytes " +
                           std::to_string(impl_->admission.max_index_bytes) +
                           "): every object left is pinned by a reader or being written");
  }
  std::optional<Extent> extent = PlaceStep(extent_bytes, value_len, nullptr, nullptr);
  if (!extent) {
    impl_->admission.unwritten_bytes.fetch_sub(extent_bytes, std::memory_order_relaxed);
    impl_->admission.index_bytes.fetch_sub(charge, std::memory_order_relaxed);
    return Status::NoSpace("no room for " + std::to_string(value_len) +
                           " bytes: every object left is pinned by a reader or being written");
  }
  auto* o = new StoredObject;
  o->store = this;
  o->ns.assign(ns);
  o->key.assign(key);
  o->index_key = ObjectId(ns, key);
  o->meta.assign(meta);
  o->extent = *extent;
  o->data = arena_->base() + extent->offset;
  o->value_len = value_len;
  o->ttl_seconds = ttl_seconds;
  o->shard = ShardIndexOf(o->index_key);
  o->charge = charge;
  o->generation = impl_->generation.load(std::memory_order_acquire);
  Impl::Shard& shard = impl_->ShardOf(*o);
  shard.live_objects.fetch_add(1, std::memory_order_relaxed);
  // Admitted as extent_bytes, which is what the allocator hands out.
  if (extent->length != extent_bytes) {
    impl_->admission.unwritten_bytes.fetch_add(extent->length - extent_bytes,
                                               std::memory_order_relaxed);
  }
  impl_->admission.reserved_bytes.fetch_add(extent->length, std::memory_order_relaxed);
  return WriteHandle(o);
}

Status ObjectStore::Grow(WriteHandle& handle, uint64_t capacity) {
  StoredObject* o = handle.object_;
  if (!o) return Status::InvalidArgument("grow of an empty write handle");
  const uint64_t target = allocator_->RoundUp(std::min(capacity, o->value_len));
  if (target <= o->extent.length) return Status::Ok();
  const uint64_t more = target - o->extent.length;
  if (!Admission::TryAdmit(impl_->admission.unwritten_bytes, more,
                           impl_->admission.max_reserved_bytes)) {
    impl_->admission.reserve_cap_refusals.fetch_add(1, std::memory_order_relaxed);
    return Status::NoSpace("writes in progress already reserve " +
                           std::to_string(impl_->admission.max_reserved_bytes) +
                           " bytes not yet written, the node's max_reserved_bytes");
  }
  const Extent before = o->extent;
  bool in_place = false;
  std::optional<Extent> moved = PlaceStep(target, o->value_len, &o->extent, &in_place);
  if (in_place) {
    impl_->admission.reserved_bytes.fetch_add(o->extent.length - before.length,
                                              std::memory_order_relaxed);
    return Status::Ok();
  }
  if (!moved) {
    impl_->admission.unwritten_bytes.fetch_sub(more, std::memory_order_relaxed);
    return Status::NoSpace("no room to grow a reservation to " + std::to_string(target) +
                           " bytes: every object left is pinned by a reader or being written");
  }
  uint8_t* to = arena_->base() + moved->offset;
  std::memcpy(to, o->data, o->written);
  o->extent = *moved;
  o->data = to;
  impl_->admission.reserved_bytes.fetch_add(moved->length - before.length,
                                            std::memory_order_relaxed);
  impl_->admission.reservation_moves.fetch_add(1, std::memory_order_relaxed);
  impl_->admission.reservation_moved_bytes.fetch_add(o->written, std::memory_order_relaxed);
  Status freed = allocator_->Free(before);
  if (!freed.ok()) log::Error("store: {}", freed.ToString());
  return Status::Ok();
}

Status ObjectStore::Commit(WriteHandle&& handle, uint64_t* sequence) {
  return CommitVersion(std::move(handle), /*if_absent=*/false, sequence);
}

Status ObjectStore::CommitIfAbsent(WriteHandle&& handle) {
  return CommitVersion(std::move(handle), /*if_absent=*/true, nullptr);
}

uint64_t ObjectStore::NewSequence() {
  return impl_->NewSequence();
}

Status ObjectStore::CommitVersion(WriteHandle&& handle, bool if_absent, uint64_t* sequence) {
  StoredObject* o = handle.object_;
  if (!o) return Status::InvalidArgument("commit of an empty write handle");
  if (o->store != this) return Status::InvalidArgument("commit of another store's write handle");
  if (o->extent.length < o->value_len) {
    return Status::InvalidArgument("commit of a reservation of " +
                                   std::to_string(o->extent.length) + " bytes for a value of " +
                                   std::to_string(o->value_len) + " (grow it first)");
  }
  handle.object_ = nullptr;  // its reference becomes the index's
  const uint64_t now = impl_->clock->NowMillis();
  StoredObject* old = nullptr;
  bool stale = false;
  bool present = false;  // if_absent, and a live version is visible: this one is dropped
  {
    Impl::Shard& shard = impl_->ShardOf(*o);
    MutexLock lock(shard.mu);
    // Reserved before a DropAll that has happened since: this commit is ordered just before
    // that drop, so the write succeeded and was dropped with everything else. It never becomes
    // visible and replaces nothing (a newer version of the key stays). Checked in the same
    // critical section as the insert, so no stale version can land behind DropAll's pass.
    stale = impl_->StaleLocked(*o);
    if (!stale && if_absent) {
      auto it = shard.index.find(o->index_key);
      present = it != shard.index.end() && !impl_->StaleLocked(*it->second) &&
                !IsExpired(*it->second, now);
    }
    if (!stale && !present) {
      if (o->sequence.load(std::memory_order_relaxed) == 0) {
        o->sequence.store(impl_->NewSequence(), std::memory_order_relaxed);
      }
      if (sequence != nullptr) *sequence = o->sequence.load(std::memory_order_relaxed);
      o->expires_at_ms =
          o->ttl_seconds == kNoExpiry ? kNeverExpires : now + uint64_t{o->ttl_seconds} * 1000;
      auto [it, inserted] = shard.index.try_emplace(o->index_key, o);
      if (!inserted) {
        old = std::exchange(it->second, o);
      }
      // The new version is counted before the old one is taken away, so a replacement never
      // makes its namespace look empty.
      impl_->ShowLocked(shard, o);
      if (old) impl_->HideLocked(shard, old);
      impl_->admission.EndReservation(*o);
      if (impl_->use_hook) impl_->use_hook(o->ns, o->key);
    }
  }
  if (stale || present) impl_->Unref(o);  // still a reservation: Unref frees it as Abort would
  if (old) impl_->Unref(old);
  if (present) return Status::Aborted("another version of the key is visible: it stays");
  return Status::Ok();
}

void ObjectStore::Abort(WriteHandle&& handle) {
  StoredObject* o = std::exchange(handle.object_, nullptr);
  if (o) impl_->Unref(o);
}

Result<ReadHandle> ObjectStore::Lookup(std::string_view ns, std::string_view key) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, ns, key));
  const std::string& index_key = LookupKey(ns, key);
  Impl::Shard& shard = impl_->ShardFor(index_key);
  bool over_cap = false;
  StoredObject* found = impl_->PinLive(shard, index_key, impl_->clock->NowMillis(), &over_cap);
  if (over_cap) return PinCapStatus(impl_->admission.max_pinned_bytes);
  if (!found) {
    shard.misses.fetch_add(1, std::memory_order_relaxed);
    return Miss();
  }
  shard.hits.fetch_add(1, std::memory_order_relaxed);
  return ReadHandle(found);
}

Status ObjectStore::Exists(std::string_view ns, std::string_view key, uint64_t* value_length,
                           uint64_t* meta_length) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, ns, key));
  const bool live =
      impl_->ProbeLive(LookupKey(ns, key), impl_->clock->NowMillis(), value_length, meta_length);
  return live ? Status::Ok() : Miss();
}

Status ObjectStore::Delete(std::string_view ns, std::string_view key) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, ns, key));
  const bool removed = impl_->RemoveLive(LookupKey(ns, key), impl_->clock->NowMillis());
  return removed ? Status::Ok() : Miss();
}

Result<ReadHandle> ObjectStore::LookupInAnyNamespace(std::string_view key,
                                                     const NamespaceFilter& allowed) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, "", key));
  const uint64_t now = impl_->clock->NowMillis();
  Impl::Shard& shard = impl_->shards[ShardIndexOfKey(key)];
  Impl::Retired retired;
  StoredObject* found = nullptr;
  bool over_cap = false;
  {
    MutexLock lock(shard.mu);
    found = impl_->FirstLiveOfKeyLocked(shard, key, now, allowed, &retired);
    if (found) found = impl_->PinFoundLocked(shard, found, &over_cap);
  }
  impl_->UnrefAll(retired);
  if (over_cap) return PinCapStatus(impl_->admission.max_pinned_bytes);
  // One hit or miss for the whole search.
  (found ? shard.hits : shard.misses).fetch_add(1, std::memory_order_relaxed);
  if (!found) return Miss();
  return ReadHandle(found);
}

Status ObjectStore::ExistsInAnyNamespace(std::string_view key, uint64_t* value_length,
                                         const NamespaceFilter& allowed) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, "", key));
  const uint64_t now = impl_->clock->NowMillis();
  Impl::Shard& shard = impl_->shards[ShardIndexOfKey(key)];
  Impl::Retired retired;
  bool live = false;
  {
    MutexLock lock(shard.mu);
    const StoredObject* found = impl_->FirstLiveOfKeyLocked(shard, key, now, allowed, &retired);
    live = found != nullptr;
    if (live && value_length) *value_length = found->value_len;
  }
  impl_->UnrefAll(retired);
  return live ? Status::Ok() : Miss();
}

Status ObjectStore::DeleteInEveryNamespace(std::string_view key, uint64_t* deleted,
                                           const NamespaceFilter& allowed) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, "", key));
  const uint64_t now = impl_->clock->NowMillis();
  Impl::Shard& shard = impl_->shards[ShardIndexOfKey(key)];
  Impl::Retired retired;  // the expired met, then the live ones removed
  uint64_t removed = 0;
  {
    MutexLock lock(shard.mu);
    std::vector<StoredObject*> live;
    impl_->ForEachLiveOfKeyLocked(shard, key, now, allowed, &retired,
                                  [&](StoredObject* o) { live.push_back(o); });
    for (StoredObject* o : live) {
      impl_->RetireLocked(shard, o);
      retired.Add(o);
    }
    removed = live.size();
  }
  impl_->UnrefAll(retired);
  if (deleted) *deleted = removed;
  return removed > 0 ? Status::Ok() : Miss();
}

Result<KeyListing> ObjectStore::ListKeys(std::string_view ns, std::string_view cursor,
                                         size_t limit) {
  if (limit == 0) return Status::InvalidArgument("list limit must be at least 1");
  if (ns.size() > options_.max_namespace_bytes) {
    return Status::InvalidArgument("namespace of " + std::to_string(ns.size()) +
                                   " bytes is longer than the limit of " +
                                   std::to_string(options_.max_namespace_bytes));
  }
  const uint64_t now = impl_->clock->NowMillis();
  // The limit + 1 smallest keys after the cursor (one more than a page tells whether the page
  // is the last): each shard is read in key order from the cursor, and only until its keys are
  // larger than the limit + 1 smallest found so far.
  std::set<std::string, std::less<>> smallest;
  for (auto& shard : impl_->shards) {
    MutexLock lock(shard.mu);
    const ShardNamespace* part = shard.namespaces.Find(ns);
    if (part == nullptr) continue;
    const auto& in_key_order = part->in_key_order;
    for (auto it = in_key_order.upper_bound(cursor); it != in_key_order.end(); ++it) {
      const StoredObject* o = *it;
      if (smallest.size() > limit && o->key >= *std::prev(smallest.end())) break;
      if (IsExpired(*o, now) || impl_->StaleLocked(*o)) continue;
      if (smallest.size() > limit) smallest.erase(std::prev(smallest.end()));
      smallest.insert(o->key);
    }
  }
  KeyListing page;
  const bool more = smallest.size() > limit;
  if (more) smallest.erase(std::prev(smallest.end()));
  page.keys.assign(smallest.begin(), smallest.end());
  if (more) page.next_cursor = page.keys.back();
  return page;
}

uint64_t ObjectStore::Sweep() {
  const uint64_t now = impl_->clock->NowMillis();
  std::vector<StoredObject*> expired;
  for (auto& shard : impl_->shards) {
    MutexLock lock(shard.mu);
    const size_t before = expired.size();
    // The heap's top expires first: only what expired is visited (RetireLocked takes it out).
    while (!shard.expiry.empty() && IsExpired(*shard.expiry.top(), now)) {
      StoredObject* o = shard.expiry.top();
      impl_->RetireLocked(shard, o);
      expired.push_back(o);
    }
    shard.expirations.fetch_add(expired.size() - before, std::memory_order_relaxed);
  }
  for (StoredObject* o : expired)
    impl_->Unref(o);
  return expired.size();
}

uint64_t ObjectStore::DropAll() {
  // Everything is out of view from this instant on (see Impl::generation); the pass below only
  // reclaims what it can.
  const uint64_t dropped_generation = impl_->generation.fetch_add(1, std::memory_order_acq_rel);
  std::vector<StoredObject*> dropped;
  for (auto& shard : impl_->shards) {
    MutexLock lock(shard.mu);
    for (auto it = shard.index.begin(); it != shard.index.end();) {
      StoredObject* o = it->second;
      ++it;  // RetireLocked erases o's entry
      // A newer version (reserved after the bump) stays; only the dropped generations go.
      if (o->generation > dropped_generation) continue;
      impl_->RetireLocked(shard, o);
      dropped.push_back(o);
    }
  }
  for (StoredObject* o : dropped)
    impl_->Unref(o);
  return dropped.size();
}

StoreStats ObjectStore::Stats() const {
  using Shard = Impl::Shard;
  AllocatorStats a = allocator_->Stats();
  StoreStats s;
  s.capacity_bytes = a.capacity_bytes;
  s.used_bytes = a.used_bytes;
  s.value_bytes = impl_->Sum(&Shard::value_bytes);
  s.reserved_bytes = impl_->admission.reserved_bytes.load(std::memory_order_relaxed);
  s.reserved_unwritten_bytes = impl_->admission.unwritten_bytes.load(std::memory_order_relaxed);
  s.reservation_moves = impl_->admission.reservation_moves.load(std::memory_order_relaxed);
  s.reservation_moved_bytes =
      impl_->admission.reservation_moved_bytes.load(std::memory_order_relaxed);
  const uint64_t visible = impl_->Sum(&Shard::visible_alloc_bytes);
  // A snapshot of independent counters: clamp rather than wrap if they disagree for a moment.
  s.retired_bytes =
      a.used_bytes > visible + s.reserved_bytes ? a.used_bytes - visible - s.reserved_bytes : 0;
  s.objects = impl_->Sum(&Shard::objects);
  s.hits = impl_->Sum(&Shard::hits);
  s.misses = impl_->Sum(&Shard::misses);
  s.evictions = impl_->Sum(&Shard::evictions);
  s.expirations = impl_->Sum(&Shard::expirations);
  s.free_extents = a.free_extents;
  s.largest_free_bytes = a.largest_free_bytes;
  s.index_bytes = impl_->admission.index_bytes.load(std::memory_order_relaxed);
  s.pinned_bytes = impl_->admission.pinned_bytes.load(std::memory_order_relaxed);
  s.max_index_bytes = impl_->admission.max_index_bytes;
  s.max_reserved_bytes = impl_->admission.max_reserved_bytes;
  s.max_pinned_bytes = impl_->admission.max_pinned_bytes;
  s.reserve_cap_refusals = impl_->admission.reserve_cap_refusals.load(std::memory_order_relaxed);
  s.pin_cap_refusals = impl_->admission.pin_cap_refusals.load(std::memory_order_relaxed);
  return s;
}

std::vector<NamespaceUsage> ObjectStore::NamespaceUsages() const {
  // Shard by shard (each shard's counts are exact under its mutex), added up by name.
  std::map<std::string, NamespaceUsage, std::less<>> total;
  for (auto& shard : impl_->shards) {
    MutexLock lock(shard.mu);
    for (const auto& [name, counts] : shard.namespaces.all()) {
      auto it = total.find(name);
      if (it == total.end()) it = total.emplace(name, NamespaceUsage{name, 0, 0, 0}).first;
      it->second.objects += counts.objects;
      it->second.value_bytes += counts.value_bytes;
      it->second.meta_bytes += counts.meta_bytes;
    }
  }
  std::vector<NamespaceUsage> out;
  out.reserve(total.size());
  for (auto& [name, usage] : total)
    out.push_back(std::move(usage));
  return out;
}

NamespaceUsage ObjectStore::UsageOf(std::string_view ns) const {
  NamespaceUsage usage{std::string(ns), 0, 0, 0};
  for (auto& shard : impl_->shards) {
    MutexLock lock(shard.mu);
    const ShardNamespace* part = shard.namespaces.Find(ns);
    if (part == nullptr) continue;
    usage.objects += part->objects;
    usage.value_bytes += part->value_bytes;
    usage.meta_bytes += part->meta_bytes;
  }
  return usage;
}

void ObjectStore::SetUseHookForTesting(UseHook hook) {
  impl_->use_hook = std::move(hook);
}

Status ObjectStore::SetExpiry(std::string_view ns, std::string_view key, uint64_t ttl_ms,
                              uint64_t* sequence) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, ns, key));
  const std::string& index_key = LookupKey(ns, key);
  const uint64_t now = impl_->clock->NowMillis();
  StoredObject* expired = nullptr;
  bool found = false;
  {
    Impl::Shard& shard = impl_->ShardFor(index_key);
    MutexLock lock(shard.mu);
    StoredObject* o = impl_->FindLiveLocked(shard, index_key, now, &expired);
    if (o != nullptr) {
      found = true;
      // Out of the expiry heap and back in at its new place (or not at all: never expires).
      shard.expiry.Remove(o);
      o->expires_at_ms = ttl_ms == 0 ? kNeverExpires : now + ttl_ms;
      if (o->expires_at_ms != kNeverExpires) shard.expiry.Add(o);
      o->sequence.store(impl_->NewSequence(), std::memory_order_relaxed);
      if (sequence != nullptr) *sequence = o->sequence.load(std::memory_order_relaxed);
    }
  }
  if (expired) impl_->Unref(expired);
  return found ? Status::Ok() : Miss();
}

Status ObjectStore::AttachMeta(std::string_view ns, std::string_view key, std::string_view meta,
                               uint64_t* sequence) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, ns, key));
  if (meta.empty()) return Status::InvalidArgument("no metadata to attach");
  if (meta.size() > options_.max_meta_bytes) {
    return Status::TooLarge("metadata of " + std::to_string(meta.size()) +
                            " bytes is longer than max_meta_bytes " +
                            std::to_string(options_.max_meta_bytes));
  }
  const std::string& index_key = LookupKey(ns, key);
  const uint64_t now = impl_->clock->NowMillis();
  StoredObject* expired = nullptr;
  Status status = Miss();
  {
    Impl::Shard& shard = impl_->ShardFor(index_key);
    MutexLock lock(shard.mu);
    StoredObject* o = impl_->FindLiveLocked(shard, index_key, now, &expired);
    if (o != nullptr) {
      if (!o->Meta().empty()) {
        status = Status::Aborted("the object has metadata already");
      } else if (!Admission::TryAdmit(impl_->admission.index_bytes, meta.size(),
                                      impl_->admission.IndexCap())) {
        status = Status::NoSpace("no room for the metadata (max_index_bytes " +
                                 std::to_string(impl_->admission.max_index_bytes) + ")");
      } else {
        // Counted as the object's own: in its charge (given back with the object) and its
        // namespace's meta bytes.
        o->attached_meta.store(new std::string(meta), std::memory_order_release);
        o->charge += meta.size();
        shard.namespaces.Find(o->ns)->meta_bytes += meta.size();
        o->sequence.store(impl_->NewSequence(), std::memory_order_relaxed);
        if (sequence != nullptr) *sequence = o->sequence.load(std::memory_order_relaxed);
        status = Status::Ok();
      }
    }
  }
  if (expired) impl_->Unref(expired);
  return status;
}

Status ObjectStore::ExpiryOf(std::string_view ns, std::string_view key, uint64_t* ttl_left_ms) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, ns, key));
  const std::string& index_key = LookupKey(ns, key);
  const uint64_t now = impl_->clock->NowMillis();
  StoredObject* expired = nullptr;
  bool found = false;
  {
    Impl::Shard& shard = impl_->ShardFor(index_key);
    MutexLock lock(shard.mu);
    const StoredObject* o = impl_->FindLiveLocked(shard, index_key, now, &expired);
    if (o != nullptr) {
      found = true;
      *ttl_left_ms = TtlLeftMs(o->expires_at_ms, now);
    }
  }
  if (expired) impl_->Unref(expired);
  return found ? Status::Ok() : Miss();
}

}  // namespace kvport::store
