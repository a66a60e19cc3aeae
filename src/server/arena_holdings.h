// SPDX-License-Identifier: Apache-2.0
// ArenaHoldings: the arena ranges one session holds, leased or reserved, whatever moves their
// bytes (a shared-memory mapping, or UCX through the session's ArenaWindow).
//
// Leases are the pins of ARENA_GET answers: the client reads those values through its own
// mapping, so the node must not free or reuse their bytes until the client says it is done
// (ARENA_RELEASE) or is gone. Reservations are ARENA_RESERVE answers the client is filling through
// its mapping; only ARENA_COMMIT makes them visible. Both end when the session ends, whatever
// ends it (a clean close, a protocol error, the client killed: the kernel closes its socket),
// so a dead client never leaks a pin or a reservation.
//
// The session's lease word (server/lease_words.h), once attached, moves to its next generation
// before any of this session's leased bytes are freed other than by the client's own release:
// how a client that copied a value finds out afterwards whether the copy can be trusted.
//
// Eviction never frees leased bytes: a lease is a store pin, and the store frees an object's
// extent only with its last pin (an evicted or overwritten object just stops being visible).
//
// A reservation that ends without its commit (overdue, or an item the commit left out) is not
// given back to the arena while this session has the arena mapped (SHM_ATTACH): the client may
// still be copying into it, and those bytes would land in whatever key reused the space. Such
// reservations are quarantined, still reserved (they count against max_reserved_bytes and this
// session's reservations), until the session ends. A session without a mapping needs none: its
// bytes arrive through the node (a socket, or UCX messages the window checks).
//
// A session attached over UCX (UCX_ATTACH) has an ArenaWindow besides: every lease and
// reservation is opened in it as it is made and closed as it ends, so the node's UCX service
// copies into and out of exactly these ranges (server/arena_window.h).
//
// Loop thread only (a session's state); the node-wide gauges are in ServerCounters.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/monotonic_clock.h"
#include "server/access_policy.h"
#include "server/cache_service.h"
#include "server/lease_words.h"
#include "store/object_store.h"

namespace kvport::server {

class ArenaWindow;
class UcxService;

class ArenaHoldings {
 public:
  explicit ArenaHoldings(ServerCounters* counters = nullptr) : counters_(counters) {}
  ~ArenaHoldings() { Clear(); }
  ArenaHoldings(const ArenaHoldings&) = delete;
  ArenaHoldings& operator=(const ArenaHoldings&) = delete;

  void set_counters(ServerCounters* counters) { counters_ = counters; }

  // The session's lease word, taken from `words` at SHM_ATTACH (a second attach keeps the first
  // word). `words` must outlive this object.
  Result<LeaseWords::Word> TakeLeaseWord(LeaseWords* words);

  // Opens a window for UCX on `service` (which must outlive this object); its key, which the
  // session's peer names in its UCX messages, is returned (the same one on a second call).
  std::string OpenUcxWindow(UcxService* service, uint8_t* arena, uint64_t arena_bytes,
                            const AccessPolicy* policy, const SessionAccess& access);

  size_t leases() const { return leases_.size(); }
  // Open reservations, and quarantined ones (each batch or commit's leftovers counts one).
  size_t reservations() const { return reservations_.size() + quarantine_.size(); }
  // Arena bytes held in quarantine.
  uint64_t quarantined_bytes() const;
  bool holds_ranges() const { return !leases_.empty() || !reservations_.empty(); }

  // Keeps `pins` (non-empty) until ReleaseLease; returns the lease id (never 0).
  uint64_t AddLease(std::vector<store::ReadHandle> pins);
  // Drops the lease's pins; false for an id that is not a live lease of this session.
  bool ReleaseLease(uint64_t id);

  // Keeps `batch` (with at least one reserved item), reserved at `made`, until
  // TakeReservation; returns its id.
  uint64_t AddReservation(WriteBatch batch, MonotonicClock::time_point made);
  // Commits reservation `id` (WriteBatch::Commit with `keep`, one byte per item, and the
  // values' `checksums`, one per item or none): the per-item statuses. The items left out are
  // quarantined when the session has the arena mapped. NotFound for an unknown id (or one ended
  // as overdue); InvalidArgument when `keep` does not have one byte per item, or `checksums` is
  // neither empty nor one per item (the reservation stays open); Aborted when UCX writes into
  // it were still arriving (the window aborts it once they end).
  Result<std::vector<StatusCode>> Commit(uint64_t id, std::span<const uint8_t> keep,
                                         std::span<const uint64_t> checksums = {});
  // Ends every reservation older at `now` than `allowed(its reserved bytes)` (quarantined when
  // the session has the arena mapped, else aborted); returns how many.
  size_t AbortOverdueReservations(
      MonotonicClock::time_point now,
      const std::function<std::chrono::microseconds(uint64_t bytes)>& allowed);

  // Ends every lease and aborts every reservation, quarantined ones too, the lease word's
  // generation moved on first.
  void Clear();

 private:
  struct Lease {
    std::vector<store::ReadHandle> pins;
    uint64_t bytes = 0;
  };
  // Closes reservation `it` in the window; false when the window kept its batch.
  bool CloseInWindow(uint64_t id, WriteBatch* batch);
  // Whether the session's client may be writing into the arena through a mapping.
  bool mapped() const { return lease_words_ != nullptr; }

  ServerCounters* counters_;
  UcxService* ucx_ = nullptr;  // set with window_ and ucx_key_
  std::shared_ptr<ArenaWindow> window_;
  std::string ucx_key_;
  LeaseWords* lease_words_ = nullptr;  // set with lease_word_
  LeaseWords::Word lease_word_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Lease> leases_;
  struct Reservation {
    WriteBatch batch;
    MonotonicClock::time_point made;
  };
  std::unordered_map<uint64_t, Reservation> reservations_;
  // Reservations ended without their commit while the client may still write them: each
  // overdue batch's, or each commit's left-out items.
  std::vector<std::vector<store::WriteHandle>> quarantine_;
};

}  // namespace kvport::server
