// SPDX-License-Identifier: Apache-2.0
// The disk tier's record: one object as it lies in a segment file (docs/store.md, "Disk
// records"). Pure: encodes into and parses from memory; segment.h does the file I/O.
//
// A record starts on a kDiskBlock boundary and fills whole blocks (O_DIRECT writes whole aligned
// blocks). Little-endian:
//
//   fixed part, kFixedBytes:
//     u32 magic "KVDR"      u16 format (2)        u16 flags (0; 1: a tombstone; 2: killed)
//     u64 sequence          u64 record_bytes      (the whole record, a multiple of kDiskBlock)
//     u64 expiry_ms         (unix ms; 0 never)    u64 value_bytes
//     u32 meta_bytes        u32 key_bytes         u16 ns_bytes        6 bytes reserved (0)
//     u64 value_checksum    (xxh3-64 of the value)
//     u64 names_checksum    (xxh3-64 of namespace, key and meta, in that order)
//     u64 fixed_checksum    (xxh3-64 of the fixed part's first kFixedBytes - 8 bytes)
//   namespace, key, meta, zeros to the next block boundary; the value, zeros to the end of its
//   last block. The value starts on a block, so that it can be read with O_DIRECT straight into
//   a block-aligned buffer (a node reads it into its arena: no copy); the cost is at most one
//   block per record, under 0.5% of a 1 MiB value. Format 1 (the value right after the names)
//   is not read: its records are dropped as corrupt.
//
// A killed record (flags 2) is a record deleted in place, where no tombstone could be appended
// (a full disk): only its fixed part was rewritten, its lengths kept so that a scan moves on by
// them, and from then on it counts as a tombstone of its key that ends its own sequence number s
// too: it parses as a tombstone of s + 1 (so that another copy of the record, left by a
// compaction, cannot outlive it).
//
// Three checksums, so that a restart can rebuild its index from headers alone and still never
// trust a corrupt byte: fixed_checksum makes record_bytes trustworthy (without it the scan stops:
// nothing after a torn or overwritten header is believed, so no bytes of a stored value can ever
// be read as a record header); names_checksum makes the key trustworthy (without it the record is
// dropped and the scan moves on by record_bytes); value_checksum is checked when the value is
// read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kvport/status.h"

namespace kvport::store {

inline constexpr uint64_t kDiskBlock = 4096;
inline constexpr size_t kFixedBytes = 80;
// Bounds a header's lengths must keep before its names are even read (a corrupt length must not
// make the scanner read or allocate much): the node's own key, namespace and meta caps are
// smaller.
inline constexpr uint32_t kMaxRecordKeyBytes = 64 << 10;
inline constexpr uint32_t kMaxRecordMetaBytes = 1 << 20;
inline constexpr uint16_t kMaxRecordNamespaceBytes = 255;

struct DiskRecord {
  uint64_t sequence = 0;
  uint64_t expiry_ms = 0;
  std::string_view ns;
  std::string_view key;
  std::string_view meta;
  std::string_view value;
  // A tombstone says `key` was deleted (at `sequence`): no meta, no value. Segments are
  // append-only, so a delete is a record too, or the key would come back at a restart.
  bool tombstone = false;
  // The value's xxh3-64 as its writer computed it (a client, at its put), written as the
  // record's value_checksum so that a read from disk checks the writer's bytes end to end;
  // 0: computed here.
  uint64_t value_checksum = 0;
};

// Where a record's value starts, from the record's start: after the fixed part and
// `names_bytes` of namespace, key and meta, rounded up to a block.
uint64_t DiskValueOffset(size_t names_bytes);

// The record's size on disk: header and names to a block, then the value to a block.
uint64_t DiskRecordBytes(size_t ns_bytes, size_t key_bytes, size_t meta_bytes,
                         uint64_t value_bytes);

// Writes `record` into out[0, DiskRecordBytes(...)), padding included. InvalidArgument when a
// length is over its bound or `out` is too small.
Status EncodeDiskRecord(const DiskRecord& record, std::span<char> out);

// A record's header as read back: everything but the value, whose bytes are checked on read.
struct DiskRecordHeader {
  bool tombstone = false;  // a tombstone, or a killed record (whose value is not to be read)
  uint64_t sequence = 0;
  uint64_t record_bytes = 0;
  uint64_t expiry_ms = 0;
  uint64_t value_bytes = 0;
  uint64_t value_checksum = 0;
  uint32_t names_bytes = 0;  // namespace + key + meta, after the fixed part
  std::string ns;
  std::string key;
  std::string meta;
  // Where the value starts, from the record's start (a block boundary).
  uint64_t value_offset() const { return DiskValueOffset(names_bytes); }
};

// What a block that should start a record holds.
enum class FixedPart {
  kValid,    // a record's fixed part: its record_bytes and lengths can be trusted
  kEmpty,    // all zeros: nothing was written here (the clean end of a segment)
  kCorrupt,  // anything else: a torn or overwritten header; nothing after it is trusted
};

// Checks the fixed part at fixed[0, kFixedBytes) against `room`, the bytes from the record's
// start to the segment's end; on kValid fills header's fixed fields.
FixedPart ParseFixedPart(std::span<const char> fixed, uint64_t room, DiskRecordHeader* header);

// Rewrites the valid fixed part at fixed[0, kFixedBytes) as killed (flags 2, checksum
// recomputed): the record then parses as a tombstone of its key at its sequence number + 1.
// Corruption when `fixed` is not a valid fixed part.
Status KillFixedPart(std::span<char> fixed);

// With the fixed part parsed, checks the names (namespace, key, meta: header->names_bytes bytes)
// against names_checksum and fills them in. Corruption when they do not match.
Status ParseNames(std::span<const char> fixed, std::span<const char> names,
                  DiskRecordHeader* header);

// Corruption unless `value` (header.value_bytes bytes) matches its checksum.
Status CheckValue(const DiskRecordHeader& header, std::span<const char> value);

}  // namespace kvport::store
