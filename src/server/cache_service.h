// SPDX-License-Identifier: Apache-2.0
// CacheService: what a node does, with no wire format and no socket.
//
// Sessions (the kvport binary protocol over TCP or a Unix socket today; later a Redis-protocol
// listener or an RDMA transport) decode requests and call this layer; it turns them into store
// operations: look up and pin, reserve and commit, probe, delete, list, stats. How the bytes of
// a pinned value leave (written to a socket, read by the client from a shared mapping) and how
// the bytes of a reservation arrive (read from a socket, copied in by the client) is the
// session's business: the service hands out arena ranges and never touches their bytes.
//
// It is also where node-wide policy lives: the limits announced to clients, who may map the
// arena, the node's identity (for a client to tell a same-host node). Thread-safe: shared by
// every session of a node.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/thread_annotations.h"
#include "kvport/server.h"
#include "kvport/status.h"
#include "protocol/limits.h"
#include "server/access_policy.h"
#include "server/lease_words.h"
#include "server/list_cursors.h"
#include "server/server_stats.h"
#include "store/tiered_store.h"

namespace kvport::server {

class UcxService;
class UnauthenticatedConnections;

// Who the node is, as NODE_INFO tells it.
struct NodeIdentity {
  uint64_t node_id = 0;   // random per node process
  std::string host_id;    // the host's boot id: equal for every process on one running kernel
  std::string unix_path;  // the node's Unix socket; empty when it has none
};

struct ServiceOptions {
  protocol::Limits limits;
  std::string server_name;
  NodeIdentity identity;
  // Shared memory is offered on the Unix socket when the arena is shareable (a memfd).
  bool offer_shared_memory = true;
  // Per session: leases (ARENA_GET answers not yet released) and reservations (ARENA_RESERVE
  // answers not yet committed) it may hold at once. Beyond them the items are NoSpace.
  uint32_t max_leases_per_session = 4096;
  uint32_t max_reservations_per_session = 256;
  // Sessions served at once: each shared-memory session has a lease word (server/lease_words.h).
  uint32_t max_connections = 4096;
  // Access control: whether clients must present a token, and the tokens accepted.
  bool access_required = false;
  std::vector<AccessToken> tokens;
  // The node is open on a non-loopback address on purpose (ServerOptions::insecure); STATS
  // says so (counter "insecure"), so `kvport stat` can warn.
  bool insecure = false;
  // The namespaces whose Redis-protocol `<P>metadata`/`<P>kv_bytes` pairs are folded into one
  // object (ServerOptions::resp_fold_namespaces; "*": every namespace).
  std::set<std::string, std::less<>> resp_fold_namespaces;
};

class CacheService {
 public:
  // `store` and `counters` must outlive the service.
  CacheService(store::TieredStore* store, ServerCounters* counters, ServiceOptions options);

  const protocol::Limits& limits() const { return options_.limits; }
  const std::string& server_name() const { return options_.server_name; }
  const NodeIdentity& identity() const { return options_.identity; }
  const ServiceOptions& options() const { return options_; }
  ServerCounters& counters() const { return *counters_; }

  // --- access ---------------------------------------------------------------------------------
  // Every operation below takes the grant of the session asking (SessionAccess): what it may
  // not do is PermissionDenied, per key for batched operations (never a silent miss), and an
  // any-namespace search covers only the namespaces the grant may read (write, for deletes).
  AccessPolicy& access() { return access_; }
  // "token" (tokens required), "none" (open, loopback only) or "insecure" (open beyond it).
  std::string_view access_mode() const {
    if (access_.required()) return "token";
    return options_.insecure ? "insecure" : "none";
  }
  const AccessPolicy& access() const { return access_; }

  // --- reads ----------------------------------------------------------------------------------
  // Pins the live version of `key` in `ns`, or (any_namespace; ns is then empty) its first
  // match in the store's any-namespace search order: from memory, or brought back from the disk
  // tier (store::TieredStore::Lookup).
  Result<store::ReadHandle> Pin(const Grant& grant, std::string_view ns, std::string_view key,
                                bool any_namespace);
  // Pin for a read into a buffer of `capacity` bytes (what MGET and ARENA_GET answer per key):
  // kOk, pinned and fitting; kTooLarge, pinned (its meta and true length are still answered)
  // but longer than `capacity`; any other code is a miss (or PermissionDenied) and *pin stays
  // empty.
  StatusCode PinToRead(const Grant& grant, std::string_view ns, std::string_view key,
                       bool any_namespace, uint64_t capacity, store::ReadHandle* pin);
  // For an I/O thread, before a batched read: whether its keys need the disk (memory lacks one
  // the disk holds, among the namespaces `grant` may read; store::TieredStore::NeedsDisk), and
  // their promotions run on the disk tier's reader threads, `done` called there after.
  bool NeedsDisk(const Grant& grant, std::string_view ns, bool any_namespace,
                 std::span<const std::string_view> keys);
  void PromoteInBackground(std::shared_ptr<const Grant> grant, std::string ns, bool any_namespace,
                           std::vector<std::string> keys, std::function<void()> done);
  // A probe: pins nothing, counts nothing. *value_length is the live value's length when OK,
  // *meta_length its metadata's (when not null; any_namespace: not answered).
  Status Exists(const Grant& grant, std::string_view ns, std::string_view key, bool any_namespace,
                uint64_t* value_length, uint64_t* meta_length = nullptr);
  // Exists of each of `keys` in `ns` at once (store::ObjectStore::ExistsMany: codes[i] and
  // value_lengths[i]); every key PermissionDenied when the grant may not read `ns`.
  void ExistsMany(const Grant& grant, std::string_view ns, std::span<const std::string_view> keys,
                  std::span<StatusCode> codes, std::span<uint64_t> value_lengths);
  // OK when something was deleted (any_namespace: in every namespace holding the key).
  //
  // Every change (this, Commit, SetExpiry, AttachMeta, DeleteNamespace) takes the session's
  // `waiter`: a change that must wait for the disk tier (its tombstone of an older version) is
  // visible at once and `waiter` hears when it is durable, its session holding the answer until
  // then (store::TieredStore); null: the call waits.
  using Waiter = store::TieredStore::Waiter;
  Status Delete(const Grant& grant, std::string_view ns, std::string_view key, bool any_namespace,
                const Waiter& waiter = nullptr);

  // --- writes ---------------------------------------------------------------------------------
  // `first_bytes` < length: a stepwise reservation (store/object_store.h), grown with Grow.
  Result<store::WriteHandle> Reserve(const Grant& grant, std::string_view ns, std::string_view key,
                                     uint64_t length, std::string_view meta, uint32_t ttl_seconds,
                                     uint64_t first_bytes = UINT64_MAX);
  Status Grow(store::WriteHandle& handle, uint64_t capacity);
  Status Commit(store::WriteHandle&& handle, const Waiter& waiter = nullptr);
  // What one grant's stream writes may hold reserved and not yet written, across its sessions
  // (WriteBatch): a quarter of max_reserved_bytes on a node with tokens, so that no token can
  // take every write's room from the others; 0 (no per-grant bound) on an open node, whose
  // sessions are one party.
  uint64_t unwritten_per_grant() const;
  // The store's cap on reserved, unwritten bytes (0: none).
  uint64_t max_reserved_bytes() const;

  // --- listing and statistics -----------------------------------------------------------------
  struct ListPage {
    std::vector<std::string> keys;
    uint64_t next_cursor = 0;  // 0: the listing is complete
  };
  // One page of `ns` from a wire cursor (0 starts), for session `session_id` (which owns the
  // cursor it is given: ListCursorTable). Needs read of `ns` or admin. InvalidArgument for a
  // cursor this node did not issue for `ns` or has forgotten. With a disk tier the page is of
  // both tiers: the keys after the cursor's key in memory and on disk, merged ascending (a key
  // in both once), so a listing sees what a get finds. A cursor stands for the last key of its
  // page, whichever tier held it: a key moving between tiers during a listing is listed once.
  Result<ListPage> List(const Grant& grant, uint64_t session_id, std::string_view ns,
                        uint64_t cursor, uint32_t max_keys);
  // The session `session_id` ended: its LIST cursors are forgotten.
  void SessionEnded(uint64_t session_id);
  // A number no other session of this node has had.
  uint64_t NewSessionId() { return next_session_id_.fetch_add(1, std::memory_order_relaxed); }
  // Counters, and the usage of the namespaces `grant` may see (admin: all; otherwise those it
  // may read), ascending by name.
  ServerStats Stats(const Grant& grant) const;
  // Every namespace (the node's own view: Server::Stats, /metrics).
  ServerStats Stats() const;
  // The counters of Stats() without the namespaces' usage: its cost does not grow with the
  // number of namespaces (INFO, CONFIG GET).
  ServerStats Counters() const;
  // How many keys `ns` holds (DBSIZE): the store's count of the namespace (kept with every
  // commit, delete, expiry and eviction; a lookup per index shard, whatever the number of
  // namespaces), plus, with a disk tier, the keys only the disk holds (a pass over the
  // namespace's keys on disk). Needs read of `ns` or admin.
  Result<uint64_t> KeysIn(const Grant& grant, std::string_view ns);
  // Whether the Redis protocol folds `<P>metadata` pairs in `ns` (ServiceOptions).
  bool FoldsRespPairs(std::string_view ns) const {
    return options_.resp_fold_namespaces.contains("*") ||
           options_.resp_fold_namespaces.contains(ns);
  }

  // --- shared memory --------------------------------------------------------------------------
  // Whether the node offers its arena to same-host clients at all.
  bool offers_shared_memory() const;
  // OK when the local process running as `uid` may map the arena; otherwise NotSupported with
  // the reason (no memfd arena, shared memory switched off, another user). Mapping exposes
  // every namespace, so only the node's own user (and root) qualifies.
  Status MayMapArena(uid_t uid) const;
  // The arena's memfd (owned by the store; valid while the node runs) and its size.
  int arena_fd() const;
  // The sessions' lease words (a memfd handed out with the arena's), or null when shared memory
  // is not offered.
  LeaseWords* lease_words() const { return lease_words_.get(); }
  uint64_t arena_bytes() const;
  // Arena offset of a pinned or reserved range (what shared-memory clients are told).
  uint64_t OffsetOf(const uint8_t* data) const;
  // The arena's first byte in this process (what UCX registers).
  uint8_t* arena_base() const;

  // --- UCX --------------------------------------------------------------------------------
  // The node's UCX service (server/ucx_service.h), or null: set once by Server::Start before
  // any session runs, and constant after.
  void set_ucx(UcxService* service) { ucx_ = service; }
  UcxService* ucx() const { return ucx_; }

  // --- authentication ---------------------------------------------------------------------
  // The node's connections that have not authenticated yet, and its budget of failed
  // authentications (server/unauthenticated.h), or null: set once by Server::Start before any
  // session runs. HELLO and AUTH ask it before they check a secret and charge it when they
  // refuse one.
  void set_unauthenticated(UnauthenticatedConnections* table) { unauthenticated_ = table; }
  UnauthenticatedConnections* unauthenticated() const { return unauthenticated_; }

  // --- expiry and flushing (the Redis protocol's EXPIRE, TTL, FLUSHDB: docs/resp.md) --------
  // Sets the live version of (ns, key) to expire `ttl_ms` from now (0: never). Needs write of
  // `ns`. With a disk tier, a key held only on disk is brought back into memory first
  // (store::TieredStore::SetExpiry). NotFound when there is no live version.
  Status SetExpiry(const Grant& grant, std::string_view ns, std::string_view key, uint64_t ttl_ms,
                   const Waiter& waiter = nullptr);
  // Attaches `meta` to the live version of (ns, key), committed without metadata
  // (store::ObjectStore::AttachMeta: once, in place). Needs write of `ns`. With a disk tier, a
  // key held only on disk is brought back into memory first, and the disk copy (without the
  // meta) goes.
  Status AttachMeta(const Grant& grant, std::string_view ns, std::string_view key,
                    std::string_view meta, const Waiter& waiter = nullptr);
  // How long the live version of (ns, key) has left, in ms (0: it never expires). Needs read
  // of `ns`. NotFound when there is none.
  Result<uint64_t> TimeToLive(const Grant& grant, std::string_view ns, std::string_view key);
  // Deletes every object of `ns`, in both tiers. Admin only. Returns how many were deleted.
  Result<uint64_t> DeleteNamespace(const Grant& grant, std::string_view ns,
                                   const Waiter& waiter = nullptr);
  bool has_disk() const { return store_->has_disk(); }

 private:
  ServerStats Collect(bool namespaces) const;

  store::TieredStore* const store_;
  ServerCounters* const counters_;
  const ServiceOptions options_;
  AccessPolicy access_;
  ListCursorTable list_cursors_;
  std::unique_ptr<LeaseWords> lease_words_;  // null: shared memory is not offered
  std::string lease_words_error_;            // why lease_words_ could not be made
  UcxService* ucx_ = nullptr;
  UnauthenticatedConnections* unauthenticated_ = nullptr;
  std::atomic<uint64_t> next_session_id_{1};
};

// The reservations of one batched write (an MSET, an ARENA_RESERVE) until they are committed.
// Items the store refused keep the store's status and have no destination. Destroying a batch
// aborts every reservation it still holds: nothing of it becomes visible.
//
// A stepwise batch (an MSET read from a socket) reserves each item a step at a time as its bytes
// arrive (Reserve's first_bytes, then Grow), and what its items hold reserved and not yet written
// (MarkWritten) counts against their grant's share (CacheService::unwritten_per_grant) as well as
// the store's max_reserved_bytes. A shared-memory batch reserves whole values: its client is the
// node's own user with every namespace (docs/security.md), and writes through the mapping, where
// the node cannot see progress.
class WriteBatch {
 public:
  // Reserves with the permissions of `grant`; its commits tell `waiter` (CacheService::Delete).
  WriteBatch(CacheService* service, std::shared_ptr<const Grant> grant, bool stepwise = false,
             CacheService::Waiter waiter = nullptr)
      : service_(service),
        grant_(std::move(grant)),
        grant_cap_(stepwise ? service->unwritten_per_grant() : 0),
        waiter_(std::move(waiter)) {}
  WriteBatch(WriteBatch&&) noexcept = default;
  ~WriteBatch();

  // Reserves one more item (in item order): `first_bytes` of it when less than `length` (a
  // stepwise batch), else all of it.
  void Reserve(std::string_view ns, std::string_view key, uint64_t length, std::string_view meta,
               uint32_t ttl_seconds, uint64_t first_bytes = UINT64_MAX);
  // Item i's reservation to at least `capacity` bytes (its destination may move). False when it
  // cannot: the item's status becomes the reason, and its reservation stays (bytes may still be
  // read into it) until Commit, which aborts it.
  bool Grow(size_t i, uint64_t capacity);
  // Item i's first `bytes` are written (stepwise batches: they stop counting as unwritten).
  void MarkWritten(size_t i, uint64_t bytes);
  // Item i's expiry at Commit, in place of Reserve's (store::WriteHandle::SetTtlSeconds).
  void SetTtlSeconds(size_t i, uint32_t ttl_seconds);
  // Item i's value checksum as its writer gave it (store::WriteHandle::SetChecksum; 0: none).
  void SetChecksum(size_t i, uint64_t checksum);
  // How far ahead of the bytes read a stepwise item (a binary MSET's value, a large RESP SET's)
  // is reserved: a value whose bytes stop coming makes the store evict (and hold) at most this
  // much more than was sent. A fixed step (not doubling) keeps what an item holds unwritten
  // within the node's and the token's caps on it (max_reserved_bytes, a quarter of it); a 32 MiB
  // value grows about 8 times, nearly always in place (store/object_store.h).
  static constexpr uint64_t kReserveAhead = 4 << 20;
  // The largest step a stepwise batch should reserve ahead of its written bytes: `wanted`, or
  // less on a node whose caps on unwritten bytes (max_reserved_bytes, the grant's share) are
  // small, so that one step never takes a whole cap alone.
  uint64_t StepBytes(uint64_t wanted) const;

  size_t size() const { return statuses_.size(); }
  StatusCode status(size_t i) const { return statuses_[i]; }
  // Where item i's bytes go: its reservation (nullptr when the item was refused).
  uint8_t* destination(size_t i) const {
    return handles_[i].valid() ? handles_[i].data() : nullptr;
  }
  // Bytes of destination(i) reserved so far (its whole length unless reserved stepwise).
  uint64_t capacity(size_t i) const { return handles_[i].valid() ? handles_[i].capacity() : 0; }
  uint64_t offset(size_t i) const;
  // True when at least one item is reserved.
  bool any_reserved() const;
  // The bytes reserved for the items not refused.
  uint64_t reserved_bytes() const;

  // Commits the reserved items in item order (so a key written twice in one batch ends with
  // its last value); with `keep` (one byte per item), only those whose byte is 1, the others'
  // status becoming Aborted: their reservations are aborted, or, with `not_kept`, handed over
  // there (for a caller whose writer may still be writing them: ArenaHoldings). Those whose Grow
  // failed are aborted. Returns the per-item statuses. The batch is empty afterwards.
  std::vector<StatusCode> Commit(std::span<const uint8_t> keep = {},
                                 std::vector<store::WriteHandle>* not_kept = nullptr);
  // Ends the batch uncommitted (counted as an aborted write, nothing of it visible), handing its
  // reservations to `held` instead of freeing them: for a caller whose writer may still be
  // writing them (ArenaHoldings). The batch is empty afterwards.
  void AbortInto(std::vector<store::WriteHandle>* held);

 private:
  // Item i's hold on its grant's share: its reservation's capacity less what is written.
  uint64_t Unwritten(size_t i) const;
  // Sets item i's hold to `bytes`, releasing the difference (never adds: see TryHold).
  void SetHeld(size_t i, uint64_t bytes);
  // Adds `bytes` to the grant's hold unless that takes it past its share; true without a share.
  bool TryHold(uint64_t bytes) const;

  CacheService* service_;
  std::shared_ptr<const Grant> grant_;
  uint64_t grant_cap_;  // 0: no per-grant share (see above)
  CacheService::Waiter waiter_;
  std::vector<store::WriteHandle> handles_;  // invalid where the item was refused
  std::vector<StatusCode> statuses_;
  std::vector<uint64_t> written_;  // per item, bytes marked written
  std::vector<uint64_t> held_;     // per item, bytes held against the grant's share
  bool committed_ = false;
};

}  // namespace kvport::server
