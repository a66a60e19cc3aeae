// SPDX-License-Identifier: Apache-2.0
// DiskTier: objects on local disk, in append-only segment files (segment.h) of one folder, with
// the index of what is there in memory (docs/store.md, "The disk tier").
//
// Records are appended to the newest segment; when it is full the next one is started. The tier
// is a cache: when a record would take the segments past the capacity, the oldest segments go
// first, with every record in them (eviction by whole segments, oldest first: space comes back
// without rewriting anything, and what goes is what was written longest ago). A put of a key
// already there appends a new record (a higher sequence number) and the index follows it; a
// delete appends a tombstone, so that neither the old value nor the deleted one comes back at a
// restart.
//
// Open rebuilds the index from the segments' headers alone (ScanSegment), in sequence order:
// the highest sequence of a key wins, a tombstone removes it, an expired record is skipped; a
// torn tail is cut off (the newest segment's next record goes there), a record whose names do
// not check out is dropped and counted. A value is read only by Get and checked against its
// checksum there: a mismatch (a torn write, a flipped bit, a file cut short under the node) is a
// miss, the entry dropped and counted, never wrong bytes.
//
// Thread-safe: the index and the appends under one mutex; a Get reads its value outside it,
// through the segment's file, which stays open (and its bytes readable) while any reader holds
// it, even after its segment was evicted.
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
#include "store/segment.h"

namespace kvport::store {

struct DiskTierOptions {
  // The most bytes the segments may take together; at least two segments.
  uint64_t capacity_bytes = uint64_t{1} << 30;
  // Bytes per segment file (a multiple of kDiskBlock).
  uint64_t segment_bytes = uint64_t{256} << 20;
};

struct DiskTierStats {
  uint64_t objects = 0;           // live records in the index
  uint64_t object_bytes = 0;      // their records' bytes on disk
  uint64_t segments = 0;          // segment files
  uint64_t disk_bytes = 0;        // the segments' written bytes, live or not
  uint64_t restored = 0;          // objects the last Open found
  uint64_t dropped_records = 0;   // records dropped: names or value failing their checksum
  uint64_t torn_tails = 0;        // segments whose scan stopped at a torn record
  uint64_t evicted_segments = 0;  // segments removed to make room
  uint64_t evicted_objects = 0;   // live objects they took with them
  uint64_t write_errors = 0;      // appends that failed (the put failed)
  uint64_t read_errors = 0;       // value reads that failed (the get missed)
};

// What Get found: the value, its meta and when it expires (unix ms; 0 never).
struct DiskObject {
  std::string meta;
  std::vector<char> value;
  uint64_t expiry_ms = 0;
};

// The index's key for (`ns`, `key`): a namespace holds no NUL (protocol.md), so the pair is
// unambiguous. DiskOffload keys its queue the same way.
std::string DiskObjectId(std::string_view ns, std::string_view key);

class DiskTier {
 public:
  // Opens the tier over `folder`, rebuilding its index from the segments there (none: empty).
  // `now_ms` (unix ms) decides which records have expired. InvalidArgument for options that do
  // not hold together (capacity below two segments, a segment size off the block); the
  // folder's errors as they are.
  static Result<std::unique_ptr<DiskTier>> Open(std::unique_ptr<SegmentFolder> folder,
                                                const DiskTierOptions& options, uint64_t now_ms);
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // Stores `value` under (`ns`, `key`) with `meta`, expiring at `expiry_ms` (0 never),
  // replacing what was there. NoSpace when the record cannot fit in a segment or the capacity
  // even with every older segment gone, or the disk is full; IoError when the write fails. On
  // failure the key keeps its previous value (if any) and nothing half-written is ever read.
  Status Put(std::string_view ns, std::string_view key, std::string_view meta,
             std::span<const char> value, uint64_t expiry_ms);

  // The object under (`ns`, `key`), read and checked. NotFound when there is none, it has
  // expired at `now_ms`, or its bytes on disk failed their check or could not be read (then
  // the entry is dropped and counted: a miss, never wrong bytes).
  Result<DiskObject> Get(std::string_view ns, std::string_view key, uint64_t now_ms);

  // Whether (`ns`, `key`) is here and not expired at `now_ms`, without reading its value; its
  // value's length into *value_bytes when it is and value_bytes is not null.
  bool Contains(std::string_view ns, std::string_view key, uint64_t now_ms,
                uint64_t* value_bytes = nullptr) const;

  // Removes (`ns`, `key`) (a tombstone on disk). OK when it was not there either; IoError or
  // NoSpace when the tombstone cannot be written (the key is then gone until a restart, which
  // may bring it back: the error says so).
  Status Erase(std::string_view ns, std::string_view key);

  DiskTierStats stats() const;

 private:
  struct Segment;  // one file: its number, its writer's end, its live keys
  struct Entry {   // where a live object's record is
    std::shared_ptr<Segment> segment;
    ScannedRecord record;
  };

  DiskTier(std::unique_ptr<SegmentFolder> folder, const DiskTierOptions& options);
  Status Restore(uint64_t now_ms) EXCLUDES(mu_);
  // Appends `record` to the newest segment, starting another (and evicting the oldest ones)
  // when it does not fit; the segment and offset it went to.
  Result<std::pair<std::shared_ptr<Segment>, uint64_t>> Append(const DiskRecord& record)
      REQUIRES(mu_);
  Status StartSegment() REQUIRES(mu_);
  void EvictOldest() REQUIRES(mu_);
  void Forget(const std::string& id) REQUIRES(mu_);

  const std::unique_ptr<SegmentFolder> folder_;
  const DiskTierOptions options_;
  mutable Mutex mu_;
  std::map<uint64_t, std::shared_ptr<Segment>> segments_ GUARDED_BY(mu_);  // by number
  std::unordered_map<std::string, Entry> index_ GUARDED_BY(mu_);           // by DiskObjectId
  uint64_t next_sequence_ GUARDED_BY(mu_) = 1;
  uint64_t disk_bytes_ GUARDED_BY(mu_) = 0;
  DiskTierStats stats_ GUARDED_BY(mu_);
};

}  // namespace kvport::store
