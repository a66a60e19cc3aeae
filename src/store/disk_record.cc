// SPDX-License-Identifier: Apache-2.0
#include "store/disk_record.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace kvport::store {
namespace {

constexpr uint32_t kMagic = 0x5244564b;  // "KVDR" little-endian
constexpr uint16_t kFormat = 2;          // 1: the value right after the names (not block-aligned)
constexpr uint16_t kTombstoneFlag = 1;
constexpr uint16_t kKilledFlag = 2;  // a record deleted in place (KillFixedPart)

// Field offsets in the fixed part.
constexpr size_t kMagicAt = 0, kFormatAt = 4, kFlagsAt = 6, kSequenceAt = 8, kRecordBytesAt = 16,
                 kExpiryAt = 24, kValueBytesAt = 32, kMetaBytesAt = 40, kKeyBytesAt = 44,
                 kNsBytesAt = 48, kReservedAt = 50, kValueChecksumAt = 56, kNamesChecksumAt = 64,
                 kFixedChecksumAt = 72;
static_assert(kReservedAt + 6 == kValueChecksumAt && kFixedChecksumAt + 8 == kFixedBytes);

template <typename T>
void Put(char* at, T v) {
  std::memcpy(at, &v, sizeof(v));  // the hosts kvport runs on are little-endian
}
template <typename T>
T Get(const char* at) {
  T v;
  std::memcpy(&v, at, sizeof(v));
  return v;
}

uint64_t Hash(std::span<const char> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

// Copies `from` to `to` and returns the byte after it; an empty view (whose data() may be null,
// which memcpy must not be given) copies nothing.
char* CopyTo(char* to, std::string_view from) {
  if (!from.empty()) std::memcpy(to, from.data(), from.size());
  return to + from.size();
}

uint64_t RoundUp(uint64_t n) {
  return (n + kDiskBlock - 1) / kDiskBlock * kDiskBlock;
}

}  // namespace

uint64_t DiskValueOffset(size_t names_bytes) {
  return RoundUp(kFixedBytes + names_bytes);
}

uint64_t DiskRecordBytes(size_t ns_bytes, size_t key_bytes, size_t meta_bytes,
                         uint64_t value_bytes) {
  return DiskValueOffset(ns_bytes + key_bytes + meta_bytes) + RoundUp(value_bytes);
}

Status EncodeDiskRecord(const DiskRecord& r, std::span<char> out) {
  if (r.ns.size() > kMaxRecordNamespaceBytes || r.key.size() > kMaxRecordKeyBytes ||
      r.meta.size() > kMaxRecordMetaBytes || r.key.empty()) {
    return Status::InvalidArgument(
        "disk record: an empty key, or a namespace, key or meta "
        "over its bound");
  }
  if (r.tombstone && (!r.meta.empty() || !r.value.empty())) {
    return Status::InvalidArgument("disk record: a tombstone with a meta or a value");
  }
  const uint64_t bytes = DiskRecordBytes(r.ns.size(), r.key.size(), r.meta.size(), r.value.size());
  if (out.size() < bytes) {
    return Status::InvalidArgument("disk record: " + std::to_string(bytes) +
                                   " bytes do not fit in " + std::to_string(out.size()));
  }
  char* p = out.data();
  std::memset(p, 0, kFixedBytes);
  Put<uint32_t>(p + kMagicAt, kMagic);
  Put<uint16_t>(p + kFormatAt, kFormat);
  Put<uint16_t>(p + kFlagsAt, r.tombstone ? kTombstoneFlag : 0);
  Put<uint64_t>(p + kSequenceAt, r.sequence);
  Put<uint64_t>(p + kRecordBytesAt, bytes);
  Put<uint64_t>(p + kExpiryAt, r.expiry_ms);
  Put<uint64_t>(p + kValueBytesAt, r.value.size());
  Put<uint32_t>(p + kMetaBytesAt, static_cast<uint32_t>(r.meta.size()));
  Put<uint32_t>(p + kKeyBytesAt, static_cast<uint32_t>(r.key.size()));
  Put<uint16_t>(p + kNsBytesAt, static_cast<uint16_t>(r.ns.size()));
  // kReservedAt: 6 zero bytes (memset above).
  Put<uint64_t>(p + kValueChecksumAt, r.value_checksum != 0 ? r.value_checksum : Hash(r.value));
  char* names = p + kFixedBytes;
  char* at = CopyTo(names, r.ns);
  at = CopyTo(at, r.key);
  at = CopyTo(at, r.meta);
  const size_t names_bytes = r.ns.size() + r.key.size() + r.meta.size();
  Put<uint64_t>(p + kNamesChecksumAt, Hash({names, names_bytes}));
  Put<uint64_t>(p + kFixedChecksumAt, Hash({p, kFixedChecksumAt}));
  char* value = p + DiskValueOffset(names_bytes);
  std::memset(at, 0, static_cast<size_t>(value - at));
  CopyTo(value, r.value);
  const size_t used = DiskValueOffset(names_bytes) + r.value.size();
  std::memset(p + used, 0, bytes - used);
  return Status::Ok();
}

FixedPart ParseFixedPart(std::span<const char> fixed, uint64_t room, DiskRecordHeader* h) {
  if (fixed.size() < kFixedBytes) return FixedPart::kCorrupt;
  const char* p = fixed.data();
  if (std::all_of(p, p + kFixedBytes, [](char c) { return c == 0; })) return FixedPart::kEmpty;
  if (Get<uint32_t>(p + kMagicAt) != kMagic || Get<uint16_t>(p + kFormatAt) != kFormat ||
      Get<uint64_t>(p + kFixedChecksumAt) != Hash({p, kFixedChecksumAt})) {
    return FixedPart::kCorrupt;
  }
  const uint16_t flags = Get<uint16_t>(p + kFlagsAt);
  const uint64_t record_bytes = Get<uint64_t>(p + kRecordBytesAt);
  const uint64_t value_bytes = Get<uint64_t>(p + kValueBytesAt);
  const uint32_t meta_bytes = Get<uint32_t>(p + kMetaBytesAt);
  const uint32_t key_bytes = Get<uint32_t>(p + kKeyBytesAt);
  const uint16_t ns_bytes = Get<uint16_t>(p + kNsBytesAt);
  // A checksummed fixed part with impossible lengths was written by something else: corrupt.
  if (ns_bytes > kMaxRecordNamespaceBytes || key_bytes == 0 || key_bytes > kMaxRecordKeyBytes ||
      meta_bytes > kMaxRecordMetaBytes || value_bytes > room || record_bytes > room ||
      record_bytes % kDiskBlock != 0 ||
      record_bytes != DiskRecordBytes(ns_bytes, key_bytes, meta_bytes, value_bytes) ||
      (flags != 0 && flags != kTombstoneFlag && flags != kKilledFlag) ||
      (flags == kTombstoneFlag && (meta_bytes != 0 || value_bytes != 0))) {
    return FixedPart::kCorrupt;
  }
  // A killed record keeps its lengths (the scan moves on by them) and is a tombstone from then.
  h->tombstone = flags != 0;
  // Killed at sequence s, it ends s itself, which a tombstone of s + 1 does (a tombstone ends
  // what is below it): a copy of the record left elsewhere (a compaction's) cannot outlive it.
  h->sequence = Get<uint64_t>(p + kSequenceAt) + (flags == kKilledFlag ? 1 : 0);
  h->record_bytes = record_bytes;
  h->expiry_ms = Get<uint64_t>(p + kExpiryAt);
  h->value_bytes = value_bytes;
  h->value_checksum = Get<uint64_t>(p + kValueChecksumAt);
  h->names_bytes = ns_bytes + key_bytes + meta_bytes;
  h->ns.clear();
  h->key.clear();
  h->meta.clear();
  return FixedPart::kValid;
}

Status KillFixedPart(std::span<char> fixed) {
  DiskRecordHeader header;
  if (ParseFixedPart(fixed, UINT64_MAX, &header) != FixedPart::kValid) {
    return Status::Corruption("disk record: no valid fixed part to kill");
  }
  char* p = fixed.data();
  Put<uint16_t>(p + kFlagsAt, kKilledFlag);
  Put<uint64_t>(p + kFixedChecksumAt, Hash({p, kFixedChecksumAt}));
  return Status::Ok();
}

Status ParseNames(std::span<const char> fixed, std::span<const char> names, DiskRecordHeader* h) {
  if (names.size() != h->names_bytes) {
    return Status::InvalidArgument("disk record: names of the wrong length");
  }
  if (Get<uint64_t>(fixed.data() + kNamesChecksumAt) != Hash(names)) {
    return Status::Corruption("disk record " + std::to_string(h->sequence) +
                              ": its namespace, key or meta do not match their checksum");
  }
  const uint16_t ns_bytes = Get<uint16_t>(fixed.data() + kNsBytesAt);
  const uint32_t key_bytes = Get<uint32_t>(fixed.data() + kKeyBytesAt);
  h->ns.assign(names.data(), ns_bytes);
  h->key.assign(names.data() + ns_bytes, key_bytes);
  h->meta.assign(names.data() + ns_bytes + key_bytes, names.size() - ns_bytes - key_bytes);
  return Status::Ok();
}

Status CheckValue(const DiskRecordHeader& h, std::span<const char> value) {
  if (value.size() != h.value_bytes || Hash(value) != h.value_checksum) {
    return Status::Corruption("disk record " + std::to_string(h.sequence) +
                              ": its value does not match its checksum");
  }
  return Status::Ok();
}

}  // namespace kvport::store
