// SPDX-License-Identifier: Apache-2.0
// WriteBehindDisk: the disk tier (DiskTier) behind a write queue, as the tiered store
// (tiered_store.h) uses it (docs/store.md, "The disk tier").
//
// An object the memory store evicts to make room is copied (EvictionSink) into a queue that a
// thread of its own writes to the DiskTier, so that no I/O thread waits for the disk on a put; at
// most max_pending_bytes wait (past that an evicted object is dropped, and counted, as it would
// have been without a disk tier). A read that misses memory finds the object on disk or still in
// the queue; a batch of reads runs on a pool of reader threads.
//
// Versions, not keys: every queued object and every disk record carries the sequence number of
// the version it holds (ReadHandle::sequence). The invariant: what the queue and the disk hold
// of a key is never older than the newest version a commit or a delete of the key has
// acknowledged; Erase(ns, key, s), which the tiered store calls after every commit and delete
// (s: the new version's number, or the delete's), ends every version below s wherever it is,
// even one still being copied out of memory. A version on disk ends at once for every reader
// (a fence: a record below it is not seen), and durably once the writer thread has appended and
// synced its tombstone, which the change's DurabilityWaiter hears of: the caller never waits
// for the disk, and the change is acknowledged when it would survive a power loss. That holds
// because an eviction is registered here (Leaving) under the memory store's lock of the key, before
// the object leaves memory: an eviction and a change of its key are ordered one way or the other,
// and either way the older version ends. A version the disk already holds (it was promoted from
// there) is not written again.
//
// Compaction of mostly-dead segments runs on the writer thread when nothing waits,
// rate-limited.
//
// Times on disk are unix ms (system_clock), so that a TTL still counts across a restart.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/log_limiter.h"
#include "kvport/status.h"
#include "store/disk_tier.h"
#include "store/object_store.h"

namespace kvport::store {

// Where a change that must wait for the disk hears that it is durable: Begin() is called before
// the call making the change returns (on the caller's thread, under the disk tier's lock: it
// must only count), End() once the change's tombstone is synced (from the writer thread), with
// the outcome: an error means the ended version is gone for this process but may be back after
// a restart (it is logged and counted, disk_write_errors).
class DurabilityWaiter {
 public:
  virtual ~DurabilityWaiter() = default;
  virtual void Begin() = 0;
  virtual void End(const Status& status) = 0;
};

struct WriteBehindDiskOptions {
  std::string dir;
  uint64_t capacity_bytes = 0;
  uint64_t segment_bytes = uint64_t{256} << 20;  // lowered to a quarter of a small capacity
  uint64_t max_pending_bytes = uint64_t{64} << 20;
  // ServerOptions::namespace_on_disk: which namespaces' evicted objects are written.
  std::map<std::string, bool> namespace_on_disk;
  // false: the segments already in `dir` are removed at Open (the tier starts empty).
  bool restore = true;
  // Tests only: opens the folder in place of OpenSegmentFolder(dir) (one whose files fail or
  // stall on demand).
  using FolderOpener =
      std::function<Result<std::unique_ptr<SegmentFolder>>(const std::string& dir)>;
  FolderOpener open_folder_for_testing;
  // The node's max_index_bytes (0: none): the disk tier's index may take half of it; past that
  // an evicted object is not written (disk_index_drops).
  uint64_t max_index_bytes = 0;
};

struct WriteBehindDiskStats {
  DiskTierStats tier;
  uint64_t pending_bytes = 0;       // evicted, waiting for the writer
  uint64_t pending_tombstones = 0;  // tombstones of changes waiting for the writer (Erase)
  uint64_t written = 0;             // evicted objects written to disk
  uint64_t queue_drops = 0;         // evicted objects dropped: the queue was full
  uint64_t hits = 0;                // gets served from the disk tier (or its queue)
  uint64_t restore_ms = 0;          // how long the start's index rebuild took
  uint64_t stop_flushed = 0;        // objects a clean stop wrote from memory (FlushAtStop)
  uint64_t index_drops = 0;         // evicted objects not written: the index had its share
  uint64_t batch_reads = 0;         // values read by ReadMany calls of more than one
};

// Tests of a whole node, whose options cannot carry a folder: while `opener` is set, every
// WriteBehindDisk opened without an open_folder_for_testing of its own opens its folder with it.
// Set it before starting the node and clear it after.
void SetFolderOpenerForTesting(WriteBehindDiskOptions::FolderOpener opener);

class WriteBehindDisk final : public EvictionSink {
 public:
  // Opens (creating) the folder, rebuilds the index of what is on disk, starts the writer.
  // InvalidArgument for bad options; the folder's and the segments' errors as they are.
  static Result<std::unique_ptr<WriteBehindDisk>> Open(const WriteBehindDiskOptions& options);
  // Writes what is still queued (the node is stopping), then stops the writer.
  ~WriteBehindDisk();
  WriteBehindDisk(const WriteBehindDisk&) = delete;
  WriteBehindDisk& operator=(const WriteBehindDisk&) = delete;

  // Whether `ns`'s objects go to disk (its namespace_tiers entry, else "*"'s, else yes).
  bool GoesToDisk(std::string_view ns) const;

  // EvictionSink. Leaving registers `object`'s version in the queue (under the store's
  // lock of its key) when its namespace goes to disk, the disk does not hold that very version
  // already, and the queue has room (otherwise it is gone, as without a disk tier); Evicted then
  // copies its bytes in, and the writer may take it. Until then it is invisible (a get misses,
  // as for an object being evicted without a disk tier).
  bool Leaving(const EvictedObject& object) override;
  void Evicted(const EvictedObject& object) override;

  // The highest sequence number the disk holds (store::StoreOptions::first_sequence starts
  // above it).
  uint64_t last_sequence() const { return tier_->last_sequence(); }

  // A clean stop: queues a copy of every object still in `store` whose namespace goes to disk
  // and whose version the disk does not hold already, waiting for room in the queue, until
  // `deadline`; what is left then is not written (and counted in the log line). The store must no
  // longer change (the node's I/O threads have stopped). The destructor then writes what is queued.
  void FlushAtStop(ObjectStore& store, std::chrono::steady_clock::time_point deadline);

  // The newest version of (`ns`, `key`) in the queue or on disk, with its TTL left (0: none),
  // without reading a value from disk: its length and sequence number, for ReadValue into a
  // buffer of the caller's (an object still in the queue comes with its value). NotFound
  // otherwise (absent or expired).
  struct Found {
    std::string meta;
    std::vector<char> value;  // only for an object found in the queue
    uint64_t ttl_left_ms = 0;
    uint64_t sequence = 0;  // the version's (ReadValue and Holds take it for a disk record)
    uint64_t value_bytes = 0;
    bool queued = false;    // found in the queue: `value` holds it
    uint64_t checksum = 0;  // the value's xxh3-64 (its writer's, or the disk's own)
  };
  Result<Found> Find(std::string_view ns, std::string_view key);
  // DiskTier::ReadValue: version `sequence` of (ns, key) into `out`, straight from the
  // disk when `out` is block-aligned with room for whole blocks. A hit when OK.
  Status ReadValue(std::string_view ns, std::string_view key, uint64_t sequence,
                   std::span<char> out);
  // ReadValue of each, at once: the calling thread and kReaders reader threads each read one
  // value at a time, so a batch keeps up to kReaders + 1 reads in flight on the disk.
  struct ValueRead {
    std::string_view ns;
    std::string_view key;
    uint64_t sequence = 0;
    std::span<char> out;
    Status status;  // ReadValue's
  };
  void ReadMany(std::span<ValueRead> reads);
  // Whether the disk still holds the version of (ns, key) that Find found as `sequence`.
  bool Holds(std::string_view ns, std::string_view key, uint64_t sequence) const;
  // Whether it is there, and its value's and its meta's lengths (each when not null).
  bool Contains(std::string_view ns, std::string_view key, uint64_t* value_bytes,
                uint64_t* meta_bytes = nullptr);
  // The keys of namespace `ns` on disk or in the queue (DiskTier::KeysOf).
  std::vector<std::string> KeysOf(std::string_view ns);
  // Up to `limit` live (unexpired) keys of `ns` on disk or in the queue, ascending, strictly
  // after `after` ("" : from the first): what a listing merges with memory's keys. A pass over
  // the disk's index, as KeysOf.
  std::vector<std::string> KeysAfter(std::string_view ns, std::string_view after, size_t limit);
  // The namespaces holding `key` on disk or in the queue, ascending ("" first).
  std::vector<std::string> NamespacesOf(std::string_view key);
  // Ends every version of (ns, key) below `sequence` in the queue and on disk: whether it ended
  // any. What the queue holds ends now. A version on disk, or one the writer is writing, ends
  // now for every reader (a fence) and durably once the writer has appended and synced a
  // tombstone of `sequence` (DiskTier::Erase): `waiter` hears of it (Begin now, End then).
  // Nothing on disk to end: `waiter` is not called at all. Never waits for the disk.
  bool Erase(std::string_view ns, std::string_view key, uint64_t sequence,
             const std::shared_ptr<DurabilityWaiter>& waiter);

  // Runs `task` on one of the reader threads, soon: for work that reads the disk and must not
  // hold its caller (a promotion for an I/O thread). Tasks still queued when the tier stops
  // (StopTasks) are dropped without running.
  void RunOnReader(std::function<void()> task);
  // Waits for the tasks running now, and drops the queued ones: the tiered store calls it before
  // the memory store the tasks use goes.
  void StopTasks();

  WriteBehindDiskStats stats() const;
  // The heap the disk tier's index takes (DiskTierStats::index_bytes), kept current for
  // StoreOptions::index_bytes_elsewhere.
  const std::atomic<uint64_t>& index_bytes() const { return index_bytes_; }
  // "disk tier DIR: 1.0 GiB (io_uring+O_DIRECT), 12 objects restored in 3 ms", for the start
  // line.
  std::string Describe() const;

 private:
  struct Pending {
    std::string ns, key, meta;
    // A tombstone of `sequence` to append and sync (Erase), not an object; `waiter` hears when
    // it is durable.
    bool tombstone = false;
    std::shared_ptr<DurabilityWaiter> waiter;
    std::vector<char> value;
    uint64_t expiry_ms = 0;  // unix ms; 0 never
    uint64_t sequence = 0;   // the version's
    uint64_t checksum = 0;   // the value's, as its writer gave it (0: none)
    uint64_t bytes = 0;      // the value's length, counted in pending_bytes_
    // Registered by Leaving and not yet copied in by Evicted: meta and value are its filler's
    // (written without mu_), nobody else reads them or removes the item.
    bool filling = false;
    bool ended = false;  // a newer version or a delete ended it while filling: it goes when filled
    bool writing = false;  // in the batch the writer is writing now
    // Whether a reader may see it (Find, Contains, KeysOf, NamespacesOf).
    bool readable() const { return !tombstone && !filling && !ended; }
  };
  using Queue = std::list<Pending>;

  WriteBehindDisk(const WriteBehindDiskOptions& options, std::unique_ptr<DiskTier> tier);
  void WriterLoop();
  // A failed write, logged at most once per 10 s (write_error_log_). mu_ held.
  void LogWriteError(std::string_view what, const Status& error);
  // One ReadMany call, read by its caller and the reader threads together.
  struct ReadJob {
    std::span<ValueRead> reads;
    std::atomic<size_t> next{0};  // the next value to read
    size_t done = 0;              // values read (read_mu_)
    int readers = 0;              // reader threads working on it now (read_mu_)
  };
  void ReaderLoop();
  // Reads the job's values until none is left.
  void ReadSome(ReadJob& job);

  // Queues `item`, whose bytes pending_bytes_ already counts; an older queued version of its
  // key ends (EndBelow). mu_ held.
  Queue::iterator Enqueue(Pending item);
  // Ends the queued versions of `id` below `sequence`: removed, or marked ended while being
  // filled; one being written is left to the writer (Erase fences it). Whether any was ended.
  // mu_ held.
  bool EndBelow(const std::string& id, uint64_t sequence);
  // Takes `item` out of the queue, its bytes out of pending_bytes_. mu_ held.
  void Unqueue(Queue::iterator item);
  // The newest version of `id` in the queue that a reader may see (filled, not ended), or
  // queue_.end(). mu_ held.
  Queue::iterator NewestQueued(const std::string& id);

  // Compaction (DiskTier::CompactStep) runs on the writer thread when no evicted object
  // waits, in steps of kCompactStepBytes, at most kCompactRate bytes a second: a fraction of
  // any SSD's bandwidth, so that it never starves the gets reading from the same disk.
  static constexpr uint64_t kCompactStepBytes = uint64_t{4} << 20;
  // The writer takes at most this much of the queue at once (one write per segment it fills).
  static constexpr uint64_t kWriteBatchBytes = uint64_t{8} << 20;
  static constexpr size_t kWriteBatchObjects = 64;
  static constexpr uint64_t kCompactRate = uint64_t{64} << 20;

  const WriteBehindDiskOptions options_;
  const std::unique_ptr<DiskTier> tier_;
  std::string io_mode_;  // how the segments are read and written (SegmentFolder::io_mode)
  // mu_ guards everything below (a std::mutex: it pairs with the condition variable).
  mutable std::mutex mu_;
  std::condition_variable wake_;
  Queue queue_;  // oldest first
  // Each key's queued items (by ObjectId): nearly always one; more while an ended version is
  // still being filled or written.
  std::unordered_map<std::string, std::vector<Queue::iterator>> queued_;
  // The items being filled, by sequence number (unique: one version is evicted once at a time).
  std::unordered_map<uint64_t, Queue::iterator> filling_;
  LogLimiter write_error_log_{std::chrono::seconds(10)};
  std::vector<std::string> writing_ids_;  // the ObjectIds of the batch being written
  // Per ObjectId, the number of the newest tombstone queued and not yet synced: a disk record
  // of the key below it is ended (Find, Contains, Holds, KeysOf and NamespacesOf do not see it).
  std::unordered_map<std::string, uint64_t> fences_;
  // Whether the disk record of `id` found with `sequence` is ended by a fence. mu_ held.
  bool Fenced(const std::string& id, uint64_t sequence) const;
  // Whether a disk record of (ns, key) found by the tier (without its number) is ended by a
  // fence: looked up again with its number only when the key has one. mu_ not held.
  bool FencedOnDisk(std::string_view ns, std::string_view key, uint64_t now);
  // Whether any key has a fence now (a pass over many keys checks each only then).
  bool AnyFence() const;
  uint64_t pending_bytes_ = 0;
  uint64_t pending_tombstones_ = 0;
  bool stopping_ = false;
  WriteBehindDiskStats stats_;
  std::atomic<uint64_t> index_bytes_{0};
  std::thread writer_;

  static constexpr int kReaders = 8;
  std::mutex read_mu_;
  std::condition_variable read_wake_;        // a job was queued, or the offload is stopping
  std::condition_variable read_done_;        // a job's last name was read, or a reader left it
  std::deque<ReadJob*> read_jobs_;           // jobs with names left to read
  std::deque<std::function<void()>> tasks_;  // RunOnReader's, not started
  int tasks_running_ = 0;
  bool tasks_stopped_ = false;
  bool readers_stopping_ = false;
  std::vector<std::thread> readers_;
};

}  // namespace kvport::store
