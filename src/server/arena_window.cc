// SPDX-License-Identifier: Apache-2.0
#include "server/arena_window.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace kvport::server {

ArenaWindow::ArenaWindow(uint8_t* arena, uint64_t arena_bytes, const AccessPolicy* policy,
                         SessionAccess access)
    : arena_(arena), arena_bytes_(arena_bytes), policy_(policy), access_(std::move(access)) {}

ArenaWindow::~ArenaWindow() = default;

template <typename Extents>
const ArenaWindow::Extent* ArenaWindow::Find(const Extents& extents, uint64_t offset,
                                             uint64_t bytes) {
  auto it = extents.upper_bound(offset);
  if (it == extents.begin()) return nullptr;
  --it;  // the last extent starting at or before offset; extents never overlap
  const Extent& extent = it->second;
  if (offset >= extent.end || bytes > extent.end - offset) return nullptr;
  return &extent;
}

void ArenaWindow::OpenReservation(uint64_t id, const WriteBatch& batch) {
  MutexLock lock(mu_);
  if (shut_) return;
  Reservation& reservation = reservations_[id];
  for (size_t i = 0; i < batch.size(); ++i) {
    // An empty value has no bytes to write (and its offset may be another extent's start).
    if (batch.destination(i) == nullptr || batch.capacity(i) == 0) continue;
    const uint64_t start = batch.offset(i);
    writable_.emplace(start, Extent{start + batch.capacity(i), id, {}});
    reservation.starts.push_back(start);
  }
}

bool ArenaWindow::CloseReservation(uint64_t id, WriteBatch* batch) {
  MutexLock lock(mu_);
  auto it = reservations_.find(id);
  if (it == reservations_.end()) return true;
  Reservation& reservation = it->second;
  for (uint64_t start : reservation.starts) {
    auto extent = writable_.find(start);
    if (extent != writable_.end() && extent->second.id == id) writable_.erase(extent);
  }
  reservation.starts.clear();
  if (reservation.writes_in_flight == 0) {
    reservations_.erase(it);
    return true;
  }
  reservation.kept = std::make_unique<WriteBatch>(std::move(*batch));
  return false;
}

void ArenaWindow::OpenLease(uint64_t id, const std::vector<store::ReadHandle>& pins) {
  MutexLock lock(mu_);
  if (shut_) return;
  std::vector<uint64_t>& offsets = leases_[id];
  for (const store::ReadHandle& pin : pins) {
    if (pin.size() == 0) continue;  // nothing to read (and its offset may be another's start)
    const uint64_t start = pin.arena_offset();
    readable_.emplace(start, Extent{start + pin.size(), id, pin});
    offsets.push_back(start);
  }
}

void ArenaWindow::CloseLease(uint64_t id) {
  std::vector<store::ReadHandle> dropped;  // unpinned outside the lock
  MutexLock lock(mu_);
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  for (uint64_t start : it->second) {
    auto [first, last] = readable_.equal_range(start);
    for (auto e = first; e != last; ++e) {
      if (e->second.id != id) continue;
      dropped.push_back(std::move(e->second.pin));
      readable_.erase(e);
      break;
    }
  }
  leases_.erase(it);
}

std::vector<uint64_t> ArenaWindow::Shut() {
  std::multimap<uint64_t, Extent> dropped;  // unpinned outside the lock
  MutexLock lock(mu_);
  shut_ = true;
  writable_.clear();
  dropped.swap(readable_);
  leases_.clear();
  // Reservations with writes in flight keep their batches until those end.
  std::erase_if(reservations_, [](const auto& r) { return r.second.writes_in_flight == 0; });
  return std::move(endpoints_);
}

Status ArenaWindow::Admit(uint64_t endpoint) {
  MutexLock lock(mu_);
  if (shut_) return Status::Unavailable("the session this UCX request names has ended");
  if (policy_ != nullptr) {
    Status still = access_.Refresh(*policy_);
    if (still.ok() && !access_.grant().grants_every_namespace()) {
      still = Status::PermissionDenied("the session's token no longer grants every namespace");
    }
    if (!still.ok()) {
      shut_ = true;
      writable_.clear();
      readable_.clear();
      leases_.clear();
      return still;
    }
  }
  if (endpoint != 0 &&
      std::find(endpoints_.begin(), endpoints_.end(), endpoint) == endpoints_.end())
    endpoints_.push_back(endpoint);
  return Status::Ok();
}

Status ArenaWindow::Write(uint64_t offset, const void* data, uint64_t bytes) {
  MutexLock lock(mu_);
  if (!InArena(offset, bytes) || Find(writable_, offset, bytes) == nullptr) {
    return Status::PermissionDenied("a UCX write outside the session's open reservations");
  }
  if (bytes > 0) std::memcpy(arena_ + offset, data, bytes);
  return Status::Ok();
}

Result<uint8_t*> ArenaWindow::BeginWrite(uint64_t offset, uint64_t bytes, uint64_t* reservation) {
  MutexLock lock(mu_);
  const Extent* extent = InArena(offset, bytes) ? Find(writable_, offset, bytes) : nullptr;
  if (extent == nullptr) {
    return Status::PermissionDenied("a UCX write outside the session's open reservations");
  }
  ++reservations_[extent->id].writes_in_flight;
  *reservation = extent->id;
  return arena_ + offset;
}

void ArenaWindow::EndWrite(uint64_t reservation) {
  std::unique_ptr<WriteBatch> aborted;  // aborted outside the lock
  MutexLock lock(mu_);
  auto it = reservations_.find(reservation);
  if (it == reservations_.end()) return;
  if (--it->second.writes_in_flight > 0) return;
  aborted = std::move(it->second.kept);
  if (aborted != nullptr || shut_) reservations_.erase(it);
}

Result<store::ReadHandle> ArenaWindow::BeginRead(uint64_t offset, uint64_t bytes,
                                                 const uint8_t** at) {
  MutexLock lock(mu_);
  const Extent* extent = Find(readable_, offset, bytes);
  if (extent == nullptr) {
    return Status::PermissionDenied("a UCX read outside the session's open leases");
  }
  *at = extent->pin.data() + (offset - extent->pin.arena_offset());
  return extent->pin;
}

}  // namespace kvport::server
