// SPDX-License-Identifier: Apache-2.0
#include "server/cache_service.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>

#include "kvport/log.h"
#include "server/disk_offload.h"

namespace kvport::server {

CacheService::CacheService(store::ObjectStore* store, ServerCounters* counters,
                           ServiceOptions options)
    : store_(store),
      counters_(counters),
      options_(std::move(options)),
      access_(options_.access_required, options_.tokens) {
  if (options_.offer_shared_memory && store_->arena().shareable()) {
    Result<std::unique_ptr<LeaseWords>> words = LeaseWords::Create(options_.max_connections);
    if (words.ok()) {
      lease_words_ = std::move(words).value();
    } else {
      lease_words_error_ = words.status().message();
      log::Warn("shared memory is off: the sessions' lease words could not be made: {}",
                lease_words_error_);
    }
  }
}

namespace {

Status Denied(const Grant& grant, std::string_view right, std::string_view ns) {
  return Status::PermissionDenied("token '" + grant.name() + "' may not " + std::string(right) +
                                  " namespace '" + std::string(ns) + "'");
}

// The store's any-namespace filter for `grant`: unset (search all) when it reads everything.
store::ObjectStore::NamespaceFilter Readable(const Grant& grant) {
  if (grant.reads_everything()) return {};
  return [&grant](std::string_view ns) { return grant.may_read(ns); };
}

store::ObjectStore::NamespaceFilter Writable(const Grant& grant) {
  if (grant.writes_everything()) return {};
  return [&grant](std::string_view ns) { return grant.may_write(ns); };
}

// A reservation in memory for an object the disk tier holds, with the TTL it has left and its
// checksum.
Result<store::WriteHandle> ReserveFor(store::ObjectStore& store, std::string_view ns,
                                      std::string_view key, const DiskOffload::Found& found) {
  // Whole seconds, rounded up: an object never outlives its TTL by less than a second.
  const uint64_t ttl_seconds = (found.ttl_left_ms + 999) / 1000;
  Result<store::WriteHandle> reserved = store.Reserve(
      ns, key, found.value_bytes, found.meta,
      ttl_seconds == 0 ? store::kNoExpiry
                       : static_cast<uint32_t>(std::min<uint64_t>(ttl_seconds, UINT32_MAX)));
  // The value comes back with its checksum: its writer's, or the one the disk computed, which
  // the read from disk checks it against before it is committed.
  if (reserved.ok()) reserved->SetChecksum(found.checksum);
  return reserved;
}

// The whole reservation, where a value read from disk lands: the extent is whole blocks and
// block-aligned, so the read goes straight into it.
std::span<char> Landing(store::WriteHandle& handle) {
  return {reinterpret_cast<char*>(handle.data()), static_cast<size_t>(handle.capacity())};
}

// Makes a filled promotion of version `sequence` visible as that very version, unless a version
// is visible already (which stays). The disk copy stays: it is the same version (a commit or a
// delete of the key ends it), so evicting the object again writes nothing. The caller holds the
// key's stripe, so no other version can have been committed meanwhile; CommitIfAbsent makes
// sure of it.
Status CommitPromotion(store::ObjectStore& store, store::WriteHandle&& handle, uint64_t sequence) {
  handle.SetSequence(sequence);
  Status committed = store.CommitIfAbsent(std::move(handle));
  return committed.code() == StatusCode::kAborted ? Status::Ok() : committed;
}

}  // namespace

Result<store::ReadHandle> CacheService::Pin(const Grant& grant, std::string_view ns,
                                            std::string_view key, bool any_namespace) {
  if (any_namespace) {
    Result<store::ReadHandle> found = store_->LookupInAnyNamespace(key, Readable(grant));
    if (found.ok() || disk_ == nullptr || found.status().code() != StatusCode::kNotFound) {
      return found;
    }
    for (const std::string& on_disk : disk_->NamespacesOf(key)) {
      if (!grant.may_read(on_disk)) continue;
      Result<store::ReadHandle> promoted = PromoteFromDisk(on_disk, key);
      if (promoted.ok() || promoted.status().code() != StatusCode::kNotFound) return promoted;
    }
    return found;
  }
  if (!grant.may_read(ns)) return Denied(grant, "read", ns);
  Result<store::ReadHandle> found = store_->Lookup(ns, key);
  if (found.ok() || disk_ == nullptr || found.status().code() != StatusCode::kNotFound) {
    return found;
  }
  return PromoteFromDisk(ns, key);
}

Mutex& CacheService::DiskStripe(std::string_view ns, std::string_view key) {
  const size_t hash = std::hash<std::string_view>{}(key) ^ (std::hash<std::string_view>{}(ns)*31);
  return disk_stripes_[hash % kDiskStripes];
}

Result<store::ReadHandle> CacheService::PromoteFromDisk(std::string_view ns, std::string_view key) {
  MutexLock stripe(DiskStripe(ns, key));
  // Promoted by another get while this one waited for the stripe.
  if (store_->Exists(ns, key).ok()) return store_->Lookup(ns, key);
  KVPORT_ASSIGN_OR_RETURN(DiskOffload::Found found, disk_->Find(ns, key));
  KVPORT_ASSIGN_OR_RETURN(store::WriteHandle handle, ReserveFor(*store_, ns, key, found));
  if (found.queued) {  // still in the writer's queue, its value with it
    if (!found.value.empty()) std::memcpy(handle.data(), found.value.data(), found.value.size());
  } else {
    KVPORT_RETURN_IF_ERROR(disk_->ReadValue(ns, key, found.sequence, Landing(handle)));
  }
  KVPORT_RETURN_IF_ERROR(CommitPromotion(*store_, std::move(handle), found.sequence));
  return store_->Lookup(ns, key);
}

void CacheService::PromoteFromDiskAhead(const Grant& grant, std::string_view ns, bool any_namespace,
                                        std::span<const std::string_view> keys) {
  if (disk_ == nullptr || keys.size() < 2) return;
  if (!any_namespace && !grant.may_read(ns)) return;  // each pin says why
  std::vector<std::string> namespaces;  // any namespace: the one found on disk, per key
  namespaces.reserve(keys.size());
  std::vector<DiskOffload::ValueRead> reads;
  std::vector<store::WriteHandle> landings;
  for (std::string_view key : keys) {
    std::string_view key_ns = ns;
    if (!any_namespace) {
      if (store_->Exists(ns, key).code() != StatusCode::kNotFound) continue;
    } else {
      if (store_->ExistsInAnyNamespace(key, nullptr, Readable(grant)).code() !=
          StatusCode::kNotFound) {
        continue;
      }
      bool readable = false;
      for (std::string& on_disk : disk_->NamespacesOf(key)) {
        if (!grant.may_read(on_disk)) continue;
        namespaces.push_back(std::move(on_disk));
        key_ns = namespaces.back();
        readable = true;
        break;
      }
      if (!readable) continue;
    }
    // On disk (not in the queue, whose objects the pin copies), with room for it in memory.
    Result<DiskOffload::Found> found = disk_->Find(key_ns, key);
    if (!found.ok() || found->queued) continue;
    Result<store::WriteHandle> handle = ReserveFor(*store_, key_ns, key, *found);
    if (!handle.ok()) continue;
    landings.push_back(std::move(handle).value());
    reads.push_back({key_ns, key, found->sequence, Landing(landings.back()), Status::Ok()});
  }
  disk_->ReadMany(reads);
  for (size_t i = 0; i < reads.size(); ++i) {
    if (!reads[i].status.ok()) continue;  // the landing is aborted; the pin says why
    MutexLock stripe(DiskStripe(reads[i].ns, reads[i].key));
    // Read without the stripe: made visible only if memory has no version and the disk still
    // holds the one read (a delete or a commit since removed it). Otherwise the pin reads again.
    if (store_->Exists(reads[i].ns, reads[i].key).ok() ||
        !disk_->Holds(reads[i].ns, reads[i].key, reads[i].sequence)) {
      continue;
    }
    // Failed: the pin says why.
    (void)CommitPromotion(*store_, std::move(landings[i]), reads[i].sequence);
  }
}

StatusCode CacheService::PinToRead(const Grant& grant, std::string_view ns, std::string_view key,
                                   bool any_namespace, uint64_t capacity, store::ReadHandle* pin) {
  Result<store::ReadHandle> found = Pin(grant, ns, key, any_namespace);
  if (!found.ok()) return found.status().code();
  *pin = std::move(found).value();
  return pin->size() > capacity ? StatusCode::kTooLarge : StatusCode::kOk;
}

Status CacheService::Exists(const Grant& grant, std::string_view ns, std::string_view key,
                            bool any_namespace, uint64_t* value_length, uint64_t* meta_length) {
  if (any_namespace) {
    Status in_memory = store_->ExistsInAnyNamespace(key, value_length, Readable(grant));
    if (in_memory.code() != StatusCode::kNotFound || disk_ == nullptr) return in_memory;
    for (const std::string& on_disk : disk_->NamespacesOf(key)) {
      if (grant.may_read(on_disk) && disk_->Contains(on_disk, key, value_length)) {
        return Status::Ok();
      }
    }
    return in_memory;
  }
  if (!grant.may_read(ns)) return Denied(grant, "read", ns);
  Status in_memory = store_->Exists(ns, key, value_length, meta_length);
  if (in_memory.code() == StatusCode::kNotFound && disk_ != nullptr &&
      disk_->Contains(ns, key, value_length, meta_length)) {
    return Status::Ok();
  }
  return in_memory;
}

Status CacheService::Delete(const Grant& grant, std::string_view ns, std::string_view key,
                            bool any_namespace) {
  if (any_namespace) {
    if (disk_ == nullptr) return store_->DeleteInEveryNamespace(key, nullptr, Writable(grant));
    // Each namespace holding it on disk: both tiers there, under its stripe; then the ones
    // holding it in memory only.
    bool deleted = false;
    for (const std::string& on_disk : disk_->NamespacesOf(key)) {
      if (!grant.may_write(on_disk)) continue;
      Status one = DeleteBothTiers(on_disk, key);
      if (!one.ok() && one.code() != StatusCode::kNotFound) return one;
      deleted = deleted || one.ok();
    }
    Status in_memory = store_->DeleteInEveryNamespace(key, nullptr, Writable(grant));
    return deleted ? Status::Ok() : in_memory;
  }
  if (!grant.may_write(ns)) return Denied(grant, "write", ns);
  if (disk_ == nullptr) return store_->Delete(ns, key);
  return DeleteBothTiers(ns, key);
}

Status CacheService::DeleteBothTiers(std::string_view ns, std::string_view key) {
  MutexLock stripe(DiskStripe(ns, key));
  Status in_memory = store_->Delete(ns, key);
  // A number of the delete's own: it ends every version before it, on disk, in the writer's
  // queue or still being copied there by an eviction.
  KVPORT_ASSIGN_OR_RETURN(bool ended, disk_->Erase(ns, key, store_->NewSequence()));
  return ended ? Status::Ok() : in_memory;
}

Result<store::WriteHandle> CacheService::Reserve(const Grant& grant, std::string_view ns,
                                                 std::string_view key, uint64_t length,
                                                 std::string_view meta, uint32_t ttl_seconds,
                                                 uint64_t first_bytes) {
  if (!grant.may_write(ns)) return Denied(grant, "write", ns);
  return store_->Reserve(ns, key, length, meta, ttl_seconds, first_bytes);
}

Status CacheService::Grow(store::WriteHandle& handle, uint64_t capacity) {
  return store_->Grow(handle, capacity);
}

uint64_t CacheService::unwritten_per_grant() const {
  if (!access_.required()) return 0;
  const uint64_t node = max_reserved_bytes();
  return std::max<uint64_t>((node != 0 ? node : store_->arena().size()) / 4, 1);
}

uint64_t CacheService::max_reserved_bytes() const {
  return store_->options().max_reserved_bytes;
}

Status CacheService::Commit(store::WriteHandle&& handle) {
  if (disk_ == nullptr) return store_->Commit(std::move(handle));
  const std::string ns(handle.ns());
  const std::string key(handle.key());
  // Under the key's stripe: a promotion of the old version reads the disk and commits either
  // wholly before this (and is replaced) or wholly after (and finds this version).
  MutexLock stripe(DiskStripe(ns, key));
  uint64_t sequence = 0;
  KVPORT_RETURN_IF_ERROR(store_->Commit(std::move(handle), &sequence));
  // The new version ends every older one, on disk and on its way there.
  Result<bool> erased = disk_->Erase(ns, key, sequence);
  if (!erased.ok()) log::Warn("disk tier: {}", erased.status().ToString());
  return Status::Ok();
}

Result<CacheService::ListPage> CacheService::List(const Grant& grant, uint64_t session_id,
                                                  std::string_view ns, uint64_t cursor,
                                                  uint32_t max_keys) {
  if (!grant.admin() && !grant.may_read(ns)) return Denied(grant, "list", ns);
  std::string store_cursor;
  if (cursor != 0) {
    std::optional<std::string> found = list_cursors_.Find(cursor, ns);
    if (!found) {
      return Status::InvalidArgument("LIST cursor " + std::to_string(cursor) +
                                     " is unknown for this namespace or was forgotten (the "
                                     "connection that started the listing closed, or it started "
                                     "more than " +
                                     std::to_string(ListCursorTable::kCursorsPerSession) +
                                     " listings since); restart the listing with cursor 0");
    }
    store_cursor = std::move(*found);
  }
  KVPORT_ASSIGN_OR_RETURN(auto listing, store_->ListKeys(ns, store_cursor, max_keys));
  if (disk_ != nullptr) {
    // The disk's keys after the same key, merged in: one more than a page says whether the
    // merged page is the last.
    std::vector<std::string> on_disk = disk_->KeysAfter(ns, store_cursor, size_t{max_keys} + 1);
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
  }
  ListPage page;
  page.keys = std::move(listing.keys);
  if (!listing.next_cursor.empty()) {
    page.next_cursor = list_cursors_.Issue(session_id, ns, std::move(listing.next_cursor));
  }
  return page;
}

void CacheService::SessionEnded(uint64_t session_id) {
  list_cursors_.ForgetOwner(session_id);
}

ServerStats CacheService::Stats(const Grant& grant) const {
  ServerStats stats = Stats();
  if (!grant.admin()) {
    std::erase_if(stats.namespaces,
                  [&grant](const ServerStats::Namespace& u) { return !grant.may_read(u.ns); });
  }
  return stats;
}

ServerStats CacheService::Stats() const {
  return Collect(/*namespaces=*/true);
}

ServerStats CacheService::Counters() const {
  return Collect(/*namespaces=*/false);
}

Result<uint64_t> CacheService::KeysIn(const Grant& grant, std::string_view ns) {
  if (!grant.admin() && !grant.may_read(ns)) return Denied(grant, "read", ns);
  uint64_t keys = store_->UsageOf(ns).objects;
  if (disk_ != nullptr) {
    for (const std::string& key : disk_->KeysAfter(ns, "", SIZE_MAX)) {
      if (store_->Exists(ns, key).code() == StatusCode::kNotFound) ++keys;
    }
  }
  return keys;
}

ServerStats CacheService::Collect(bool namespaces) const {
  ServerStats stats = CollectStats(*store_, *counters_, namespaces);
  // How the node is guarded: tokens required (1) or not, and open beyond loopback on purpose.
  stats.counters.emplace_back("auth_required", access_.required() ? 1 : 0);
  stats.counters.emplace_back("insecure", options_.insecure ? 1 : 0);
  if (disk_ != nullptr) {
    const DiskOffloadStats d = disk_->stats();
    stats.counters.insert(stats.counters.end(),
                          {{"disk_objects", d.tier.objects},
                           {"disk_bytes", d.tier.disk_bytes},
                           {"disk_writes", d.written},
                           {"disk_write_errors", d.tier.write_errors},
                           {"disk_queue_drops", d.queue_drops},
                           {"disk_pending_bytes", d.pending_bytes},
                           {"disk_hits", d.hits},
                           {"disk_evicted_objects", d.tier.evicted_objects},
                           {"disk_dropped_records", d.tier.dropped_records},
                           {"disk_read_errors", d.tier.read_errors},
                           {"disk_killed_records", d.tier.killed_records},
                           {"disk_quarantined_segments", d.tier.quarantined},
                           {"disk_restored", d.tier.restored},
                           {"disk_restore_ms", d.restore_ms},
                           {"disk_torn_tails", d.tier.torn_tails},
                           {"disk_compacted_segments", d.tier.compacted_segments},
                           {"disk_compacted_bytes", d.tier.compacted_bytes},
                           {"disk_index_bytes", d.tier.index_bytes},
                           {"disk_index_drops", d.index_drops},
                           {"disk_batch_reads", d.batch_reads}});
  }
  return stats;
}

bool CacheService::offers_shared_memory() const {
  return options_.offer_shared_memory && store_->arena().shareable() && lease_words_ != nullptr &&
         !options_.identity.unix_path.empty();
}

Status CacheService::MayMapArena(uid_t uid) const {
  if (!options_.offer_shared_memory) {
    return Status::NotSupported(
        "shared memory is switched off on this node (shared_memory: false)");
  }
  if (!store_->arena().shareable()) {
    return Status::NotSupported("this node's arena is anonymous memory, which cannot be shared (" +
                                store_->arena().unshared_reason() + ")");
  }
  if (lease_words_ == nullptr) {
    return Status::NotSupported("the sessions' lease words could not be made: " +
                                lease_words_error_);
  }
  const uid_t node_uid = ::geteuid();
  if (uid != node_uid && uid != 0) {
    return Status::NotSupported("shared memory is only for processes of the node's user (uid " +
                                std::to_string(node_uid) + ") or root; this peer runs as uid " +
                                std::to_string(uid) + " (docs/security.md)");
  }
  return Status::Ok();
}

int CacheService::arena_fd() const {
  return store_->arena().fd();
}

uint64_t CacheService::arena_bytes() const {
  return store_->arena().size();
}

uint8_t* CacheService::arena_base() const {
  return store_->arena().base();
}

uint64_t CacheService::OffsetOf(const uint8_t* data) const {
  return static_cast<uint64_t>(data - store_->arena().base());
}

// ---- WriteBatch ---------------------------------------------------------------------------

uint64_t WriteBatch::reserved_bytes() const {
  uint64_t bytes = 0;
  for (const store::WriteHandle& handle : handles_) {
    if (handle.valid()) bytes += handle.size();
  }
  return bytes;
}

WriteBatch::~WriteBatch() {
  if (!committed_ && any_reserved()) service_->counters().CountAbortedMset();
  for (size_t i = 0; i < held_.size(); ++i)
    SetHeld(i, 0);
  // handles_ die here: every reservation not committed is aborted by its WriteHandle.
}

namespace {
// What the store reserves for `bytes` of a value (whole 4 KiB blocks).
uint64_t Blocks(uint64_t bytes) {
  constexpr uint64_t kBlock = store::Arena::kBlockBytes;
  return (bytes + kBlock - 1) / kBlock * kBlock;
}
}  // namespace

bool WriteBatch::TryHold(uint64_t bytes) const {
  return grant_cap_ == 0 || grant_->TryHoldUnwritten(bytes, grant_cap_);
}

uint64_t WriteBatch::Unwritten(size_t i) const {
  if (grant_cap_ == 0 || !handles_[i].valid()) return 0;
  const store::WriteHandle& h = handles_[i];
  return written_[i] >= h.size()
             ? 0
             : Blocks(h.capacity()) - std::min(Blocks(h.capacity()), written_[i]);
}

void WriteBatch::SetHeld(size_t i, uint64_t bytes) {
  if (bytes < held_[i]) grant_->ReleaseUnwritten(held_[i] - bytes);
  held_[i] = std::min(held_[i], bytes);
}

void WriteBatch::Reserve(std::string_view ns, std::string_view key, uint64_t length,
                         std::string_view meta, uint32_t ttl_seconds, uint64_t first_bytes) {
  const uint64_t planned = Blocks(std::min(first_bytes, length));
  Result<store::WriteHandle> reserved = Status::NoSpace(
      "this token's writes in progress already reserve its share of the node's "
      "max_reserved_bytes (a quarter) not yet written; retry once some complete");
  const bool held = TryHold(planned);
  if (held) reserved = service_->Reserve(*grant_, ns, key, length, meta, ttl_seconds, first_bytes);
  statuses_.push_back(reserved.ok() ? StatusCode::kOk : reserved.status().code());
  handles_.push_back(reserved.ok() ? std::move(reserved).value() : store::WriteHandle());
  written_.push_back(0);
  held_.push_back(held && grant_cap_ != 0 ? planned : 0);
  SetHeld(held_.size() - 1, Unwritten(held_.size() - 1));
}

bool WriteBatch::Grow(size_t i, uint64_t capacity) {
  store::WriteHandle& h = handles_[i];
  if (!h.valid() || statuses_[i] != StatusCode::kOk) return false;
  const uint64_t more = Blocks(std::min(capacity, h.size())) - Blocks(h.capacity());
  if (more == 0) return true;
  Status grown =
      TryHold(more) ? Status::Ok() : Status::NoSpace("this token's share of max_reserved_bytes");
  if (grown.ok()) {
    if (grant_cap_ != 0) held_[i] += more;
    grown = service_->Grow(h, capacity);
  }
  SetHeld(i, Unwritten(i));
  if (!grown.ok()) statuses_[i] = grown.code();
  return grown.ok();
}

uint64_t WriteBatch::StepBytes(uint64_t wanted) const {
  uint64_t step = wanted;
  const uint64_t node = service_->max_reserved_bytes();
  if (node != 0) step = std::min(step, node / 2);
  if (grant_cap_ != 0) step = std::min(step, grant_cap_ / 2);
  return std::max<uint64_t>(step, store::Arena::kBlockBytes);
}

void WriteBatch::MarkWritten(size_t i, uint64_t bytes) {
  if (!handles_[i].valid() || bytes <= written_[i]) return;
  written_[i] = bytes;
  handles_[i].MarkWritten(bytes);
  SetHeld(i, Unwritten(i));
}

void WriteBatch::SetTtlSeconds(size_t i, uint32_t ttl_seconds) {
  if (handles_[i].valid()) handles_[i].SetTtlSeconds(ttl_seconds);
}

void WriteBatch::SetChecksum(size_t i, uint64_t checksum) {
  if (handles_[i].valid()) handles_[i].SetChecksum(checksum);
}

uint64_t WriteBatch::offset(size_t i) const {
  return handles_[i].valid() ? service_->OffsetOf(handles_[i].data()) : 0;
}

bool WriteBatch::any_reserved() const {
  for (const store::WriteHandle& h : handles_) {
    if (h.valid()) return true;
  }
  return false;
}

std::vector<StatusCode> WriteBatch::Commit(std::span<const uint8_t> keep,
                                           std::vector<store::WriteHandle>* not_kept) {
  committed_ = true;
  for (size_t i = 0; i < handles_.size(); ++i) {
    if (!handles_[i].valid()) continue;
    if (statuses_[i] != StatusCode::kOk) {  // a Grow failed: its reservation was kept till now
      handles_[i] = store::WriteHandle();
      continue;
    }
    if (!keep.empty() && keep[i] == 0) {
      if (not_kept != nullptr) {
        not_kept->push_back(std::move(handles_[i]));
      } else {
        handles_[i] = store::WriteHandle();  // aborts the reservation
      }
      statuses_[i] = StatusCode::kAborted;
      continue;
    }
    Status committed = service_->Commit(std::move(handles_[i]));
    if (!committed.ok()) {
      log::Error("commit of item {} failed: {}", i, committed.ToString());
      statuses_[i] = committed.code();
    }
  }
  for (size_t i = 0; i < held_.size(); ++i)
    SetHeld(i, 0);
  handles_.clear();
  return std::move(statuses_);
}

void WriteBatch::AbortInto(std::vector<store::WriteHandle>* held) {
  if (any_reserved()) service_->counters().CountAbortedMset();
  committed_ = true;  // counted here, not again by the destructor
  for (store::WriteHandle& handle : handles_) {
    if (handle.valid()) held->push_back(std::move(handle));
  }
  for (size_t i = 0; i < held_.size(); ++i)
    SetHeld(i, 0);
  handles_.clear();
}

Status CacheService::SetExpiry(const Grant& grant, std::string_view ns, std::string_view key,
                               uint64_t ttl_ms) {
  if (!grant.may_write(ns)) return Denied(grant, "write", ns);
  return ChangeInPlace(grant, ns, key, [&](uint64_t* sequence) {
    return store_->SetExpiry(ns, key, ttl_ms, sequence);
  });
}

Status CacheService::ChangeInPlace(const Grant& grant, std::string_view ns, std::string_view key,
                                   const std::function<Status(uint64_t*)>& change) {
  uint64_t sequence = 0;
  if (disk_ == nullptr) return change(&sequence);
  // Only on disk: brought back into memory (the pin), then changed there.
  if (store_->Exists(ns, key).code() == StatusCode::kNotFound) {
    KVPORT_ASSIGN_OR_RETURN(store::ReadHandle promoted, Pin(grant, ns, key, false));
  }
  MutexLock stripe(DiskStripe(ns, key));
  KVPORT_RETURN_IF_ERROR(change(&sequence));
  // The change makes another version: the disk copy (the old one) ends, and the object is
  // written again when it is evicted.
  Result<bool> erased = disk_->Erase(ns, key, sequence);
  if (!erased.ok()) log::Warn("disk tier: {}", erased.status().ToString());
  return Status::Ok();
}

Status CacheService::AttachMeta(const Grant& grant, std::string_view ns, std::string_view key,
                                std::string_view meta) {
  if (!grant.may_write(ns)) return Denied(grant, "write", ns);
  return ChangeInPlace(grant, ns, key, [&](uint64_t* sequence) {
    return store_->AttachMeta(ns, key, meta, sequence);
  });
}

Result<uint64_t> CacheService::TimeToLive(const Grant& grant, std::string_view ns,
                                          std::string_view key) {
  if (!grant.may_read(ns)) return Denied(grant, "read", ns);
  uint64_t ttl_ms = 0;
  Status found = store_->ExpiryOf(ns, key, &ttl_ms);
  if (found.ok()) return ttl_ms;
  if (found.code() != StatusCode::kNotFound || disk_ == nullptr) return found;
  KVPORT_ASSIGN_OR_RETURN(store::ReadHandle pin, Pin(grant, ns, key, /*any_namespace=*/false));
  return pin.ttl_left_ms();
}

Result<uint64_t> CacheService::DeleteNamespace(const Grant& grant, std::string_view ns) {
  if (!grant.admin()) {
    return Status::PermissionDenied("token '" + grant.name() +
                                    "' may not flush a namespace: that needs an admin token");
  }
  uint64_t deleted = 0;
  std::string cursor;
  while (true) {
    KVPORT_ASSIGN_OR_RETURN(store::KeyListing page, store_->ListKeys(ns, cursor, 1024));
    for (const std::string& key : page.keys) {
      if (Delete(grant, ns, key, /*any_namespace=*/false).ok()) ++deleted;
    }
    if (page.next_cursor.empty()) break;
    cursor = std::move(page.next_cursor);
  }
  // What only the disk holds.
  if (disk_ != nullptr) {
    for (const std::string& key : disk_->KeysOf(ns)) {
      if (Delete(grant, ns, key, /*any_namespace=*/false).ok()) ++deleted;
    }
  }
  return deleted;
}

}  // namespace kvport::server
