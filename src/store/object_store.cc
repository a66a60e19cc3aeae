#include "store/object_store.h"

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "common/thread_annotations.h"
#include "kvport/log.h"
#include "store/extent_allocator.h"

// Lock order (outer first): shard mutex -> lru_mu -> ns_mu -> allocator's mutex. No path takes
// an outer lock while holding an inner one; the evictor, which starts from the LRU list, drops
// lru_mu before it takes the victim's shard mutex (see EvictOne).
//
// The locks are kvport::Mutex with clang thread-safety annotations (common/thread_annotations.h),
// checked by the clang build: what each one guards is declared below (GUARDED_BY), and each
// *Locked helper states the lock it needs (REQUIRES). Two things the analysis cannot express
// are commented instead: a StoredObject's `state` and `expires_at_ms` are guarded by the mutex
// of the shard that `shard` names, and its lru_* fields by Impl::lru_mu (the object does not
// know its store's Impl); the helpers that touch them require those locks.

namespace kvport::store {

namespace {

constexpr size_t kShardCount = 64;
constexpr uint64_t kNeverExpires = UINT64_MAX;

enum class ObjectState : uint8_t {
  kReserved,  // owned by a WriteHandle, invisible
  kVisible,   // in the index (and in the LRU list)
  kRetired,   // removed from the index; lives on while pinned
};

}  // namespace

// One version of one object. Lifetime is a reference count: the WriteHandle (while reserved)
// or the index (while visible) holds one reference, and each ReadHandle holds one more. The
// last Unref frees the extent and the object.
struct StoredObject {
  ObjectStore* store = nullptr;
  std::string ns;
  std::string key;
  std::string index_key;
  std::string meta;
  Extent extent;
  uint8_t* data = nullptr;
  uint64_t value_len = 0;
  uint32_t ttl_seconds = 0;
  size_t shard = 0;
  std::atomic<uint32_t> refs{1};
  // Guarded by the mutex of shards[shard] once the object has been committed (before that, the
  // WriteHandle's thread owns it alone).
  ObjectState state = ObjectState::kReserved;
  uint64_t expires_at_ms = kNeverExpires;
  // Guarded by lru_mu. The list runs from the most (head) to the least (tail) recently used.
  StoredObject* lru_prev = nullptr;
  StoredObject* lru_next = nullptr;
  bool in_lru = false;
};

namespace {

// (ns, key) as one string: a 4-byte length of ns, ns, then key. The length prefix keeps
// ("a", "bc") and ("ab", "c") apart without forbidding any byte in names.
std::string MakeIndexKey(std::string_view ns, std::string_view key) {
  std::string k;
  k.reserve(4 + ns.size() + key.size());
  const auto n = static_cast<uint32_t>(ns.size());
  for (int i = 0; i < 4; ++i)
    k.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  k.append(ns);
  k.append(key);
  return k;
}

bool IsExpired(const StoredObject& o, uint64_t now_ms) {
  return now_ms >= o.expires_at_ms;
}

size_t ShardIndexOf(const std::string& index_key) {
  return std::hash<std::string>{}(index_key) % kShardCount;
}

}  // namespace

struct ObjectStore::Impl {
  struct Shard {
    Mutex mu;
    std::unordered_map<std::string, StoredObject*> index GUARDED_BY(mu);
  };

  enum class EvictOutcome { kRemoved, kSkippedPinned, kNothingEvictable };

  ExtentAllocator* allocator = nullptr;
  const Clock* clock = nullptr;
  std::array<Shard, kShardCount> shards;

  Mutex lru_mu;
  StoredObject* lru_head GUARDED_BY(lru_mu) = nullptr;
  StoredObject* lru_tail GUARDED_BY(lru_mu) = nullptr;
  uint64_t lru_size GUARDED_BY(lru_mu) = 0;

  mutable Mutex ns_mu ACQUIRED_AFTER(lru_mu);
  std::map<std::string, NamespaceUsage, std::less<>> ns_usage GUARDED_BY(ns_mu);

  std::atomic<uint64_t> hits{0}, misses{0}, evictions{0}, expirations{0};
  std::atomic<uint64_t> objects{0}, value_bytes{0};
  std::atomic<uint64_t> visible_alloc_bytes{0}, reserved_alloc_bytes{0};
  std::atomic<uint64_t> live_objects{0};  // allocated StoredObjects, any state

  Shard& ShardOf(const StoredObject& o) { return shards[o.shard]; }

  // --- LRU list (lru_mu held) ---
  void LruPushFrontLocked(StoredObject* o) REQUIRES(lru_mu) {
    o->lru_prev = nullptr;
    o->lru_next = lru_head;
    if (lru_head) lru_head->lru_prev = o;
    lru_head = o;
    if (!lru_tail) lru_tail = o;
    o->in_lru = true;
    ++lru_size;
  }
  void LruUnlinkLocked(StoredObject* o) REQUIRES(lru_mu) {
    if (!o->in_lru) return;
    (o->lru_prev ? o->lru_prev->lru_next : lru_head) = o->lru_next;
    (o->lru_next ? o->lru_next->lru_prev : lru_tail) = o->lru_prev;
    o->lru_prev = o->lru_next = nullptr;
    o->in_lru = false;
    --lru_size;
  }

  // --- namespace accounting (ns_mu held) ---
  void NsAddLocked(const StoredObject& o) REQUIRES(ns_mu) {
    auto it = ns_usage.find(o.ns);
    if (it == ns_usage.end()) it = ns_usage.emplace(o.ns, NamespaceUsage{o.ns, 0, 0, 0}).first;
    it->second.objects += 1;
    it->second.value_bytes += o.value_len;
    it->second.meta_bytes += o.meta.size();
  }
  void NsSubLocked(const StoredObject& o) REQUIRES(ns_mu) {
    auto it = ns_usage.find(o.ns);
    if (it == ns_usage.end()) return;
    it->second.objects -= 1;
    it->second.value_bytes -= o.value_len;
    it->second.meta_bytes -= o.meta.size();
    if (it->second.objects == 0) ns_usage.erase(it);
  }

  // Takes a visible object out of view (shard mutex held). The index's reference is not
  // dropped here: the caller Unrefs after unlocking, so no free happens under a shard lock.
  void RetireLocked(Shard& shard, StoredObject* o) REQUIRES(shard.mu) EXCLUDES(lru_mu, ns_mu) {
    shard.index.erase(o->index_key);
    o->state = ObjectState::kRetired;
    {
      MutexLock lru_lock(lru_mu);
      LruUnlinkLocked(o);
    }
    {
      MutexLock ns_lock(ns_mu);
      NsSubLocked(*o);
    }
    objects.fetch_sub(1, std::memory_order_relaxed);
    value_bytes.fetch_sub(o->value_len, std::memory_order_relaxed);
    visible_alloc_bytes.fetch_sub(o->extent.length, std::memory_order_relaxed);
  }

  // Takes the allocator's mutex (inside ExtentAllocator) when it frees: never with a shard
  // mutex held (frees happen outside them), though the lock order would allow it.
  void Unref(StoredObject* o) {
    if (o->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (o->state == ObjectState::kReserved) {
      reserved_alloc_bytes.fetch_sub(o->extent.length, std::memory_order_relaxed);
    }
    Status freed = allocator->Free(o->extent);
    if (!freed.ok()) log::Error("store: {}", freed.ToString());
    delete o;
    live_objects.fetch_sub(1, std::memory_order_relaxed);
  }

  // Looks up a visible, unexpired object (shard mutex held). An expired one met here is
  // retired and returned through *expired for the caller to Unref after unlocking.
  StoredObject* FindLiveLocked(Shard& shard, const std::string& index_key, uint64_t now_ms,
                               StoredObject** expired) REQUIRES(shard.mu) {
    auto it = shard.index.find(index_key);
    if (it == shard.index.end()) return nullptr;
    StoredObject* o = it->second;
    if (IsExpired(*o, now_ms)) {
      RetireLocked(shard, o);
      expirations.fetch_add(1, std::memory_order_relaxed);
      *expired = o;
      return nullptr;
    }
    return o;
  }

  // The namespaces an any-namespace search visits, in its order: every namespace with a visible
  // object, by name ascending (std::string compares bytewise, so "" comes first).
  std::vector<std::string> SearchOrder() const EXCLUDES(ns_mu) {
    MutexLock ns_lock(ns_mu);
    std::vector<std::string> names;
    names.reserve(ns_usage.size());
    for (const auto& [name, usage] : ns_usage)
      names.push_back(name);
    return names;
  }

  // The live version of `index_key`, pinned and made most recently used; null if there is
  // none. Counts no hit or miss (callers count one per search).
  StoredObject* PinLive(const std::string& index_key, uint64_t now_ms) EXCLUDES(lru_mu) {
    StoredObject* expired = nullptr;
    StoredObject* found = nullptr;
    {
      Shard& shard = shards[ShardIndexOf(index_key)];
      MutexLock lock(shard.mu);
      found = FindLiveLocked(shard, index_key, now_ms, &expired);
      if (found) {
        found->refs.fetch_add(1, std::memory_order_relaxed);
        MutexLock lru_lock(lru_mu);
        // Not on the list only while an evictor holds it; the evictor will see the pin.
        if (found->in_lru) {
          LruUnlinkLocked(found);
          LruPushFrontLocked(found);
        }
      }
    }
    if (expired) Unref(expired);
    return found;
  }

  // True if `index_key` is live, with its value length in *value_length (when not null).
  bool ProbeLive(const std::string& index_key, uint64_t now_ms, uint64_t* value_length) {
    StoredObject* expired = nullptr;
    bool live = false;
    {
      Shard& shard = shards[ShardIndexOf(index_key)];
      MutexLock lock(shard.mu);
      const StoredObject* o = FindLiveLocked(shard, index_key, now_ms, &expired);
      live = o != nullptr;
      if (live && value_length) *value_length = o->value_len;
    }
    if (expired) Unref(expired);
    return live;
  }

  // Removes the live version of `index_key` from view; false if there was none.
  bool RemoveLive(const std::string& index_key, uint64_t now_ms) {
    StoredObject* expired = nullptr;
    StoredObject* removed = nullptr;
    {
      Shard& shard = shards[ShardIndexOf(index_key)];
      MutexLock lock(shard.mu);
      removed = FindLiveLocked(shard, index_key, now_ms, &expired);
      if (removed) RetireLocked(shard, removed);
    }
    if (expired) Unref(expired);
    if (!removed) return false;
    Unref(removed);
    return true;
  }

  // Removes the least recently used object if nothing pins it.
  EvictOutcome EvictOne() EXCLUDES(lru_mu, ns_mu) {
    StoredObject* victim = nullptr;
    {
      MutexLock lru_lock(lru_mu);
      victim = lru_tail;
      if (!victim) return EvictOutcome::kNothingEvictable;
      // Taking it off the list hands it to this evictor alone; the temporary reference keeps
      // it alive once lru_mu is dropped (it is visible, so the index's reference is there).
      LruUnlinkLocked(victim);
      victim->refs.fetch_add(1, std::memory_order_relaxed);
    }
    bool removed = false;
    bool pinned = false;
    {
      Shard& shard = ShardOf(*victim);
      MutexLock shard_lock(shard.mu);
      if (victim->state == ObjectState::kVisible) {
        // Pins are only taken under this mutex, so 2 (index + ours) means unpinned and stays so.
        if (victim->refs.load(std::memory_order_acquire) == 2) {
          const bool expired = IsExpired(*victim, clock->NowMillis());
          RetireLocked(shard, victim);
          (expired ? expirations : evictions).fetch_add(1, std::memory_order_relaxed);
          removed = true;
        } else {
          // Pinned: someone is reading it right now, which is a use.
          MutexLock lru_lock(lru_mu);
          if (!victim->in_lru) LruPushFrontLocked(victim);
          pinned = true;
        }
      }
      // Otherwise it was deleted or replaced meanwhile: its space is someone else's business.
    }
    Unref(victim);               // the temporary reference
    if (removed) Unref(victim);  // the index's reference: frees the extent now
    return pinned ? EvictOutcome::kSkippedPinned : EvictOutcome::kRemoved;
  }

  // Evicts in LRU order until `bytes` can be allocated. Gives up (nullopt) when the LRU list
  // is empty or every object left on it is pinned.
  std::optional<Extent> EvictUntilAllocated(uint64_t bytes) EXCLUDES(lru_mu, ns_mu) {
    uint64_t list_size = 0;
    {
      MutexLock lru_lock(lru_mu);
      list_size = lru_size;
    }
    // Each pinned object is moved to the front when skipped, so after list_size skips the
    // list has been walked once. The step cap guards against livelock with concurrent writers.
    uint64_t skips_left = list_size + 1;
    uint64_t steps_left = 2 * list_size + 64;
    while (steps_left-- > 0) {
      EvictOutcome outcome = EvictOne();
      if (auto extent = allocator->Allocate(bytes)) return extent;
      if (outcome == EvictOutcome::kNothingEvictable) return std::nullopt;
      if (outcome == EvictOutcome::kSkippedPinned && --skips_left == 0) return std::nullopt;
    }
    return allocator->Allocate(bytes);
  }
};

// ---------------------------------------------------------------------------------------------
// Handles

ReadHandle::ReadHandle(const ReadHandle& other) : object_(other.object_) {
  if (object_) object_->refs.fetch_add(1, std::memory_order_relaxed);
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
  return object_->meta;
}
std::string_view ReadHandle::ns() const {
  return object_->ns;
}
std::string_view ReadHandle::key() const {
  return object_->key;
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
  impl_->clock = options_.clock ? options_.clock : SteadyClock::Get();
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
  uint64_t outstanding = impl_->live_objects.load();
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

Result<WriteHandle> ObjectStore::Reserve(std::string_view ns, std::string_view key,
                                         uint64_t value_len, std::string_view meta,
                                         uint32_t ttl_seconds) {
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
  std::optional<Extent> extent = allocator_->Allocate(value_len);
  if (!extent) extent = impl_->EvictUntilAllocated(value_len);
  if (!extent) {
    return Status::NoSpace("no room for " + std::to_string(value_len) +
                           " bytes: every object left is pinned by a reader or being written");
  }
  auto* o = new StoredObject;
  o->store = this;
  o->ns.assign(ns);
  o->key.assign(key);
  o->index_key = MakeIndexKey(ns, key);
  o->meta.assign(meta);
  o->extent = *extent;
  o->data = arena_->base() + extent->offset;
  o->value_len = value_len;
  o->ttl_seconds = ttl_seconds;
  o->shard = ShardIndexOf(o->index_key);
  impl_->live_objects.fetch_add(1, std::memory_order_relaxed);
  impl_->reserved_alloc_bytes.fetch_add(extent->length, std::memory_order_relaxed);
  return WriteHandle(o);
}

Status ObjectStore::Commit(WriteHandle&& handle) {
  StoredObject* o = handle.object_;
  if (!o) return Status::InvalidArgument("commit of an empty write handle");
  if (o->store != this) return Status::InvalidArgument("commit of another store's write handle");
  handle.object_ = nullptr;  // its reference becomes the index's
  const uint64_t now = impl_->clock->NowMillis();
  StoredObject* old = nullptr;
  {
    Impl::Shard& shard = impl_->ShardOf(*o);
    MutexLock lock(shard.mu);
    auto it = shard.index.find(o->index_key);
    if (it != shard.index.end()) {
      old = it->second;
      impl_->RetireLocked(shard, old);
    }
    o->expires_at_ms =
        o->ttl_seconds == kNoExpiry ? kNeverExpires : now + uint64_t{o->ttl_seconds} * 1000;
    o->state = ObjectState::kVisible;
    shard.index.emplace(o->index_key, o);
    {
      MutexLock lru_lock(impl_->lru_mu);
      impl_->LruPushFrontLocked(o);
    }
    {
      MutexLock ns_lock(impl_->ns_mu);
      impl_->NsAddLocked(*o);
    }
    impl_->objects.fetch_add(1, std::memory_order_relaxed);
    impl_->value_bytes.fetch_add(o->value_len, std::memory_order_relaxed);
    impl_->visible_alloc_bytes.fetch_add(o->extent.length, std::memory_order_relaxed);
    impl_->reserved_alloc_bytes.fetch_sub(o->extent.length, std::memory_order_relaxed);
  }
  if (old) impl_->Unref(old);
  return Status::Ok();
}

void ObjectStore::Abort(WriteHandle&& handle) {
  StoredObject* o = std::exchange(handle.object_, nullptr);
  if (o) impl_->Unref(o);
}

Result<ReadHandle> ObjectStore::Lookup(std::string_view ns, std::string_view key) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, ns, key));
  StoredObject* found = impl_->PinLive(MakeIndexKey(ns, key), impl_->clock->NowMillis());
  if (!found) {
    impl_->misses.fetch_add(1, std::memory_order_relaxed);
    return Status::NotFound("no object for this key");
  }
  impl_->hits.fetch_add(1, std::memory_order_relaxed);
  return ReadHandle(found);
}

Status ObjectStore::Exists(std::string_view ns, std::string_view key, uint64_t* value_length) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, ns, key));
  const bool live =
      impl_->ProbeLive(MakeIndexKey(ns, key), impl_->clock->NowMillis(), value_length);
  return live ? Status::Ok() : Status::NotFound("no object for this key");
}

Status ObjectStore::Delete(std::string_view ns, std::string_view key) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, ns, key));
  const bool removed = impl_->RemoveLive(MakeIndexKey(ns, key), impl_->clock->NowMillis());
  return removed ? Status::Ok() : Status::NotFound("no object for this key");
}

Result<ReadHandle> ObjectStore::LookupInAnyNamespace(std::string_view key) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, "", key));
  const uint64_t now = impl_->clock->NowMillis();
  for (const std::string& ns : impl_->SearchOrder()) {
    if (StoredObject* found = impl_->PinLive(MakeIndexKey(ns, key), now)) {
      impl_->hits.fetch_add(1, std::memory_order_relaxed);
      return ReadHandle(found);
    }
  }
  impl_->misses.fetch_add(1, std::memory_order_relaxed);
  return Status::NotFound("no object for this key in any namespace");
}

Status ObjectStore::ExistsInAnyNamespace(std::string_view key, uint64_t* value_length) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, "", key));
  const uint64_t now = impl_->clock->NowMillis();
  for (const std::string& ns : impl_->SearchOrder()) {
    if (impl_->ProbeLive(MakeIndexKey(ns, key), now, value_length)) return Status::Ok();
  }
  return Status::NotFound("no object for this key in any namespace");
}

Status ObjectStore::DeleteInEveryNamespace(std::string_view key, uint64_t* deleted) {
  KVPORT_RETURN_IF_ERROR(CheckName(options_, "", key));
  const uint64_t now = impl_->clock->NowMillis();
  uint64_t removed = 0;
  for (const std::string& ns : impl_->SearchOrder()) {
    removed += impl_->RemoveLive(MakeIndexKey(ns, key), now) ? 1 : 0;
  }
  if (deleted) *deleted = removed;
  return removed > 0 ? Status::Ok() : Status::NotFound("no object for this key in any namespace");
}

Result<KeyPage> ObjectStore::ListKeys(std::string_view ns, std::string_view cursor, size_t limit) {
  if (limit == 0) return Status::InvalidArgument("list limit must be at least 1");
  if (ns.size() > options_.max_namespace_bytes) {
    return Status::InvalidArgument("namespace of " + std::to_string(ns.size()) +
                                   " bytes is longer than the limit of " +
                                   std::to_string(options_.max_namespace_bytes));
  }
  const uint64_t now = impl_->clock->NowMillis();
  // The limit + 1 smallest keys after the cursor: one more than a page tells whether the page
  // is the last.
  std::set<std::string, std::less<>> smallest;
  for (auto& shard : impl_->shards) {
    MutexLock lock(shard.mu);
    for (const auto& [index_key, o] : shard.index) {
      if (o->ns != ns || o->key <= cursor || IsExpired(*o, now)) continue;
      if (smallest.size() > limit) {
        auto largest = std::prev(smallest.end());
        if (o->key >= *largest) continue;
        smallest.erase(largest);
      }
      smallest.insert(o->key);
    }
  }
  KeyPage page;
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
    for (auto it = shard.index.begin(); it != shard.index.end();) {
      StoredObject* o = it->second;
      ++it;  // RetireLocked erases o's entry
      if (!IsExpired(*o, now)) continue;
      impl_->RetireLocked(shard, o);
      expired.push_back(o);
    }
  }
  impl_->expirations.fetch_add(expired.size(), std::memory_order_relaxed);
  for (StoredObject* o : expired)
    impl_->Unref(o);
  return expired.size();
}

StoreStats ObjectStore::Stats() const {
  AllocatorStats a = allocator_->Stats();
  StoreStats s;
  s.capacity_bytes = a.capacity_bytes;
  s.used_bytes = a.used_bytes;
  s.value_bytes = impl_->value_bytes.load(std::memory_order_relaxed);
  s.reserved_bytes = impl_->reserved_alloc_bytes.load(std::memory_order_relaxed);
  const uint64_t visible = impl_->visible_alloc_bytes.load(std::memory_order_relaxed);
  // A snapshot of independent counters: clamp rather than wrap if they disagree for a moment.
  s.retired_bytes =
      a.used_bytes > visible + s.reserved_bytes ? a.used_bytes - visible - s.reserved_bytes : 0;
  s.objects = impl_->objects.load(std::memory_order_relaxed);
  s.hits = impl_->hits.load(std::memory_order_relaxed);
  s.misses = impl_->misses.load(std::memory_order_relaxed);
  s.evictions = impl_->evictions.load(std::memory_order_relaxed);
  s.expirations = impl_->expirations.load(std::memory_order_relaxed);
  s.free_extents = a.free_extents;
  s.largest_free_bytes = a.largest_free_bytes;
  return s;
}

std::vector<NamespaceUsage> ObjectStore::NamespaceUsages() const {
  MutexLock lock(impl_->ns_mu);
  std::vector<NamespaceUsage> out;
  out.reserve(impl_->ns_usage.size());
  for (const auto& [name, usage] : impl_->ns_usage)
    out.push_back(usage);
  return out;
}

NamespaceUsage ObjectStore::UsageOf(std::string_view ns) const {
  MutexLock lock(impl_->ns_mu);
  auto it = impl_->ns_usage.find(ns);
  if (it == impl_->ns_usage.end()) return NamespaceUsage{std::string(ns), 0, 0, 0};
  return it->second;
}

}  // namespace kvport::store
