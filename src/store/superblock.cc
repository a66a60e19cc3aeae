// SPDX-License-Identifier: Apache-2.0
#include "store/superblock.h"

#include <fmt/core.h>
#include <xxhash.h>

#include <cstring>

#include "store/disk_record.h"

namespace kvport::store {
namespace {

constexpr char kMagic[8] = {'K', 'V', 'P', 'S', 'U', 'P', 'E', 'R'};
constexpr size_t kChecksummed = 32;  // the bytes before the checksum
constexpr uint32_t kCleanFlag = 1;

// The hosts kvport runs on are little-endian (as disk records assume).
template <typename T>
void Put(std::string& out, size_t at, T v) {
  std::memcpy(out.data() + at, &v, sizeof(v));
}
template <typename T>
T Get(std::string_view in, size_t at) {
  T v{};
  std::memcpy(&v, in.data() + at, sizeof(v));
  return v;
}

}  // namespace

std::string EncodeSuperblock(const Superblock& superblock) {
  std::string out(kSuperblockBytes, '\0');
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  Put<uint32_t>(out, 8, superblock.format_version);
  Put<uint32_t>(out, 12, superblock.block_bytes);
  Put<uint64_t>(out, 16, superblock.segment_bytes);
  Put<uint32_t>(out, 24, superblock.clean ? kCleanFlag : 0);
  Put<uint32_t>(out, 28, superblock.checkpoint_stamp);
  Put<uint64_t>(out, kChecksummed, XXH3_64bits(out.data(), kChecksummed));
  return out;
}

Result<Superblock> DecodeSuperblock(std::string_view bytes) {
  if (bytes.size() < 12) {
    return Status::Corruption(fmt::format("{} bytes, too short for a superblock", bytes.size()));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    std::string found;
    for (size_t i = 0; i < sizeof(kMagic); ++i)
      found += fmt::format("{:02x}", static_cast<unsigned char>(bytes[i]));
    return Status::Corruption("not a kvport superblock: it starts with bytes " + found +
                              ", not the magic \"KVPSUPER\"");
  }
  Superblock superblock;
  superblock.format_version = Get<uint32_t>(bytes, 8);
  if (superblock.format_version > kSuperblockVersion) {
    return Status::NotSupported(fmt::format(
        "superblock format version {}, newer than this build's {} (a newer kvport wrote it)",
        superblock.format_version, kSuperblockVersion));
  }
  if (superblock.format_version == 0 || bytes.size() != kSuperblockBytes) {
    return Status::Corruption(fmt::format("a superblock of version {} and {} bytes (expected {})",
                                          superblock.format_version, bytes.size(),
                                          kSuperblockBytes));
  }
  const uint64_t stored = Get<uint64_t>(bytes, kChecksummed);
  const uint64_t computed = XXH3_64bits(bytes.data(), kChecksummed);
  if (stored != computed) {
    return Status::Corruption(
        fmt::format("the superblock's checksum fails (stored {:016x}, its bytes give {:016x})",
                    stored, computed));
  }
  superblock.block_bytes = Get<uint32_t>(bytes, 12);
  superblock.segment_bytes = Get<uint64_t>(bytes, 16);
  superblock.clean = (Get<uint32_t>(bytes, 24) & kCleanFlag) != 0;
  superblock.checkpoint_stamp = Get<uint32_t>(bytes, 28);
  if (superblock.block_bytes != kDiskBlock) {
    return Status::NotSupported(fmt::format("the superblock's block size is {}, this build's {}",
                                            superblock.block_bytes, kDiskBlock));
  }
  if (superblock.segment_bytes == 0 || superblock.segment_bytes % kDiskBlock != 0) {
    return Status::Corruption(
        fmt::format("the superblock's segment size {} is not a positive multiple of {}",
                    superblock.segment_bytes, kDiskBlock));
  }
  return superblock;
}

}  // namespace kvport::store
