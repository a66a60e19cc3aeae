// SPDX-License-Identifier: Apache-2.0
// DiskTier: objects on local disk, in append-only segment files (segment.h) of one folder, with
// the index of what is there in memory (docs/store.md, "The disk tier").
//
// Records are appended to the newest segment; when it is full the next one is started. The tier
// is a cache: when a record would take the segments past the capacity, the oldest segments go
// first, with every record in them (eviction by whole segments, oldest first: space comes back
// without rewriting anything, and what goes is what was written longest ago).
//
// Every record carries the sequence number of the version it holds, given by the caller (the
// memory store's: store::ReadHandle::sequence), so a disk copy is "this version of the key",
// never just "the key". Of a key's records the highest sequence is the one the index follows, in
// whatever order they were written; a tombstone of sequence s ends every record of its key
// below s and none at s or above (an overwrite's tombstone carries the new version's number, a
// delete's a number of its own). When no tombstone can be appended (a full disk), the record it
// would have ended is killed in place (KillRecord): a deleted or replaced version never comes
// back at a restart.
//
// A clean stop (the destructor) writes the index to a checkpoint file (index_checkpoint.h),
// which the next Open loads instead of scanning when the superblock says that stop was clean and
// names that checkpoint, and it describes exactly the segments there (numbers, sizes); Open
// removes it and clears the superblock's clean flag before the folder changes again, so that
// after a crash it is never believed. Otherwise (a crash, a power loss, a checkpoint that is
// missing, damaged or does not match), Open
// rebuilds the index from the segments' headers alone (ScanSegment), in sequence order
// (at one sequence, a tombstone before the record it does not end): the highest sequence of a
// key wins, a tombstone removes what is below it, an expired record is skipped; a
// torn tail is cut off (the newest segment's next record goes there), a record whose names do
// not check out is dropped and counted. A value is read only by Get and checked against its
// checksum there: a mismatch (a torn write, a flipped bit, a file cut short under the node) is a
// miss, the entry dropped and counted, never wrong bytes.
//
// Compaction (CompactStep) moves the few live records of a mostly-dead segment forward, to the
// newest segment, and removes it: space that overwrites and deletes left dead comes back before
// eviction would reach that segment, and its live objects are not evicted with it.
//
// Thread-safe, under three mutexes. The index's (mu_) is never held across I/O while the tier
// serves: a segment's creation, reservation and unlink, and every write and sync, run without
// it, so a reader of the index never waits for the disk. Most holders look up or change one
// entry; two walk more: KeysOf (the whole index: an operator's call) and the start of a
// compaction (the records of one segment). Open and the destructor hold it across their I/O,
// with no caller there yet or left (Open's cut of a torn tail, the destructor's syncs and its
// checkpoint). Appends (puts, tombstones, compaction's copies) go one at a time under another
// mutex, which they hold across their write (and a tombstone across its sync); compaction steps
// one at a time under the third. A Get reads its value outside all three, through the segment's
// file, which stays open (and its bytes readable) while any reader holds it, even after its
// segment was evicted or compacted; compaction reads outside the first two.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/thread_annotations.h"
#include "kvport/status.h"
#include "store/file_io.h"
#include "store/object_id.h"
#include "store/segment.h"

namespace kvport::store {

struct DiskTierOptions {
  // The most bytes the segments may take together; at least two segments.
  uint64_t capacity_bytes = uint64_t{1} << 30;
  // Bytes per segment file (a multiple of kDiskBlock).
  uint64_t segment_bytes = uint64_t{256} << 20;
};

struct DiskTierStats {
  uint64_t objects = 0;          // live records in the index
  uint64_t object_bytes = 0;     // their records' bytes on disk
  uint64_t segments = 0;         // segment files
  uint64_t disk_bytes = 0;       // the segments' written bytes, live or not
  uint64_t restored = 0;         // objects the last Open found
  uint64_t dropped_records = 0;  // records dropped: names or value failing their checksum
  uint64_t torn_tails = 0;       // segments whose scan stopped at a torn tail (a crash)
  // Segments whose scan stopped at a damaged record with records after it (SegmentScan::
  // damaged): those are lost, and the segment is never written again (kept for a look until
  // compaction or eviction takes it).
  uint64_t damaged_segments = 0;
  uint64_t evicted_segments = 0;    // segments removed to make room
  uint64_t evicted_objects = 0;     // live objects they took with them
  uint64_t write_errors = 0;        // appends that failed (the put failed)
  uint64_t read_errors = 0;         // value reads that failed (the get missed)
  uint64_t killed_records = 0;      // records deleted in place (no tombstone could be appended)
  uint64_t compacted_segments = 0;  // segments removed by compaction, their live records moved
  uint64_t compacted_bytes = 0;     // records' bytes compaction copied forward
  uint64_t quarantined = 0;         // segments the last Open could not open or scan: moved aside
  // Whether the tier was stopped cleanly before the last Open (its destructor ran: every
  // segment synced), as the superblock said; true for a new folder, false for a folder without
  // a superblock (an earlier version's) or after a crash or power loss.
  bool clean_start = false;
  // Whether the last Open loaded the index from the checkpoint of the clean stop before it
  // instead of scanning the segments (then dropped_records, torn_tails and damaged_segments are
  // 0: nothing was scanned).
  bool restored_from_checkpoint = false;
  // An estimate of the heap the in-memory index takes: per object its hash node (the id, the
  // entry and the node's link and cached hash) with the id's and the header's namespace, key
  // and meta strings when too long for the string's inline buffer, each heap block sized as
  // glibc's malloc does (8 bytes of header, 16-byte granules, 32 at least); the hash buckets;
  // per segment its list of the ids written there (dead ones too, until the segment goes); and
  // the list of records a compaction under way still has to move. Not counted: the allocator's
  // free space and fragmentation.
  uint64_t index_bytes = 0;
};

// What one DiskTier::CompactStep did.
struct CompactionProgress {
  uint64_t moved_bytes = 0;       // records' bytes copied forward (live records, tombstones)
  bool finished_segment = false;  // a segment's compaction ended: its file was removed
  // Calling again now would make progress: a compaction is under way with records left, or
  // another segment is worth compacting. False when there is nothing to do, or when the next
  // record would need a new segment that only eviction could make room for (a later put
  // starts that segment; compaction never evicts).
  bool more = false;
};

// What Get found: the value, its meta and when it expires (unix ms; 0 never).
struct DiskObject {
  std::string meta;
  std::vector<char> value;
  uint64_t expiry_ms = 0;
  uint64_t sequence = 0;        // its record's: which version this is (Holds)
  uint64_t value_checksum = 0;  // the value's xxh3-64, as written (and checked) on disk
};

// One object for DiskTier::PutMany (Put's arguments).
struct DiskPut {
  std::string_view ns;
  std::string_view key;
  std::string_view meta;
  std::span<const char> value;
  uint64_t expiry_ms = 0;  // unix ms; 0 never
  uint64_t sequence = 0;   // the version's (at least 1)
  uint64_t checksum = 0;   // the value's xxh3-64 as its writer gave it; 0: computed here
};

// One key for DiskTier::EraseMany (Erase's arguments).
struct DiskErase {
  std::string_view ns;
  std::string_view key;
  uint64_t sequence = 0;  // versions below it end
};

// What the index knows of an object, without reading it (DiskTier::Find).
struct DiskEntry {
  std::string meta;
  uint64_t expiry_ms = 0;  // unix ms; 0 never
  uint64_t value_bytes = 0;
  uint64_t sequence = 0;        // which version: ReadValue reads this one or none
  uint64_t value_checksum = 0;  // what ReadValue checks the value against
};

class DiskTier {
 public:
  // Opens the tier over `folder`, rebuilding its index from the segments there (none: empty).
  // `now_ms` (unix ms) decides which records have expired.
  //
  // The folder's superblock (superblock.h) says the size its segments were written with: when
  // there are segments, that size is used whatever options.segment_bytes says (reading them at
  // another size would cut them short); an empty folder takes the options'. A folder with
  // segments and no superblock (an earlier version's) is adopted at the options' size. After a
  // clean stop that wrote an index checkpoint matching the segments there, the index is loaded
  // from it (no scan); a checkpoint that cannot be used (damaged, cut short, another stop's, not
  // matching the segments) is logged in one line and the segments scanned. The checkpoint is then
  // removed and the superblock written with the clean flag cleared (both durable), before
  // anything in the folder changes; the destructor sets the flag again.
  // A segment that cannot be opened or scanned (EIO, not a regular file) is quarantined
  // (SegmentFolder::Quarantine), counted and logged, and the tier opens with the rest.
  //
  // InvalidArgument for options that do not hold together (capacity below two segments, of
  // the size in use; a segment size off the block); a superblock that is not one this build
  // can read (bad magic, failing checksum, newer format) refuses the open, touching nothing,
  // with what was found; the folder's errors as they are.
  static Result<std::unique_ptr<DiskTier>> Open(std::unique_ptr<SegmentFolder> folder,
                                                const DiskTierOptions& options, uint64_t now_ms);
  // A clean stop: every segment synced, then the index checkpoint written (a temporary file,
  // synced, renamed, the folder synced), then the superblock's clean flag set with the
  // checkpoint's stamp. A checkpoint that cannot be written is logged, and the stop is marked
  // clean without one (the next start scans).
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // Stores version `sequence` (at least 1) of (`ns`, `key`): `value` with `meta`, expiring at
  // `expiry_ms` (0 never). It replaces a lower sequence of the key; a record of a sequence below
  // the key's is written but never read (it is dead from the start). NoSpace when the record
  // cannot fit in a segment or the capacity even with every older segment gone, or the disk is
  // full; IoError when the write fails. On failure the key keeps its previous value (if any) and
  // nothing half-written is ever read. `checksum`: the value's xxh3-64 as its writer computed
  // it, kept as the record's (0: the tier computes it); a value that does not match it is a
  // miss when read.
  Status Put(std::string_view ns, std::string_view key, std::string_view meta,
             std::span<const char> value, uint64_t expiry_ms, uint64_t sequence,
             uint64_t checksum = 0);
  // Put of each, in order, with as few writes as the segments allow: the records that fit in
  // the newest segment go in one write (a disk takes one large write far faster than many
  // small ones in a row). Each one's status, as Put's; a failed write fails the records it
  // carried, and only those.
  std::vector<Status> PutMany(std::span<const DiskPut> puts);

  // The object under (`ns`, `key`), read and checked. NotFound when there is none, it has
  // expired at `now_ms`, or its bytes on disk failed their check or could not be read (then
  // the entry is dropped and counted: a miss, never wrong bytes).
  Result<DiskObject> Get(std::string_view ns, std::string_view key, uint64_t now_ms);

  // The index's entry for (`ns`, `key`), without reading anything: NotFound when absent or
  // expired at `now_ms`.
  Result<DiskEntry> Find(std::string_view ns, std::string_view key, uint64_t now_ms) const;

  // Reads the value of version `sequence` of (`ns`, `key`) (DiskEntry::sequence) into
  // out[0, value_bytes), checked against its checksum. `out` holds at least value_bytes; when it
  // also has room for the rest of the value's last block, the read covers whole blocks, and a
  // block-aligned `out` is read into straight from the disk (O_DIRECT, no copy: a node's arena
  // reservation is both). NotFound when that version is no longer here, or its bytes failed
  // their check or could not be read (then it is dropped and counted: a miss, never wrong
  // bytes).
  Status ReadValue(std::string_view ns, std::string_view key, uint64_t sequence,
                   std::span<char> out);

  // Whether (`ns`, `key`) is here and not expired at `now_ms`, without reading its value; its
  // value's length into *value_bytes and its meta's into *meta_bytes when it is (each when not
  // null).
  bool Contains(std::string_view ns, std::string_view key, uint64_t now_ms,
                uint64_t* value_bytes = nullptr, uint64_t* meta_bytes = nullptr) const;

  // Whether the index still points (`ns`, `key`) at the record of `sequence`: no put, erase or
  // drop of the key since Get read it.
  bool Holds(std::string_view ns, std::string_view key, uint64_t sequence) const;

  // The namespaces holding `key` (not expired at `now_ms`), ascending: the default namespace ""
  // first. What the node's any-namespace reads, probes and deletes search.
  std::vector<std::string> NamespacesOf(std::string_view key, uint64_t now_ms) const;

  // The keys of namespace `ns` here, in no order (a pass over the index: an operator's call).
  std::vector<std::string> KeysOf(std::string_view ns) const;

  // Ends every version of (`ns`, `key`) below `sequence` (a delete's own sequence number, or the
  // version's that replaced them): a tombstone of `sequence` on disk. OK, writing nothing, when
  // the index holds no version of the key below it. When the tombstone cannot be appended, the
  // record it would end is killed in place instead; only when that fails too is the answer an
  // error (IoError, NoSpace), saying that the key is gone until a restart, which may bring it
  // back.
  Status Erase(std::string_view ns, std::string_view key, uint64_t sequence);
  // Erase of each, with one sync for all the tombstones appended to a segment (a group commit:
  // a batch of changes pays for one flush of the disk's cache, not one each). Erase's status
  // for each.
  std::vector<Status> EraseMany(std::span<const DiskErase> erases);

  // The highest sequence number of any record the tier has held (restored or written since):
  // what the memory store's numbers must start above.
  uint64_t last_sequence() const;

  // One bounded step of compaction. When none is under way, picks the sealed segment (never
  // the one being written) whose needed bytes (its live records', and its tombstones' while an
  // older segment exists) are the lowest fraction of its written bytes, below
  // kCompactBelowFraction, and lists its live records and tombstones (a scan of its headers).
  // Then copies them, in file order, to the newest segment: each verbatim, with its original
  // sequence number, after reading it whole and checking its checksums, until `max_bytes` have
  // been copied (a record is not split: a step copies at least one and may go one record past
  // it). A segment's compaction may take many steps; puts, gets and deletes run between and
  // during them, and win: a record is re-indexed only when the index still points at its old
  // place with its sequence number. When every record has been copied, the copies are synced
  // and the old segment removed.
  //
  // What is not copied: a record overwritten, deleted, evicted or expired (at `now_ms`) since;
  // a record that fails its checksums or cannot be read (dropped from the index as a get drops
  // it, counted in dropped_records or read_errors, never propagated); a tombstone when no older
  // segment exists and the removals of the older ones are durable (the folder synced since: no
  // older record of its key can be left, nor come back after a power loss, for it to hide;
  // otherwise it is carried forward). A copy never evicts: when the next record fits neither in the
  // newest segment nor in a new one below the capacity, the step stops (more: false) and a later
  // one goes on from there. A crash mid-compaction leaves two identical copies of a record (same
  // sequence number), either of which is right.
  //
  // Errors: a failed scan, write (IoError, NoSpace; counted in write_errors) or sync ends the
  // step; nothing is lost (what was not copied is still read from the old segment) and
  // the next step retries where this one stopped. Compaction steps are serialized (one at a
  // time); meant for the writer thread when it has nothing else to write, rate-limited by it.
  Result<CompactionProgress> CompactStep(uint64_t max_bytes, uint64_t now_ms)
      EXCLUDES(mu_, compact_mu_);

  // Below this fraction of its written bytes still needed, a sealed segment is compacted.
  // Compacting a segment whose needed fraction is f writes f of a segment to free a whole one:
  // at one half, every byte written frees at least one; above, the write amplification f/(1-f)
  // climbs fast, and the disk's bandwidth is better spent on evicted objects and reads. It also
  // keeps compaction from churning: what it packs is above the threshold.
  static constexpr double kCompactBelowFraction = 0.5;

  DiskTierStats stats() const;

 private:
  struct Segment;  // one file: its number, its writer's end, its live keys
  struct Entry {   // where a live object's record is
    std::shared_ptr<Segment> segment;
    ScannedRecord record;
  };

  // A compaction under way: its segment and what is left to copy from it.
  struct CompactionItem {
    std::string id;  // ObjectId: the record's names may fail their check on the read back
    uint64_t offset = 0;
    uint64_t record_bytes = 0;
    uint64_t sequence = 0;
    bool tombstone = false;
  };
  struct Compaction {
    std::shared_ptr<Segment> segment;  // null: none under way
    std::vector<CompactionItem> items;
    size_t next = 0;                                // items[next] is the next to copy
    std::vector<std::shared_ptr<Segment>> targets;  // segments copies went to, synced at the end
  };
  enum class Copied { kMoved, kSkipped, kNoRoom, kSegmentGone };

  static constexpr size_t kRestoreThreads = 8;  // segments Restore scans at once

  DiskTier(std::unique_ptr<SegmentFolder> folder, const DiskTierOptions& options);
  // Builds the index: from the checkpoint carrying `checkpoint_stamp` (0: none to look for) when
  // it matches the segments, otherwise by scanning them. Writes nothing but the renames of
  // segments it quarantines.
  Status Restore(uint64_t now_ms, uint32_t checkpoint_stamp) EXCLUDES(mu_);
  // Restore from the checkpoint over the `opened` segments: false, with one log line and nothing
  // indexed, when it cannot be used.
  bool LoadCheckpoint(const std::vector<std::shared_ptr<Segment>>& opened, uint32_t stamp,
                      uint64_t now_ms) EXCLUDES(mu_);
  // Undoes what LoadCheckpoint indexed before it found it could not be used.
  void ClearIndex() REQUIRES(mu_);
  // After Restore and the superblock's clean flag cleared: the segments over a lowered capacity
  // evicted, the newest one's torn tail cut off, its writer made.
  Status PrepareAppends() EXCLUDES(mu_);
  // The index into a new checkpoint of `stamp`, published and durable when OK.
  Status WriteCheckpoint(uint32_t stamp) EXCLUDES(mu_);
  // The heap one index entry takes (DiskTierStats::index_bytes): its hash node and the blocks
  // of its strings that do not fit in the strings themselves.
  static uint64_t EntryHeap(const std::string& id, const DiskRecordHeader& h);
  // Points the index at `record` in `segment` for `id`, replacing what it pointed at.
  void Index(std::string id, std::shared_ptr<Segment> segment, ScannedRecord record) REQUIRES(mu_);
  // Appends `records` (which fit in one segment) to the newest segment, one after another in
  // one write, starting another segment (and evicting the oldest ones) when they do not fit;
  // the segment, and the offset of the first. Releases mu_ while it writes (append_mu_
  // serializes the appenders: Put, Erase, compaction's copies), so that the index's readers
  // never wait for the disk.
  Result<std::pair<std::shared_ptr<Segment>, uint64_t>> Append(std::span<const DiskRecord> records)
      REQUIRES(append_mu_, mu_);
  // Starts the next segment: evicts the oldest ones while the tier is at its capacity, creates
  // the file, reserves its segment_bytes (File::Allocate; when the disk is full, the tier's own
  // oldest segments are evicted one at a time until the reservation succeeds or none is left:
  // NoSpace then) and syncs the folder, so that the segment and the evictions are durable
  // before anything is written to it. Releases mu_ during the file's I/O (append_mu_ keeps the
  // other appenders out). On failure no new segment is left behind.
  Status StartSegment() REQUIRES(append_mu_, mu_);
  void EvictOldest() REQUIRES(mu_);
  // Removes `segment` from the tier, with the index entries that still point into it; how many
  // those were. Its file is unlinked later, by UnlinkRemoved without mu_ (an unlink waits for
  // the filesystem, and the index's readers must not); the removal is durable only after a
  // SyncDir that follows the unlink (removals_ against synced_removals_).
  uint64_t RemoveSegment(const std::shared_ptr<Segment>& segment) REQUIRES(mu_);
  // Unlinks the files of the segments removed so far (unlinked_ counts them).
  void UnlinkRemoved() EXCLUDES(mu_);
  // Makes the removals so far durable: their files unlinked, then a SyncDir when one is due.
  Status SyncRemovals() EXCLUDES(mu_);
  // Moves segment `number` aside at Open (SegmentFolder::Quarantine), logging why.
  void QuarantineSegment(uint64_t number, const Status& why);
  Status WriteSuperblock(bool clean, uint32_t checkpoint_stamp = 0);
  void Forget(const std::string& id) REQUIRES(mu_);
  // Forget of `id`, whose record `entry` failed its read (`why`), to be killed in place
  // (KillDropped) so that no restart reads it again (a transient EIO would otherwise bring back
  // a version that a newer one, written while the index had none of the key, should have
  // ended). Best effort.
  void Drop(const std::string& id, Entry entry, const Status& why) REQUIRES(mu_);
  // Kills the records Drop dropped, without mu_.
  void KillDropped() EXCLUDES(mu_);
  // Whether `segment` is still one of the tier's (not evicted meanwhile).
  bool Holds(const std::shared_ptr<Segment>& segment) const REQUIRES(mu_);
  // Whether a record of `bytes` can be appended without evicting a segment.
  bool RoomWithoutEviction(uint64_t bytes) const REQUIRES(mu_);
  // The segment most worth compacting (CompactStep); null when none is below the threshold.
  std::shared_ptr<Segment> PickCompaction() const REQUIRES(mu_);
  Status StartCompaction(uint64_t now_ms) REQUIRES(compact_mu_) EXCLUDES(mu_);
  Result<Copied> CopyForward(const CompactionItem& item, uint64_t now_ms, std::vector<char>& buffer)
      REQUIRES(compact_mu_) EXCLUDES(append_mu_, mu_);
  void EndCompaction() REQUIRES(compact_mu_) EXCLUDES(mu_);

  const std::unique_ptr<SegmentFolder> folder_;
  const DiskTierOptions options_;
  Mutex compact_mu_ ACQUIRED_BEFORE(append_mu_);  // serializes compaction steps
  Mutex append_mu_ ACQUIRED_BEFORE(mu_);          // serializes appends (held across their I/O)
  Compaction compaction_ GUARDED_BY(compact_mu_);
  mutable Mutex mu_;
  std::map<uint64_t, std::shared_ptr<Segment>> segments_ GUARDED_BY(mu_);  // by number
  std::unordered_map<std::string, Entry> index_ GUARDED_BY(mu_);           // by ObjectId
  // Each key's namespaces in index_, ascending (NamespacesOf).
  std::unordered_map<std::string, std::vector<std::string>> namespaces_of_ GUARDED_BY(mu_);
  uint64_t last_sequence_ GUARDED_BY(mu_) = 0;
  uint64_t disk_bytes_ GUARDED_BY(mu_) = 0;
  DiskTierStats stats_ GUARDED_BY(mu_);
  // The next segment's number: above every name the folder listed at Open (quarantined ones
  // too), so that no name is ever reused.
  uint64_t next_segment_ GUARDED_BY(mu_) = 1;
  // Segments removed from the tier, and how many of those removals a SyncDir has made
  // durable: a tombstone is dropped only when they are equal (a removed segment that could come
  // back after a power loss may hold what it hides).
  uint64_t removals_ GUARDED_BY(mu_) = 0;
  uint64_t synced_removals_ GUARDED_BY(mu_) = 0;
  // Removed segments whose files are still to be unlinked (UnlinkRemoved), and how many have
  // been: a SyncDir makes durable only the removals unlinked before it.
  std::vector<uint64_t> to_unlink_ GUARDED_BY(mu_);
  std::vector<Entry> to_kill_ GUARDED_BY(mu_);  // dropped records to kill (KillDropped)
  uint64_t unlinked_ GUARDED_BY(mu_) = 0;
  bool superblock_written_ = false;  // by Open: the destructor then marks the stop clean
  uint32_t last_stamp_ = 0;          // the superblock's checkpoint stamp at Open (the next: +1)
  uint64_t entries_heap_bytes_ GUARDED_BY(mu_) = 0;     // index_bytes' part for the entries
  uint64_t compaction_heap_bytes_ GUARDED_BY(mu_) = 0;  // and for compaction_.items
};

}  // namespace kvport::store
