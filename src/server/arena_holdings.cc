// SPDX-License-Identifier: Apache-2.0
#include "server/arena_holdings.h"

#include "server/arena_window.h"
#include "server/ucx_service.h"

namespace kvport::server {

std::string ArenaHoldings::OpenUcxWindow(UcxService* service, uint8_t* arena, uint64_t arena_bytes,
                                         const AccessPolicy* policy, const SessionAccess& access) {
  if (window_ != nullptr) return ucx_key_;
  window_ = std::make_shared<ArenaWindow>(arena, arena_bytes, policy, access);
  ucx_ = service;
  ucx_key_ = service->Open(window_);
  // What the session held before it attached is reachable too.
  for (const auto& [id, lease] : leases_)
    window_->OpenLease(id, lease.pins);
  for (const auto& [id, reservation] : reservations_)
    window_->OpenReservation(id, reservation.batch);
  return ucx_key_;
}

bool ArenaHoldings::CloseInWindow(uint64_t id, WriteBatch* batch) {
  return window_ == nullptr || window_->CloseReservation(id, batch);
}

Result<LeaseWords::Word> ArenaHoldings::TakeLeaseWord(LeaseWords* words) {
  if (lease_words_ != nullptr) return lease_word_;
  KVPORT_ASSIGN_OR_RETURN(lease_word_, words->Take());
  lease_words_ = words;
  return lease_word_;
}

uint64_t ArenaHoldings::AddLease(std::vector<store::ReadHandle> pins) {
  Lease lease;
  for (const store::ReadHandle& pin : pins)
    lease.bytes += pin.size();
  lease.pins = std::move(pins);
  if (counters_ != nullptr) counters_->LeaseTaken(lease.bytes);
  const uint64_t id = next_id_++;
  if (window_ != nullptr) window_->OpenLease(id, lease.pins);
  leases_.emplace(id, std::move(lease));
  return id;
}

bool ArenaHoldings::ReleaseLease(uint64_t id) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  if (counters_ != nullptr) counters_->LeaseReleased(it->second.bytes);
  if (window_ != nullptr) window_->CloseLease(id);
  leases_.erase(it);  // drops the pins
  return true;
}

uint64_t ArenaHoldings::AddReservation(WriteBatch batch, MonotonicClock::time_point made) {
  const uint64_t id = next_id_++;
  if (window_ != nullptr) window_->OpenReservation(id, batch);
  reservations_.emplace(id, Reservation{std::move(batch), made});
  return id;
}

size_t ArenaHoldings::AbortOverdueReservations(
    MonotonicClock::time_point now,
    const std::function<std::chrono::microseconds(uint64_t bytes)>& allowed) {
  size_t aborted = 0;
  for (auto it = reservations_.begin(); it != reservations_.end();) {
    if (now - it->second.made > allowed(it->second.batch.reserved_bytes())) {
      if (CloseInWindow(it->first, &it->second.batch) && mapped()) {
        it->second.batch.AbortInto(&quarantine_.emplace_back());
      }
      it = reservations_.erase(it);  // the WriteBatch (unless kept above) aborts
      ++aborted;
    } else {
      ++it;
    }
  }
  return aborted;
}

Result<std::vector<StatusCode>> ArenaHoldings::Commit(uint64_t id, std::span<const uint8_t> keep,
                                                      std::span<const uint64_t> checksums) {
  auto it = reservations_.find(id);
  if (it == reservations_.end()) {
    return Status::NotFound("reservation " + std::to_string(id) +
                            " is not open on this session (committed already, or never made)");
  }
  if (keep.size() != it->second.batch.size()) {
    return Status::InvalidArgument("ARENA_COMMIT of reservation " + std::to_string(id) + " names " +
                                   std::to_string(keep.size()) + " items; it has " +
                                   std::to_string(it->second.batch.size()));
  }
  if (!checksums.empty() && checksums.size() != it->second.batch.size()) {
    return Status::InvalidArgument("ARENA_COMMIT of reservation " + std::to_string(id) + " has " +
                                   std::to_string(checksums.size()) + " checksums for " +
                                   std::to_string(it->second.batch.size()) + " items");
  }
  WriteBatch batch = std::move(it->second.batch);
  reservations_.erase(it);
  for (size_t i = 0; i < checksums.size(); ++i)
    batch.SetChecksum(i, checksums[i]);
  if (!CloseInWindow(id, &batch)) {
    return Status::Aborted("reservation " + std::to_string(id) +
                           " was committed while UCX writes into it were still arriving");
  }
  std::vector<store::WriteHandle> left_out;
  std::vector<StatusCode> statuses = batch.Commit(keep, mapped() ? &left_out : nullptr);
  if (!left_out.empty()) quarantine_.push_back(std::move(left_out));
  return statuses;
}

uint64_t ArenaHoldings::quarantined_bytes() const {
  uint64_t bytes = 0;
  for (const std::vector<store::WriteHandle>& held : quarantine_) {
    for (const store::WriteHandle& handle : held)
      bytes += handle.capacity();
  }
  return bytes;
}

void ArenaHoldings::Clear() {
  if (lease_words_ != nullptr) {
    lease_words_->End(lease_word_);  // before a leased byte is freed below
    lease_words_ = nullptr;
  }
  if (counters_ != nullptr) {
    for (const auto& [id, lease] : leases_)
      counters_->LeaseReleased(lease.bytes);
  }
  for (auto& [id, reservation] : reservations_)
    CloseInWindow(id, &reservation.batch);
  if (window_ != nullptr) {
    ucx_->Close(ucx_key_);  // shuts the window and closes the session's UCX endpoints
    window_.reset();
  }
  leases_.clear();
  reservations_.clear();  // each WriteBatch (unless the window kept it) aborts what it holds
  quarantine_.clear();    // the client's session is over: it writes none of them any more
}

}  // namespace kvport::server
