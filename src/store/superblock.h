// SPDX-License-Identifier: Apache-2.0
// The disk tier's superblock: a small file (SUPERBLOCK) in its folder that says how the folder's
// segments were written, so that a restart reads them as they are whatever the options say now,
// and whether the last stop was clean (docs/store.md, "The folder").
//
// Layout, little-endian, kSuperblockBytes in all:
//     u8[8] magic "KVPSUPER"   u32 format version   u32 block bytes (kDiskBlock)
//     u64 segment bytes        u32 flags (bit 0: the tier stopped cleanly)
//     u32 checkpoint stamp (0: none; zero in folders written before the index checkpoint, and
//         ignored by the builds before it, which write it as zero: a checkpoint they left
//         behind is never believed)
//     u64 xxh3 of the 32 bytes before it
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvport/status.h"

namespace kvport::store {

inline constexpr uint32_t kSuperblockVersion = 1;
inline constexpr size_t kSuperblockBytes = 40;

struct Superblock {
  uint32_t format_version = kSuperblockVersion;
  uint32_t block_bytes = 0;    // kDiskBlock when written by this build
  uint64_t segment_bytes = 0;  // every segment's size, a multiple of block_bytes
  bool clean = false;          // the tier stopped cleanly (cleared while it runs)
  // Non-zero: that clean stop wrote an index checkpoint (index_checkpoint.h) carrying this
  // stamp, which the next start may load instead of scanning the segments. Cleared with `clean`.
  uint32_t checkpoint_stamp = 0;
};

// Its bytes (kSuperblockBytes).
std::string EncodeSuperblock(const Superblock& superblock);

// The superblock in `bytes`, checked. Corruption saying what was found when it is not one this
// build wrote (too short, another file's magic, a checksum that fails, a segment size off the
// block); NotSupported for a newer format version or another block size, which a newer build
// may have written.
Result<Superblock> DecodeSuperblock(std::string_view bytes);

}  // namespace kvport::store
