// SPDX-License-Identifier: Apache-2.0
#include "store/tiered_store.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <iterator>
#include <mutex>
#include <utility>

#include "kvport/log.h"

namespace kvport::store {

namespace {

bool Allows(const ObjectStore::NamespaceFilter& filter, std::string_view ns) {
  return !filter || filter(ns);
}

// A reservation in memory for a version the disk tier holds, with the TTL it has left and its
// checksum.
Result<WriteHandle> ReserveFor(ObjectStore& memory, std::string_view ns, std::string_view key,
                               const WriteBehindDisk::Found& found) {
  // Whole seconds, rounded up: an object never outlives its TTL by less than a second.
  const uint64_t ttl_seconds = (found.ttl_left_ms + 999) / 1000;
  Result<WriteHandle> reserved = memory.Reserve(
      ns, key, found.value_bytes, found.meta,
      ttl_seconds == 0 ? kNoExpiry
                       : static_cast<uint32_t>(std::min<uint64_t>(ttl_seconds, UINT32_MAX)));
  // The value comes back with its checksum: its writer's, or the one the disk computed, which
  // the read from disk checks it against before it is committed.
  if (reserved.ok()) reserved->SetChecksum(found.checksum);
  return reserved;
}

// The whole reservation, where a value read from disk lands: the extent is whole blocks and
// block-aligned, so the read goes straight into it.
std::span<char> Landing(WriteHandle& handle) {
  return {reinterpret_cast<char*>(handle.data()), static_cast<size_t>(handle.capacity())};
}

// Makes a filled promotion of version `sequence` visible as that very version, unless a version
// is visible already (which stays). The disk copy stays: it is the same version (a commit or a
// delete of the key ends it), so evicting the object again writes nothing.
Status CommitPromotion(ObjectStore& memory, WriteHandle&& handle, uint64_t sequence) {
  handle.SetSequence(sequence);
  Status committed = memory.CommitIfAbsent(std::move(handle));
  return committed.code() == StatusCode::kAborted ? Status::Ok() : committed;
}

// The waiter of a change whose caller waits until it is durable (a call given no waiter).
class BlockingWaiter final : public DurabilityWaiter {
 public:
  void Begin() override {
    std::lock_guard lock(mu_);
    ++pending_;
  }
  void End(const Status& status) override {
    std::lock_guard lock(mu_);
    --pending_;
    if (!status.ok()) error_ = status;
    done_.notify_all();
  }
  // Waits for every change begun; the first error, if any.
  Status Wait() {
    std::unique_lock lock(mu_);
    done_.wait(lock, [this] { return pending_ == 0; });
    return error_;
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  int pending_ = 0;
  Status error_;
};

}  // namespace

Result<std::unique_ptr<TieredStore>> TieredStore::Open(TieredStoreOptions options) {
  std::unique_ptr<TieredStore> tiered(new TieredStore());
  if (!options.disk.dir.empty()) {
    Result<std::unique_ptr<WriteBehindDisk>> disk = WriteBehindDisk::Open(options.disk);
    if (!disk.ok()) return disk.status().WithContext("the disk tier");
    tiered->disk_ = std::move(disk).value();
    EvictionSink* sink = tiered->disk_.get();
    if (options.relay_for_testing != nullptr) {
      options.relay_for_testing->next = sink;
      sink = options.relay_for_testing;
    }
    options.memory.eviction_sink = sink;
    // Versions committed from now on are newer than every one the disk holds.
    options.memory.first_sequence = tiered->disk_->last_sequence() + 1;
    options.memory.index_bytes_elsewhere = &tiered->disk_->index_bytes();
  }
  Result<std::unique_ptr<ObjectStore>> memory = ObjectStore::Create(options.memory);
  if (!memory.ok()) return memory.status().WithContext("cannot create the store");
  tiered->memory_ = std::move(memory).value();
  return tiered;
}

TieredStore::~TieredStore() {
  // Background promotions use the memory store: none runs from here on.
  if (disk_ != nullptr) disk_->StopTasks();
  memory_.reset();  // before the disk tier its evictions go to
}

bool TieredStore::EndBelow(std::string_view ns, std::string_view key, uint64_t sequence,
                           const Waiter& waiter) {
  if (waiter != nullptr) return disk_->Erase(ns, key, sequence, waiter);
  auto blocking = std::make_shared<BlockingWaiter>();
  const bool ended = disk_->Erase(ns, key, sequence, blocking);
  Status durable = blocking->Wait();
  if (!durable.ok()) log::Warn("disk tier: {}", durable.ToString());
  return ended;
}

Mutex& TieredStore::Stripe(std::string_view ns, std::string_view key) {
  const size_t hash = std::hash<std::string_view>{}(key) ^ (std::hash<std::string_view>{}(ns)*31);
  return stripes_[hash % kStripes];
}

// ---- reads -------------------------------------------------------------------------------

Result<ReadHandle> TieredStore::Lookup(std::string_view ns, std::string_view key) {
  Result<ReadHandle> found = memory_->Lookup(ns, key);
  if (found.ok() || disk_ == nullptr || found.status().code() != StatusCode::kNotFound) {
    return found;
  }
  return Promote(ns, key);
}

Result<ReadHandle> TieredStore::LookupInAnyNamespace(std::string_view key,
                                                     const NamespaceFilter& readable) {
  Result<ReadHandle> found = memory_->LookupInAnyNamespace(key, readable);
  if (found.ok() || disk_ == nullptr || found.status().code() != StatusCode::kNotFound) {
    return found;
  }
  for (const std::string& on_disk : disk_->NamespacesOf(key)) {
    if (!Allows(readable, on_disk)) continue;
    Result<ReadHandle> promoted = Promote(on_disk, key);
    if (promoted.ok() || promoted.status().code() != StatusCode::kNotFound) return promoted;
  }
  return found;
}

Result<ReadHandle> TieredStore::Promote(std::string_view ns, std::string_view key) {
  MutexLock stripe(Stripe(ns, key));
  // Promoted by another read while this one waited for the stripe.
  if (memory_->Exists(ns, key).ok()) return memory_->Lookup(ns, key);
  KVPORT_ASSIGN_OR_RETURN(WriteBehindDisk::Found found, disk_->Find(ns, key));
  KVPORT_ASSIGN_OR_RETURN(WriteHandle handle, ReserveFor(*memory_, ns, key, found));
  if (found.queued) {  // still in the writer's queue, its value with it
    if (!found.value.empty()) std::memcpy(handle.data(), found.value.data(), found.value.size());
  } else {
    KVPORT_RETURN_IF_ERROR(disk_->ReadValue(ns, key, found.sequence, Landing(handle)));
  }
  KVPORT_RETURN_IF_ERROR(CommitPromotion(*memory_, std::move(handle), found.sequence));
  return memory_->Lookup(ns, key);
}

void TieredStore::PromoteAhead(std::string_view ns, std::span<const std::string_view> keys) {
  if (disk_ == nullptr || keys.size() < 2) return;
  std::vector<std::string_view> namespaces;
  std::vector<std::string_view> missing;
  for (std::string_view key : keys) {
    if (memory_->Exists(ns, key).code() != StatusCode::kNotFound) continue;
    namespaces.push_back(ns);
    missing.push_back(key);
  }
  PromoteMany(namespaces, missing);
}

void TieredStore::PromoteAheadInAnyNamespace(std::span<const std::string_view> keys,
                                             const NamespaceFilter& readable) {
  if (disk_ == nullptr || keys.size() < 2) return;
  std::vector<std::string> found_in;  // each missing key's first readable namespace on disk
  found_in.reserve(keys.size());      // never reallocated: the views below point into it
  std::vector<std::string_view> namespaces;
  std::vector<std::string_view> missing;
  for (std::string_view key : keys) {
    if (memory_->ExistsInAnyNamespace(key, nullptr, readable).code() != StatusCode::kNotFound) {
      continue;
    }
    for (std::string& on_disk : disk_->NamespacesOf(key)) {
      if (!Allows(readable, on_disk)) continue;
      found_in.push_back(std::move(on_disk));
      namespaces.push_back(found_in.back());
      missing.push_back(key);
      break;
    }
  }
  PromoteMany(namespaces, missing);
}

void TieredStore::PromoteMany(std::span<const std::string_view> namespaces,
                              std::span<const std::string_view> keys) {
  std::vector<WriteBehindDisk::ValueRead> reads;
  std::vector<WriteHandle> landings;
  reads.reserve(keys.size());
  landings.reserve(keys.size());  // never reallocated: the reads' spans point into them
  for (size_t i = 0; i < keys.size(); ++i) {
    // On disk (not in the queue, whose objects the lookup copies), with room for it in memory.
    Result<WriteBehindDisk::Found> found = disk_->Find(namespaces[i], keys[i]);
    if (!found.ok() || found->queued) continue;
    Result<WriteHandle> handle = ReserveFor(*memory_, namespaces[i], keys[i], *found);
    if (!handle.ok()) continue;
    landings.push_back(std::move(handle).value());
    reads.push_back(
        {namespaces[i], keys[i], found->sequence, Landing(landings.back()), Status::Ok()});
  }
  disk_->ReadMany(reads);
  for (size_t i = 0; i < reads.size(); ++i) {
    if (!reads[i].status.ok()) continue;  // the landing is aborted; the lookup says why
    MutexLock stripe(Stripe(reads[i].ns, reads[i].key));
    // Read without the stripe: made visible only if memory has no version and the disk still
    // holds the one read (a delete or a commit since removed it). Otherwise the lookup reads
    // again.
    if (memory_->Exists(reads[i].ns, reads[i].key).ok() ||
        !disk_->Holds(reads[i].ns, reads[i].key, reads[i].sequence)) {
      continue;
    }
    // Failed: the lookup says why.
    (void)CommitPromotion(*memory_, std::move(landings[i]), reads[i].sequence);
  }
}

bool TieredStore::NeedsDisk(std::string_view ns, bool any_namespace,
                            std::span<const std::string_view> keys,
                            const NamespaceFilter& readable) {
  if (disk_ == nullptr) return false;
  for (std::string_view key : keys) {
    if (!any_namespace) {
      if (memory_->Exists(ns, key).code() == StatusCode::kNotFound &&
          disk_->Contains(ns, key, nullptr)) {
        return true;
      }
      continue;
    }
    if (memory_->ExistsInAnyNamespace(key, nullptr, readable).code() != StatusCode::kNotFound) {
      continue;
    }
    for (const std::string& on_disk : disk_->NamespacesOf(key)) {
      if (Allows(readable, on_disk)) return true;
    }
  }
  return false;
}

void TieredStore::PromoteInBackground(std::string ns, bool any_namespace,
                                      std::vector<std::string> keys, NamespaceFilter readable,
                                      std::function<void()> done) {
  if (disk_ == nullptr) {
    done();
    return;
  }
  disk_->RunOnReader([this, ns = std::move(ns), any_namespace, keys = std::move(keys),
                      readable = std::move(readable), done = std::move(done)] {
    const std::vector<std::string_view> views(keys.begin(), keys.end());
    if (any_namespace) {
      PromoteAheadInAnyNamespace(views, readable);
    } else {
      PromoteAhead(ns, views);
    }
    // What the batch did not bring (one key, a value still in the write queue): one by one.
    for (std::string_view key : views) {
      Result<ReadHandle> pin =
          any_namespace ? LookupInAnyNamespace(key, readable) : Lookup(ns, key);
      (void)pin;  // a miss or a refusal is the read's to answer
    }
    done();
  });
}

Status TieredStore::Exists(std::string_view ns, std::string_view key, uint64_t* value_length,
                           uint64_t* meta_length) {
  Status in_memory = memory_->Exists(ns, key, value_length, meta_length);
  if (in_memory.code() == StatusCode::kNotFound && disk_ != nullptr &&
      disk_->Contains(ns, key, value_length, meta_length)) {
    return Status::Ok();
  }
  return in_memory;
}

void TieredStore::ExistsMany(std::string_view ns, std::span<const std::string_view> keys,
                             std::span<StatusCode> codes, std::span<uint64_t> value_lengths) {
  memory_->ExistsMany(ns, keys, codes, value_lengths);
  if (disk_ == nullptr) return;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (codes[i] == StatusCode::kNotFound && disk_->Contains(ns, keys[i], &value_lengths[i])) {
      codes[i] = StatusCode::kOk;
    }
  }
}

Status TieredStore::ExistsInAnyNamespace(std::string_view key, uint64_t* value_length,
                                         const NamespaceFilter& readable) {
  Status in_memory = memory_->ExistsInAnyNamespace(key, value_length, readable);
  if (in_memory.code() != StatusCode::kNotFound || disk_ == nullptr) return in_memory;
  for (const std::string& on_disk : disk_->NamespacesOf(key)) {
    if (Allows(readable, on_disk) && disk_->Contains(on_disk, key, value_length)) {
      return Status::Ok();
    }
  }
  return in_memory;
}

Result<uint64_t> TieredStore::TimeToLive(std::string_view ns, std::string_view key) {
  uint64_t ttl_ms = 0;
  Status found = memory_->ExpiryOf(ns, key, &ttl_ms);
  if (found.ok()) return ttl_ms;
  if (found.code() != StatusCode::kNotFound || disk_ == nullptr) return found;
  KVPORT_ASSIGN_OR_RETURN(ReadHandle pin, Lookup(ns, key));
  return pin.ttl_left_ms();
}

// ---- writes ------------------------------------------------------------------------------

Result<WriteHandle> TieredStore::Reserve(std::string_view ns, std::string_view key, uint64_t length,
                                         std::string_view meta, uint32_t ttl_seconds,
                                         uint64_t first_bytes) {
  return memory_->Reserve(ns, key, length, meta, ttl_seconds, first_bytes);
}

Status TieredStore::Grow(WriteHandle& handle, uint64_t capacity) {
  return memory_->Grow(handle, capacity);
}

Status TieredStore::Commit(WriteHandle&& handle, const Waiter& waiter) {
  if (disk_ == nullptr) return memory_->Commit(std::move(handle));
  const std::string ns(handle.ns());
  const std::string key(handle.key());
  // Under the key's stripe: a promotion of the old version reads the disk and commits either
  // wholly before this (and is replaced) or wholly after (and finds this version).
  MutexLock stripe(Stripe(ns, key));
  uint64_t sequence = 0;
  KVPORT_RETURN_IF_ERROR(memory_->Commit(std::move(handle), &sequence));
  // The new version ends every older one, on disk and on its way there.
  EndBelow(ns, key, sequence, waiter);
  return Status::Ok();
}

Status TieredStore::Delete(std::string_view ns, std::string_view key, const Waiter& waiter) {
  if (disk_ == nullptr) return memory_->Delete(ns, key);
  return DeleteBothTiers(ns, key, waiter);
}

Status TieredStore::DeleteBothTiers(std::string_view ns, std::string_view key,
                                    const Waiter& waiter) {
  MutexLock stripe(Stripe(ns, key));
  Status in_memory = memory_->Delete(ns, key);
  // A number of the delete's own: it ends every version before it, on disk, in the writer's
  // queue or still being copied there by an eviction.
  const bool ended = EndBelow(ns, key, memory_->NewSequence(), waiter);
  return ended ? Status::Ok() : in_memory;
}

Status TieredStore::DeleteInEveryNamespace(std::string_view key, const NamespaceFilter& writable,
                                           const Waiter& waiter) {
  if (disk_ == nullptr) return memory_->DeleteInEveryNamespace(key, nullptr, writable);
  // Each namespace holding it on disk: both tiers there, under its stripe; then the ones
  // holding it in memory only.
  bool deleted = false;
  for (const std::string& on_disk : disk_->NamespacesOf(key)) {
    if (!Allows(writable, on_disk)) continue;
    Status one = DeleteBothTiers(on_disk, key, waiter);
    if (!one.ok() && one.code() != StatusCode::kNotFound) return one;
    deleted = deleted || one.ok();
  }
  Status in_memory = memory_->DeleteInEveryNamespace(key, nullptr, writable);
  return deleted ? Status::Ok() : in_memory;
}

Result<uint64_t> TieredStore::DeleteNamespace(std::string_view ns, const Waiter& waiter) {
  uint64_t deleted = 0;
  std::string cursor;
  while (true) {
    KVPORT_ASSIGN_OR_RETURN(KeyListing page, memory_->ListKeys(ns, cursor, 1024));
    for (const std::string& key : page.keys) {
      if (Delete(ns, key, waiter).ok()) ++deleted;
    }
    if (page.next_cursor.empty()) break;
    cursor = std::move(page.next_cursor);
  }
  // What only the disk holds.
  if (disk_ != nullptr) {
    for (const std::string& key : disk_->KeysOf(ns)) {
      if (Delete(ns, key, waiter).ok()) ++deleted;
    }
  }
  return deleted;
}

Status TieredStore::ChangeInPlace(std::string_view ns, std::string_view key, const Waiter& waiter,
                                  const std::function<Status(uint64_t*)>& change) {
  uint64_t sequence = 0;
  if (disk_ == nullptr) return change(&sequence);
  // Only on disk: brought back into memory, then changed there.
  if (memory_->Exists(ns, key).code() == StatusCode::kNotFound) {
    KVPORT_ASSIGN_OR_RETURN(ReadHandle promoted, Lookup(ns, key));
  }
  MutexLock stripe(Stripe(ns, key));
  KVPORT_RETURN_IF_ERROR(change(&sequence));
  // The change makes another version: the disk copy (the old one) ends, and the object is
  // written again when it is evicted.
  EndBelow(ns, key, sequence, waiter);
  return Status::Ok();
}

Status TieredStore::SetExpiry(std::string_view ns, std::string_view key, uint64_t ttl_ms,
                              const Waiter& waiter) {
  return ChangeInPlace(ns, key, waiter, [&](uint64_t* sequence) {
    return memory_->SetExpiry(ns, key, ttl_ms, sequence);
  });
}

Status TieredStore::AttachMeta(std::string_view ns, std::string_view key, std::string_view meta,
                               const Waiter& waiter) {
  return ChangeInPlace(ns, key, waiter, [&](uint64_t* sequence) {
    return memory_->AttachMeta(ns, key, meta, sequence);
  });
}

// ---- listing -----------------------------------------------------------------------------

Result<KeyListing> TieredStore::ListKeys(std::string_view ns, std::string_view after,
                                         uint32_t max_keys) {
  KVPORT_ASSIGN_OR_RETURN(KeyListing listing, memory_->ListKeys(ns, after, max_keys));
  if (disk_ == nullptr) return listing;
  // The disk's keys after the same key, merged in: one more than a page says whether the
  // merged page is the last.
  std::vector<std::string> on_disk = disk_->KeysAfter(ns, after, size_t{max_keys} + 1);
  std::vector<std::string> merged;
  merged.reserve(listing.keys.size() + on_disk.size());
  std::set_union(std::make_move_iterator(listing.keys.begin()),
                 std::make_move_iterator(listing.keys.end()),
                 std::make_move_iterator(on_disk.begin()), std::make_move_iterator(on_disk.end()),
                 std::back_inserter(merged));
  const bool more = !listing.next_cursor.empty() || merged.size() > max_keys;
  if (merged.size() > max_keys) merged.resize(max_keys);
  listing.keys = std::move(merged);
  listing.next_cursor = more && !listing.keys.empty() ? listing.keys.back() : std::string();
  return listing;
}

uint64_t TieredStore::KeysIn(std::string_view ns) {
  uint64_t keys = memory_->UsageOf(ns).objects;
  if (disk_ != nullptr) {
    for (const std::string& key : disk_->KeysAfter(ns, "", SIZE_MAX)) {
      if (memory_->Exists(ns, key).code() == StatusCode::kNotFound) ++keys;
    }
  }
  return keys;
}

void TieredStore::FlushAtStop(std::chrono::steady_clock::time_point deadline) {
  if (disk_ != nullptr) disk_->FlushAtStop(*memory_, deadline);
}

}  // namespace kvport::store
