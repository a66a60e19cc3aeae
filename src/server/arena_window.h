// SPDX-License-Identifier: Apache-2.0
// ArenaWindow: the arena bytes a UCX-attached session's peer may reach, and nothing else.
//
// A session that was granted UCX_ATTACH moves its values as UCX messages to the node's UCX
// service, which copies them into or out of the arena on the peer's behalf. Before any copy the
// service asks the session's window: a write must fall inside an extent the session reserved
// and has not committed or aborted; a read inside a value it leased and has not released. The
// window is how the session (on its own I/O thread) tells the service (on another) what it
// holds, and how the service proves to the session that no copy is still landing in an extent
// it is about to hand back:
//
//   - A write that arrives whole with its message is copied under the window's lock: once
//     CloseReservation has returned, no such copy can start.
//   - A write whose data is still at the sender is received straight into the extent; the
//     extent's reservation counts it until it ends (BeginWrite / EndWrite). A reservation closed
//     while writes are in flight is not handed back: the window keeps its WriteBatch and drops
//     it (aborting its extents) when the last write ends. So an extent returns to the allocator
//     only when no UCX writer can still reach it.
//   - A read takes its own pin of the leased value (BeginRead), held until the bytes are sent,
//     so a lease released meanwhile frees nothing the send still reads.
//
// The window also ends the session's access when the session ends (Shut), and when the token it
// authenticated with is revoked or no longer grants every namespace (checked on each request).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/thread_annotations.h"
#include "kvport/status.h"
#include "server/access_policy.h"
#include "server/cache_service.h"
#include "store/object_store.h"

namespace kvport::server {

class ArenaWindow {
 public:
  // The window of a session whose access is `access` (a copy, re-checked against `policy` when
  // the node's tokens change), over the arena at [arena, arena + arena_bytes).
  ArenaWindow(uint8_t* arena, uint64_t arena_bytes, const AccessPolicy* policy,
              SessionAccess access);
  ~ArenaWindow();
  ArenaWindow(const ArenaWindow&) = delete;
  ArenaWindow& operator=(const ArenaWindow&) = delete;

  // --- the session's side --------------------------------------------------------------------
  // Opens every reserved item of `batch` (reservation `id`) to writes.
  void OpenReservation(uint64_t id, const WriteBatch& batch) EXCLUDES(mu_);
  // Closes reservation `id` to writes. True when no write is in flight: the caller commits or
  // aborts `*batch`. False when writes are still arriving: the window has taken `*batch` and
  // aborts it once they have ended (the caller must not commit it).
  bool CloseReservation(uint64_t id, WriteBatch* batch) EXCLUDES(mu_);
  // Opens the values `pins` (lease `id`) to reads; CloseLease closes them.
  void OpenLease(uint64_t id, const std::vector<store::ReadHandle>& pins) EXCLUDES(mu_);
  void CloseLease(uint64_t id) EXCLUDES(mu_);
  // The session ended: nothing is reachable from now on. Returns the UCX endpoints that carried
  // its requests (for the service to close). Reservations still open are the caller's.
  std::vector<uint64_t> Shut() EXCLUDES(mu_);

  // --- the UCX service's side ----------------------------------------------------------------
  // Ok while the session lives and its token still grants every namespace; PermissionDenied
  // (and the window shut) once the token was revoked or narrowed; Unavailable once shut.
  // `endpoint` is remembered as one that carried the session's requests.
  Status Admit(uint64_t endpoint) EXCLUDES(mu_);
  // Copies [data, data + bytes) to arena offset `offset`, inside an open reservation.
  // PermissionDenied when it is not inside one.
  Status Write(uint64_t offset, const void* data, uint64_t bytes) EXCLUDES(mu_);
  // A write to arriving later: where its bytes go, counted against the reservation until
  // EndWrite(*reservation). PermissionDenied when not inside an open reservation.
  Result<uint8_t*> BeginWrite(uint64_t offset, uint64_t bytes, uint64_t* reservation) EXCLUDES(mu_);
  void EndWrite(uint64_t reservation) EXCLUDES(mu_);
  // A pin of the leased value holding [offset, offset + bytes), and where those bytes are.
  // PermissionDenied when not inside a value of an open lease.
  Result<store::ReadHandle> BeginRead(uint64_t offset, uint64_t bytes, const uint8_t** at)
      EXCLUDES(mu_);

 private:
  struct Extent {
    uint64_t end;           // one past the last byte
    uint64_t id;            // the reservation or lease it belongs to
    store::ReadHandle pin;  // leases: the value's pin; reservations: empty
  };
  struct Reservation {
    std::vector<uint64_t> starts;  // its extents' offsets in writable_
    uint64_t writes_in_flight = 0;
    std::unique_ptr<WriteBatch> kept;  // closed while writes were in flight
  };
  // The extent of `extents` holding [offset, offset + bytes), or null.
  // A second bound behind the extents, which the store placed inside the arena.
  bool InArena(uint64_t offset, uint64_t bytes) const {
    return offset <= arena_bytes_ && bytes <= arena_bytes_ - offset;
  }
  template <typename Extents>
  static const Extent* Find(const Extents& extents, uint64_t offset, uint64_t bytes);

  uint8_t* const arena_;
  const uint64_t arena_bytes_;
  const AccessPolicy* const policy_;
  Mutex mu_;
  SessionAccess access_ GUARDED_BY(mu_);
  bool shut_ GUARDED_BY(mu_) = false;
  std::map<uint64_t, Extent> writable_ GUARDED_BY(mu_);  // by offset
  // By offset; a value leased twice (the same key twice, or by two leases) is here twice.
  std::multimap<uint64_t, Extent> readable_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, Reservation> reservations_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, std::vector<uint64_t>> leases_ GUARDED_BY(mu_);  // id -> offsets
  std::vector<uint64_t> endpoints_ GUARDED_BY(mu_);
};

}  // namespace kvport::server
