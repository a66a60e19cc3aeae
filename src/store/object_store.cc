// SPDX-License-Identifier: Apache-2.0
// ObjectStore's calls (object_store.h) over its Impl (object_store_impl.h): each checks its
// arguments, takes the shard it needs and does its work with the Impl's helpers.
#include "store/object_store.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
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
#include "store/object_store_impl.h"
#include "store/stored_object.h"

namespace kvport::store {

namespace {

// A miss. The code says it all and a batched request may meet thousands, so it carries no
// message (and so allocates nothing).
Status Miss() {
  return Status(StatusCode::kNotFound, std::string());
}

}  // namespace

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
    // One pass: an erase moves no other entry, so the iterator stays valid (begin() of a set
    // emptied from the front would scan its emptied slots each time).
    for (auto it = shard.index.begin(); it != shard.index.end();) {
      StoredObject* o = *it;
      ++it;
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
  StoredObject* o = StoredObject::New(ns, key, meta);
  o->store = this;
  o->extent = *extent;
  o->data = arena_->base() + extent->offset;
  o->value_len = value_len;
  o->ttl_seconds = ttl_seconds;
  o->shard = static_cast<uint8_t>(ShardIndexOf(o->index_key()));
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
      auto it = shard.index.find(o->index_key());
      present = it != shard.index.end() && !impl_->StaleLocked(**it) && !IsExpired(**it, now);
    }
    if (!stale && !present) {
      if (o->sequence.load(std::memory_order_relaxed) == 0) {
        o->sequence.store(impl_->NewSequence(), std::memory_order_relaxed);
      }
      if (sequence != nullptr) *sequence = o->sequence.load(std::memory_order_relaxed);
      o->expires_at_ms =
          o->ttl_seconds == kNoExpiry ? kNeverExpires : now + uint64_t{o->ttl_seconds} * 1000;
      old = shard.IndexReplaceLocked(o);
      // The new version is counted before the old one is taken away, so a replacement never
      // makes its namespace look empty.
      impl_->ShowLocked(shard, o);
      if (old) impl_->HideLocked(shard, old);
      impl_->admission.EndReservation(*o);
      if (impl_->use_hook) impl_->use_hook(o->ns(), o->key());
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

void ObjectStore::ExistsMany(std::string_view ns, std::span<const std::string_view> keys,
                             std::span<StatusCode> codes, std::span<uint64_t> value_lengths) {
  // In windows of keys, so that what a thread keeps for its probes stays bounded.
  constexpr size_t kWindow = 1024;
  for (size_t first = 0; first < keys.size(); first += kWindow) {
    const size_t n = std::min(kWindow, keys.size() - first);
    ExistsWindow(ns, keys.subspan(first, n), codes.subspan(first, n),
                 value_lengths.subspan(first, n));
  }
}

void ObjectStore::ExistsWindow(std::string_view ns, std::span<const std::string_view> keys,
                               std::span<StatusCode> codes, std::span<uint64_t> value_lengths) {
  struct Probe {
    size_t key;     // its place in keys
    size_t shard;   // its index shard
    size_t hash;    // of its index key, in the shard's index
    size_t offset;  // of its index key in `names`
    size_t bytes;   // of its index key
  };
  // The index keys, one after another, and the probes in key order then in shard order: this
  // thread's buffers, which keep their capacity, so that a probe allocates nothing once the
  // thread has seen its size.
  thread_local std::string names;
  thread_local std::vector<Probe> in_key_order;
  thread_local std::vector<Probe> probes;
  names.clear();
  in_key_order.clear();
  std::array<size_t, kShardCount + 1> shard_start{};
  for (size_t i = 0; i < keys.size(); ++i) {
    codes[i] = StatusCode::kNotFound;
    value_lengths[i] = 0;
    Status name = CheckName(options_, ns, keys[i]);
    if (!name.ok()) {
      codes[i] = name.code();
      continue;
    }
    const size_t offset = names.size();
    const size_t bytes = ObjectIdBytes(ns, keys[i]);
    names.resize(offset + bytes);
    WriteObjectId(ns, keys[i], names.data() + offset);
    const size_t shard = ShardIndexOfKey(keys[i]);
    in_key_order.push_back({i, shard, 0, offset, bytes});
    shard_start[shard + 1] += 1;
  }
  // A counting sort by shard.
  for (size_t shard = 0; shard < kShardCount; ++shard)
    shard_start[shard + 1] += shard_start[shard];
  probes.resize(in_key_order.size());
  std::array<size_t, kShardCount> next = {};
  std::copy_n(shard_start.begin(), kShardCount, next.begin());
  for (const Probe& p : in_key_order)
    probes[next[p.shard]++] = p;
  auto index_key_of = [&](const Probe& p) {
    return std::string_view(names.data() + p.offset, p.bytes);
  };
  const uint64_t now = impl_->clock->NowMillis();
  Impl::Retired retired;
  for (size_t shard_number = 0; shard_number < kShardCount; ++shard_number) {
    const size_t first = shard_start[shard_number], last = shard_start[shard_number + 1];
    if (first == last) continue;
    Impl::Shard& shard = impl_->shards[shard_number];
    MutexLock lock(shard.mu);
    // Every slot this shard's keys hash to is requested from memory before any is searched.
    for (size_t p = first; p < last; ++p) {
      probes[p].hash = shard.index.hash_function()(index_key_of(probes[p]));
      shard.index.prefetch(index_key_of(probes[p]));
    }
    for (size_t p = first; p < last; ++p) {
      StoredObject* expired = nullptr;
      const StoredObject* o =
          impl_->FindLiveLocked(shard, index_key_of(probes[p]), probes[p].hash, now, &expired);
      if (expired != nullptr) retired.Add(expired);
      if (o == nullptr) continue;
      codes[probes[p].key] = StatusCode::kOk;
      value_lengths[probes[p].key] = o->value_len;
    }
  }
  impl_->UnrefAll(retired);
  // Keys are at most max_key_bytes each: a window of long ones is not kept.
  if (names.capacity() > 256 * 1024) std::string().swap(names);
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
      if (smallest.size() > limit && o->key() >= *std::prev(smallest.end())) break;
      if (IsExpired(*o, now) || impl_->StaleLocked(*o)) continue;
      if (smallest.size() > limit) smallest.erase(std::prev(smallest.end()));
      smallest.insert(std::string(o->key()));
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
      StoredObject* o = *it;
      ++it;  // RetireLocked erases o's entry (an erase moves no other entry)
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
        // Counted as the object's own: in its charge (ChargeOf its Meta(), given back with the
        // object) and its namespace's meta bytes.
        o->attached_meta.store(new std::string(meta), std::memory_order_release);
        shard.namespaces.Find(o->ns())->meta_bytes += meta.size();
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
