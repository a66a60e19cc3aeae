// SPDX-License-Identifier: Apache-2.0
#include "server/cache_service.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>

#include "kvport/log.h"

namespace kvport::server {

CacheService::CacheService(store::TieredStore* store, ServerCounters* counters,
                           ServiceOptions options)
    : store_(store),
      counters_(counters),
      options_(std::move(options)),
      access_(options_.access_required, options_.tokens) {
  if (options_.offer_shared_memory && store_->memory().arena().shareable()) {
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

}  // namespace

Result<store::ReadHandle> CacheService::Pin(const Grant& grant, std::string_view ns,
                                            std::string_view key, bool any_namespace) {
  if (any_namespace) return store_->LookupInAnyNamespace(key, Readable(grant));
  if (!grant.may_read(ns)) return Denied(grant, "read", ns);
  return store_->Lookup(ns, key);
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
  if (any_namespace) return store_->ExistsInAnyNamespace(key, value_length, Readable(grant));
  if (!grant.may_read(ns)) return Denied(grant, "read", ns);
  return store_->Exists(ns, key, value_length, meta_length);
}

void CacheService::ExistsMany(const Grant& grant, std::string_view ns,
                              std::span<const std::string_view> keys, std::span<StatusCode> codes,
                              std::span<uint64_t> value_lengths) {
  if (!grant.may_read(ns)) {
    std::fill(codes.begin(), codes.end(), StatusCode::kPermissionDenied);
    std::fill(value_lengths.begin(), value_lengths.end(), 0);
    return;
  }
  store_->ExistsMany(ns, keys, codes, value_lengths);
}

Status CacheService::Delete(const Grant& grant, std::string_view ns, std::string_view key,
                            bool any_namespace, const Waiter& waiter) {
  if (any_namespace) return store_->DeleteInEveryNamespace(key, Writable(grant), waiter);
  if (!grant.may_write(ns)) return Denied(grant, "write", ns);
  return store_->Delete(ns, key, waiter);
}

bool CacheService::NeedsDisk(const Grant& grant, std::string_view ns, bool any_namespace,
                             std::span<const std::string_view> keys) {
  if (!any_namespace && !grant.may_read(ns)) return false;  // refused without reading
  return store_->NeedsDisk(ns, any_namespace, keys, any_namespace ? Readable(grant) : nullptr);
}

void CacheService::PromoteInBackground(std::shared_ptr<const Grant> grant, std::string ns,
                                       bool any_namespace, std::vector<std::string> keys,
                                       std::function<void()> done) {
  // The filter keeps the grant alive for as long as the promotions run.
  store::TieredStore::NamespaceFilter readable;
  if (!grant->reads_everything()) {
    readable = [grant](std::string_view candidate) { return grant->may_read(candidate); };
  }
  store_->PromoteInBackground(std::move(ns), any_namespace, std::move(keys), std::move(readable),
                              std::move(done));
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
  return std::max<uint64_t>((node != 0 ? node : store_->memory().arena().size()) / 4, 1);
}

uint64_t CacheService::max_reserved_bytes() const {
  return store_->memory().options().max_reserved_bytes;
}

Status CacheService::Commit(store::WriteHandle&& handle, const Waiter& waiter) {
  return store_->Commit(std::move(handle), waiter);
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
  KVPORT_ASSIGN_OR_RETURN(store::KeyListing listing, store_->ListKeys(ns, store_cursor, max_keys));
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
  return store_->KeysIn(ns);
}

ServerStats CacheService::Collect(bool namespaces) const {
  ServerStats stats = CollectStats(store_->memory(), *counters_, namespaces);
  // How the node is guarded: tokens required (1) or not, and open beyond loopback on purpose.
  stats.counters.emplace_back("auth_required", access_.required() ? 1 : 0);
  stats.counters.emplace_back("insecure", options_.insecure ? 1 : 0);
  if (store_->has_disk()) {
    const store::WriteBehindDiskStats d = store_->disk()->stats();
    stats.counters.insert(stats.counters.end(),
                          {{"disk_objects", d.tier.objects},
                           {"disk_bytes", d.tier.disk_bytes},
                           {"disk_writes", d.written},
                           {"disk_write_errors", d.tier.write_errors},
                           {"disk_queue_drops", d.queue_drops},
                           {"disk_pending_bytes", d.pending_bytes},
                           {"disk_pending_tombstones", d.pending_tombstones},
                           {"disk_hits", d.hits},
                           {"disk_evicted_objects", d.tier.evicted_objects},
                           {"disk_dropped_records", d.tier.dropped_records},
                           {"disk_read_errors", d.tier.read_errors},
                           {"disk_killed_records", d.tier.killed_records},
                           {"disk_quarantined_segments", d.tier.quarantined},
                           {"disk_restored", d.tier.restored},
                           {"disk_restore_ms", d.restore_ms},
                           {"disk_torn_tails", d.tier.torn_tails},
                           {"disk_damaged_segments", d.tier.damaged_segments},
                           {"disk_compacted_segments", d.tier.compacted_segments},
                           {"disk_compacted_bytes", d.tier.compacted_bytes},
                           {"disk_index_bytes", d.tier.index_bytes},
                           {"disk_index_drops", d.index_drops},
                           {"disk_batch_reads", d.batch_reads}});
  }
  return stats;
}

bool CacheService::offers_shared_memory() const {
  return options_.offer_shared_memory && store_->memory().arena().shareable() &&
         lease_words_ != nullptr && !options_.identity.unix_path.empty();
}

Status CacheService::MayMapArena(uid_t uid) const {
  if (!options_.offer_shared_memory) {
    return Status::NotSupported(
        "shared memory is switched off on this node (shared_memory: false)");
  }
  if (!store_->memory().arena().shareable()) {
    return Status::NotSupported("this node's arena is anonymous memory, which cannot be shared (" +
                                store_->memory().arena().unshared_reason() + ")");
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
  return store_->memory().arena().fd();
}

uint64_t CacheService::arena_bytes() const {
  return store_->memory().arena().size();
}

uint8_t* CacheService::arena_base() const {
  return store_->memory().arena().base();
}

uint64_t CacheService::OffsetOf(const uint8_t* data) const {
  return static_cast<uint64_t>(data - store_->memory().arena().base());
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
    Status committed = service_->Commit(std::move(handles_[i]), waiter_);
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
                               uint64_t ttl_ms, const Waiter& waiter) {
  if (!grant.may_write(ns)) return Denied(grant, "write", ns);
  return store_->SetExpiry(ns, key, ttl_ms, waiter);
}

Status CacheService::AttachMeta(const Grant& grant, std::string_view ns, std::string_view key,
                                std::string_view meta, const Waiter& waiter) {
  if (!grant.may_write(ns)) return Denied(grant, "write", ns);
  return store_->AttachMeta(ns, key, meta, waiter);
}

Result<uint64_t> CacheService::TimeToLive(const Grant& grant, std::string_view ns,
                                          std::string_view key) {
  if (!grant.may_read(ns)) return Denied(grant, "read", ns);
  return store_->TimeToLive(ns, key);
}

Result<uint64_t> CacheService::DeleteNamespace(const Grant& grant, std::string_view ns,
                                               const Waiter& waiter) {
  if (!grant.admin()) {
    return Status::PermissionDenied("token '" + grant.name() +
                                    "' may not flush a namespace: that needs an admin token");
  }
  return store_->DeleteNamespace(ns, waiter);
}

}  // namespace kvport::server
