// SPDX-License-Identifier: Apache-2.0
// The disk tier's index checkpoint: the index as a clean stop left it, in one file of the folder
// (CHECKPOINT), so that the next start loads it instead of reading every record's header
// (docs/store.md, "The folder"). It says which segments it describes (number, written end, file
// size), so that it is used only over those very files, and carries the superblock's stamp of
// the stop that wrote it, so that it is used only after that stop.
//
// Layout, little-endian:
//     header, 64 bytes:
//       u8[8] magic "KVPCHKPT"   u32 format version   u32 stamp (the superblock's, non-zero)
//       u64 segment bytes        u64 last sequence    u64 next segment number
//       u64 segment count        u64 entry count      u64 zero
//     per segment, ascending numbers, 32 bytes:
//       u64 number   u64 end (bytes of records)   u64 file size   u64 tombstone bytes
//     per entry (a live record), 64 bytes and its names:
//       u64 segment number   u64 offset   u64 sequence   u64 expiry_ms   u64 value bytes
//       u64 value checksum   u32 meta bytes   u32 key bytes   u16 namespace bytes   u16 zero
//       u32 zero; then namespace, key, meta
//     u64 xxh3-64 of every byte before it
//
// Nothing in it is trusted before it checks out: every count and length is bounded by the bytes
// left in the file and by the record format's own bounds before anything is allocated for it,
// every entry must lie inside the written part of a listed segment on a block boundary, and the
// whole file must match its checksum and end right after it. (A checksum guards against damage,
// not against someone who can write the folder: they could forge a segment as well.)
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kvport/status.h"
#include "store/file_io.h"
#include "store/segment.h"

namespace kvport::store {

inline constexpr uint32_t kCheckpointVersion = 1;

struct CheckpointSegment {
  uint64_t number = 0;
  uint64_t end = 0;              // bytes of records (where the next one would go)
  uint64_t file_bytes = 0;       // the file's size when the checkpoint was written
  uint64_t tombstone_bytes = 0;  // record bytes of its tombstones (and killed records)
};

struct CheckpointEntry {
  uint64_t segment = 0;  // its number
  ScannedRecord record;  // its header as a scan would have found it (never a tombstone)
};

struct CheckpointHeader {
  uint32_t stamp = 0;  // non-zero: the superblock of the stop that wrote it holds the same
  uint64_t segment_bytes = 0;
  uint64_t last_sequence = 0;
  uint64_t next_segment = 0;
  uint64_t segment_count = 0;
  uint64_t entry_count = 0;
};

struct IndexCheckpoint {
  CheckpointHeader header;
  std::vector<CheckpointSegment> segments;  // ascending numbers
  std::vector<CheckpointEntry> entries;
};

// Writes a checkpoint into `file` (empty, new) front to back, in blocks of a buffer, hashing as
// it goes: the header, then exactly header.segment_count segments, then exactly
// header.entry_count entries, then Finish. Not thread-safe.
class CheckpointWriter {
 public:
  explicit CheckpointWriter(File* file);
  Status Begin(const CheckpointHeader& header);
  Status AddSegment(const CheckpointSegment& segment);
  // InvalidArgument for a tombstone or names over the record format's bounds.
  Status AddEntry(uint64_t segment, const ScannedRecord& record);
  // The checksum written and the buffer flushed; InvalidArgument when the counts were not kept.
  Status Finish();

 private:
  void Append(const void* data, size_t bytes);
  Status Flush();

  File* const file_;
  CheckpointHeader header_;
  uint64_t segments_ = 0;
  uint64_t entries_ = 0;
  uint64_t offset_ = 0;  // of the buffer's first byte in the file
  FileAlignedBytes buffer_;
  struct FreeHash {
    void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
  };
  std::unique_ptr<XXH3_state_t, FreeHash> hash_;
  Status failed_ = Status::Ok();  // the first failed write: every later call returns it
};

// The checkpoint in `file`, checked through (above). Corruption saying what does not check out
// (a file cut short, a failing checksum, a count or length the file cannot hold, an entry
// outside its segment); NotSupported for a newer format version; the file's errors as they are.
Result<IndexCheckpoint> ReadCheckpoint(File& file);

}  // namespace kvport::store
