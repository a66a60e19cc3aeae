// SPDX-License-Identifier: Apache-2.0
// A segment: one append-only file of disk records (disk_record.h), block-aligned, written at its
// end and scanned from its start (docs/store.md, "Disk records").
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kvport/status.h"
#include "store/disk_record.h"
#include "store/file_io.h"

namespace kvport::store {

// Appends records to one segment of at most `segment_bytes` bytes, from `end` on (a fresh
// segment: 0; a reopened one: its scan's end). Not thread-safe.
class SegmentWriter {
 public:
  SegmentWriter(File* file, uint64_t segment_bytes, uint64_t end)
      : file_(file), segment_bytes_(segment_bytes), end_(end) {}

  // Writes `record` at the segment's end and returns its offset. NoSpace when the segment has no
  // room for it (the caller starts another); a failed write (NoSpace for a full disk, IoError)
  // leaves the end where it was, so the next record overwrites whatever part of it was written,
  // and a scan never trusts such a part (its checksums fail).
  Result<uint64_t> Append(const DiskRecord& record);
  // Append of `records` one after another, in one write; the offset of the first. NoSpace (and
  // nothing written) when they do not all fit; a failed write as for Append, none of them
  // counted as written.
  Result<uint64_t> AppendAll(std::span<const DiskRecord> records);

  uint64_t end() const { return end_; }

 private:
  File* const file_;
  const uint64_t segment_bytes_;
  uint64_t end_;
  FileAlignedBytes buffer_;  // the record being written, kept for the next one; block-aligned, so
                             // that an O_DIRECT file writes it without a bounce
};

struct ScannedRecord {
  uint64_t offset = 0;  // of the record's start in the segment
  DiskRecordHeader header;
};

struct SegmentScan {
  std::vector<ScannedRecord> records;  // in file order, every one with trustworthy names
  uint64_t end = 0;                    // where the next record goes: after the last trusted record
  uint64_t dropped = 0;                // records whose names did not match their checksum (skipped)
  // The scan stopped at a corrupt fixed part (nothing after it is believed), which is one of:
  bool torn = false;     // a torn tail: no valid fixed part follows it (a crash mid-write)
  bool damaged = false;  // a damaged record: a valid fixed part follows it (a flipped bit, an
                         // overwritten block), so records after it are lost, not unwritten
};

// Reads every record's header of a segment of at most `segment_bytes` bytes, from its start:
// stops at the file's end, at zeros (where nothing was written) or at a corrupt fixed part
// (torn or damaged: nothing after it is believed, whatever it looks like, since a stored value
// may hold the image of a record). Values are not read; past a corrupt fixed part the rest of the
// segment is read once, to tell torn from damaged. IoError when the file cannot be read.
Result<SegmentScan> ScanSegment(File& file, uint64_t segment_bytes);

// Deletes the scanned record at `offset` in place (KillFixedPart): its first block read,
// rewritten and synced. What a tier does when it cannot append a tombstone (a full disk takes
// no new block, but an allocated one can be rewritten). Corruption when no valid record starts
// there; the file's errors as they are.
Status KillRecord(File& file, uint64_t offset);

// Reads a scanned record's value into out[0, header.value_bytes), checked against its checksum:
// Corruption, never wrong bytes, when it does not match (a torn write, a flipped bit, a file
// truncated under the node). `out` may be longer: with room for the value's last whole block
// the read covers whole blocks (straight into an aligned `out` with O_DIRECT), the padding's
// zeros landing after the value.
Status ReadRecordValue(File& file, const ScannedRecord& record, std::span<char> out);

}  // namespace kvport::store
