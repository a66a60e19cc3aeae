// SPDX-License-Identifier: Apache-2.0
// TieredStore: a node's one store, memory (ObjectStore) over an optional disk tier
// (WriteBehindDisk), seen by its callers as one versioned key-value store (docs/store.md,
// "Versions, not keys").
//
// The invariant: a read returns the newest acknowledged version of a key or a miss, never an
// older version, never a deleted one, whichever tier holds what. Every committed version has a
// sequence number (ReadHandle::sequence), carried to its disk record; a disk copy is "this
// version", never "this key". Three rules make the invariant hold, all of them here:
//  - An eviction is registered with the disk tier before the object leaves memory, under the
//    memory store's lock of the key (EvictionSink::Leaving), so an eviction and a change of its
//    key are ordered one way or the other.
//  - Every commit and every delete ends, on disk and in the disk's write queue, every version
//    below its own number (WriteBehindDisk::Erase), under the key's stripe: at once for every
//    reader, and durably once its tombstone is synced. A change given a DurabilityWaiter returns
//    at once and the waiter hears when it is durable (an I/O thread never waits for the disk:
//    it holds the change's answer until then); without one, the call waits.
//  - A promotion (a miss served from disk: the version copied back into memory) reads the disk
//    and commits to memory under the key's stripe, or, reading without it (a batch), commits
//    only if memory still has no version and the disk still holds the one read. Either way no
//    commit or delete falls between its read and its commit.
//
// Without a disk tier every call is the memory store's. Access control is the caller's: calls
// that search every namespace take a filter of the namespaces the caller may use.
//
// Thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/thread_annotations.h"
#include "kvport/status.h"
#include "store/object_store.h"
#include "store/write_behind_disk.h"

namespace kvport::store {

// Tests only: a sink between the memory store's evictions and the disk tier, which must hand
// each call on to `next` (set by TieredStore::Open): where a test holds an eviction between its
// two steps to force an interleaving.
class EvictionRelay : public EvictionSink {
 public:
  EvictionSink* next = nullptr;
};

struct TieredStoreOptions {
  // The memory store's options; its eviction_sink and first_sequence are set by Open when there
  // is a disk tier.
  StoreOptions memory;
  // The disk tier in disk.dir; none when disk.dir is empty.
  WriteBehindDiskOptions disk;
  EvictionRelay* relay_for_testing = nullptr;
};

class TieredStore {
 public:
  // Opens the disk tier (restoring its index) when one is configured, then the memory store,
  // whose sequence numbers start above every one on disk. The errors of either, with the
  // context "the disk tier" or "cannot create the store".
  static Result<std::unique_ptr<TieredStore>> Open(TieredStoreOptions options);
  // The memory store goes first; the disk tier then writes what its queue holds.
  ~TieredStore();
  TieredStore(const TieredStore&) = delete;
  TieredStore& operator=(const TieredStore&) = delete;

  // Which namespaces a call searching every namespace may use (unset: every one).
  using NamespaceFilter = ObjectStore::NamespaceFilter;
  // Who hears that a change is durable (WriteBehindDisk::Erase).
  using Waiter = std::shared_ptr<DurabilityWaiter>;

  // The memory tier: its arena, limits, gauges and per-namespace usage, and the calls no disk
  // copy concerns (Reserve, Grow, Sweep, DropAll).
  ObjectStore& memory() { return *memory_; }
  const ObjectStore& memory() const { return *memory_; }
  // The disk tier, or null.
  WriteBehindDisk* disk() const { return disk_.get(); }
  bool has_disk() const { return disk_ != nullptr; }

  // --- reads ------------------------------------------------------------------------------
  // Pins the newest version of (ns, key): from memory, or promoted from disk into memory.
  // NotFound for a miss; the memory store's error when a version on disk cannot be brought in.
  Result<ReadHandle> Lookup(std::string_view ns, std::string_view key);
  // Lookup of `key`'s first match in the memory store's any-namespace order among the
  // namespaces `readable` allows, then, on a miss, of its first match on disk (ascending).
  Result<ReadHandle> LookupInAnyNamespace(std::string_view key, const NamespaceFilter& readable);
  // Whether a read of `keys` in `ns` (any_namespace: in the namespaces `readable` allows) would
  // read the disk: a key memory does not hold is on disk. Reads nothing from disk.
  bool NeedsDisk(std::string_view ns, bool any_namespace, std::span<const std::string_view> keys,
                 const NamespaceFilter& readable = {});
  // The promotions a read of `keys` would make (PromoteAhead, then each key's lookup), run on
  // the disk tier's reader threads; `done` is called there once they are over (whatever they
  // found). For an I/O thread, which then reads the keys from memory.
  void PromoteInBackground(std::string ns, bool any_namespace, std::vector<std::string> keys,
                           NamespaceFilter readable, std::function<void()> done);

  // Whether (ns, key) has a live version in either tier: its value's length and its meta's
  // (each when not null). Pins nothing.
  Status Exists(std::string_view ns, std::string_view key, uint64_t* value_length = nullptr,
                uint64_t* meta_length = nullptr);
  // Exists of each of `keys` in `ns` (codes[i], value_lengths[i]: ObjectStore::ExistsMany's
  // contract): memory's probe of them all at once, then the disk tier for memory's misses.
  void ExistsMany(std::string_view ns, std::span<const std::string_view> keys,
                  std::span<StatusCode> codes, std::span<uint64_t> value_lengths);
  Status ExistsInAnyNamespace(std::string_view key, uint64_t* value_length,
                              const NamespaceFilter& readable);
  // How long the live version of (ns, key) has left, in ms (0: it never expires); a version
  // held only on disk is promoted first. NotFound when there is none.
  Result<uint64_t> TimeToLive(std::string_view ns, std::string_view key);

  // --- writes -----------------------------------------------------------------------------
  // ObjectStore::Reserve and Grow: a reservation is in memory only until its commit.
  Result<WriteHandle> Reserve(std::string_view ns, std::string_view key, uint64_t length,
                              std::string_view meta, uint32_t ttl_seconds,
                              uint64_t first_bytes = UINT64_MAX);
  Status Grow(WriteHandle& handle, uint64_t capacity);
  // Each change below takes a `waiter` (see above; null: the call waits until the change is
  // durable).
  // Makes the reservation the key's newest version; every older one ends in both tiers.
  Status Commit(WriteHandle&& handle, const Waiter& waiter = nullptr);
  // Deletes (ns, key) in both tiers: OK when either held it.
  Status Delete(std::string_view ns, std::string_view key, const Waiter& waiter = nullptr);
  // Delete in every namespace `writable` allows that holds `key` in either tier.
  Status DeleteInEveryNamespace(std::string_view key, const NamespaceFilter& writable,
                                const Waiter& waiter = nullptr);
  // Every key of `ns` in either tier deleted; how many.
  Result<uint64_t> DeleteNamespace(std::string_view ns, const Waiter& waiter = nullptr);
  // Changes of the live version in place (ObjectStore::SetExpiry, AttachMeta): a version only
  // on disk is promoted first; the change makes a new version, and the old disk copy ends.
  Status SetExpiry(std::string_view ns, std::string_view key, uint64_t ttl_ms,
                   const Waiter& waiter = nullptr);
  Status AttachMeta(std::string_view ns, std::string_view key, std::string_view meta,
                    const Waiter& waiter = nullptr);

  // --- listing ----------------------------------------------------------------------------
  // Up to `max_keys` keys of `ns` strictly after `after`, ascending, from both tiers merged (a
  // key in both once); next_cursor: the last key when there may be more, else empty.
  Result<KeyListing> ListKeys(std::string_view ns, std::string_view after, uint32_t max_keys);
  // How many keys `ns` holds: the memory store's count, plus the keys only the disk holds (a
  // pass over the namespace's keys on disk).
  uint64_t KeysIn(std::string_view ns);

  // --- stopping ---------------------------------------------------------------------------
  // A clean stop (nothing else calls the store any more): what memory holds goes to the disk
  // tier's queue until `deadline` (WriteBehindDisk::FlushAtStop). Nothing without a disk tier.
  void FlushAtStop(std::chrono::steady_clock::time_point deadline);

 private:
  TieredStore() = default;

  // A memory miss of (ns, key) served from disk, under the key's stripe: NotFound when the disk
  // has it not; the memory store's error when it cannot take it.
  Result<ReadHandle> Promote(std::string_view ns, std::string_view key);
  // PromoteInBackground's first step: brings the keys memory does not hold from disk at
  // once (reads in parallel, WriteBehindDisk::ReadMany), so that the lookups that follow find
  // them in memory. Best effort: a key it could not bring is read again (or missed) by its
  // lookup, which also says why. `any_namespace`: each key's first readable namespace on disk.
  void PromoteAhead(std::string_view ns, std::span<const std::string_view> keys);
  void PromoteAheadInAnyNamespace(std::span<const std::string_view> keys,
                                  const NamespaceFilter& readable);
  // The reads of a PromoteAhead (the keys and the namespaces found for them).
  void PromoteMany(std::span<const std::string_view> namespaces,
                   std::span<const std::string_view> keys);
  // `change` of the live version of (ns, key) in memory (it answers the changed version's
  // number) as one: promoted first when only on disk, the old disk copy ended under the stripe.
  Status ChangeInPlace(std::string_view ns, std::string_view key, const Waiter& waiter,
                       const std::function<Status(uint64_t* sequence)>& change);
  // Delete of (ns, key) from both tiers, under its stripe: OK when either held it.
  Status DeleteBothTiers(std::string_view ns, std::string_view key, const Waiter& waiter);
  // WriteBehindDisk::Erase of what is below `sequence`, heard by `waiter`, or waited for when
  // it is null. Whether it ended any version.
  bool EndBelow(std::string_view ns, std::string_view key, uint64_t sequence, const Waiter& waiter);

  // A key's promotion from disk, its commits and its deletes (both tiers) hold its stripe.
  static constexpr size_t kStripes = 256;
  std::array<Mutex, kStripes> stripes_;
  Mutex& Stripe(std::string_view ns, std::string_view key);

  // Declared in this order: the memory store, whose evictions go to the disk tier, goes first.
  std::unique_ptr<WriteBehindDisk> disk_;
  std::unique_ptr<ObjectStore> memory_;
};

}  // namespace kvport::store
