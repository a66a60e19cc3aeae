// SPDX-License-Identifier: Apache-2.0
#include "kvport/remote_metadata.h"

#include <fmt/core.h>

#include <limits>
#include <string>

#include "formats/little_endian.h"

namespace kvport {
namespace {

using formats_internal::GetI32LE;
using formats_internal::PutI32LE;

constexpr int32_t kMaxDtypeCode = 8;
constexpr int32_t kMaxFormatCode = 8;

constexpr std::string_view kDtypeCodes =
    "0 (none), 1 (half), 2 (float16), 3 (bfloat16), 4 (float32), 5 (float64), 6 (uint8), "
    "7 (fp8_e4m3fn), 8 (fp8_e5m2)";
constexpr std::string_view kFormatCodes =
    "0 (UNDEFINED), 1 (KV_2LTD), 2 (KV_T2D), 3 (KV_2TD), 4 (BINARY), 5 (BINARY_BUFFER), "
    "6 (KV_MLA_FMT), 7 (EC_TD), 8 (HS_TD)";

// Element count of one group's shape, or an error message. Checks the dims, not the dtype.
Result<uint64_t> ElementCount(const MetadataGroup& group, size_t index) {
  size_t rank = 0;
  for (size_t d = 0; d < group.shape.size(); ++d) {
    if (group.shape[d] < 0) {
      return Status::InvalidArgument(fmt::format(
          "group {} dimension {} is {}: dimensions must be >= 0", index, d, group.shape[d]));
    }
    if (group.shape[d] != 0) rank = d + 1;
  }
  if (rank == 0) return uint64_t{0};  // all padding: LMCache's [0] shape, no elements
  uint64_t count = 1;
  for (size_t d = 0; d < rank; ++d) {
    // 4 factors below 2^31 fit in 2^124 but not in 64 bits: check each step.
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(group.shape[d]), &count)) {
      return Status::InvalidArgument(
          fmt::format("group {} shape [{}, {}, {}, {}] has more than 2^64 elements", index,
                      group.shape[0], group.shape[1], group.shape[2], group.shape[3]));
    }
  }
  return count;
}

Result<uint64_t> GroupByteSize(const MetadataGroup& group, size_t index) {
  const int32_t code = static_cast<int32_t>(group.dtype);
  if (!IsKnownMetadataDtype(code)) {
    return Status::InvalidArgument(fmt::format(
        "group {} dtype code {} is unknown: expected one of {}", index, code, kDtypeCodes));
  }
  KVPORT_ASSIGN_OR_RETURN(uint64_t count, ElementCount(group, index));
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, MetadataDtypeSize(group.dtype), &bytes)) {
    return Status::InvalidArgument(
        fmt::format("group {} holds {} elements: more than 2^64 bytes", index, count));
  }
  return bytes;
}

// Turns a validation failure into the error of a blob that was read (Corruption).
Status AsCorruption(const Status& s) {
  return Status::Corruption(s.message());
}

}  // namespace

bool IsKnownMetadataDtype(int32_t code) {
  return code >= 0 && code <= kMaxDtypeCode;
}
bool IsKnownMemoryFormat(int32_t code) {
  return code >= 0 && code <= kMaxFormatCode;
}

std::string_view MetadataDtypeName(MetadataDtype dtype) {
  switch (dtype) {
    case MetadataDtype::kNone:
      return "none";
    case MetadataDtype::kHalf:
      return "half";
    case MetadataDtype::kFloat16:
      return "float16";
    case MetadataDtype::kBfloat16:
      return "bfloat16";
    case MetadataDtype::kFloat32:
      return "float32";
    case MetadataDtype::kFloat64:
      return "float64";
    case MetadataDtype::kUint8:
      return "uint8";
    case MetadataDtype::kFp8E4m3fn:
      return "fp8_e4m3fn";
    case MetadataDtype::kFp8E5m2:
      return "fp8_e5m2";
  }
  return "unknown";
}

size_t MetadataDtypeSize(MetadataDtype dtype) {
  switch (dtype) {
    case MetadataDtype::kNone:
    case MetadataDtype::kUint8:
    case MetadataDtype::kFp8E4m3fn:
    case MetadataDtype::kFp8E5m2:
      return 1;
    case MetadataDtype::kHalf:
    case MetadataDtype::kFloat16:
    case MetadataDtype::kBfloat16:
      return 2;
    case MetadataDtype::kFloat32:
      return 4;
    case MetadataDtype::kFloat64:
      return 8;
  }
  return 0;
}

std::string_view MemoryFormatName(MemoryFormat fmt) {
  switch (fmt) {
    case MemoryFormat::kUndefined:
      return "UNDEFINED";
    case MemoryFormat::kKv2LTD:
      return "KV_2LTD";
    case MemoryFormat::kKvT2D:
      return "KV_T2D";
    case MemoryFormat::kKv2TD:
      return "KV_2TD";
    case MemoryFormat::kBinary:
      return "BINARY";
    case MemoryFormat::kBinaryBuffer:
      return "BINARY_BUFFER";
    case MemoryFormat::kKvMlaFmt:
      return "KV_MLA_FMT";
    case MemoryFormat::kEcTD:
      return "EC_TD";
    case MemoryFormat::kHsTD:
      return "HS_TD";
  }
  return "unknown";
}

Result<std::vector<uint64_t>> RemoteMetadata::GroupSizes(std::span<const MetadataGroup> groups) {
  std::vector<uint64_t> sizes;
  sizes.reserve(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    KVPORT_ASSIGN_OR_RETURN(uint64_t bytes, GroupByteSize(groups[g], g));
    sizes.push_back(bytes);
  }
  return sizes;
}

Result<std::vector<uint64_t>> RemoteMetadata::GroupOffsets(std::span<const MetadataGroup> groups) {
  KVPORT_ASSIGN_OR_RETURN(std::vector<uint64_t> sizes, GroupSizes(groups));
  std::vector<uint64_t> offsets;
  offsets.reserve(sizes.size());
  uint64_t offset = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    offsets.push_back(offset);
    if (__builtin_add_overflow(offset, sizes[g], &offset)) {
      return Status::InvalidArgument(fmt::format("groups 0..{} together exceed 2^64 bytes", g));
    }
  }
  return offsets;
}

Result<uint64_t> RemoteMetadata::PayloadSize(std::span<const MetadataGroup> groups) {
  KVPORT_ASSIGN_OR_RETURN(std::vector<uint64_t> sizes, GroupSizes(groups));
  uint64_t total = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    if (__builtin_add_overflow(total, sizes[g], &total)) {
      return Status::InvalidArgument(fmt::format("groups 0..{} together exceed 2^64 bytes", g));
    }
  }
  return total;
}

Result<RemoteMetadata> RemoteMetadata::ForGroups(MemoryFormat fmt,
                                                 std::vector<MetadataGroup> groups) {
  KVPORT_ASSIGN_OR_RETURN(uint64_t payload, PayloadSize(groups));
  if (payload > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument(fmt::format(
        "payload of {} bytes does not fit the int32 length field (at most 2147483647 bytes)",
        payload));
  }
  RemoteMetadata meta;
  meta.length = static_cast<int32_t>(payload);
  meta.fmt = fmt;
  meta.groups = std::move(groups);
  KVPORT_RETURN_IF_ERROR(meta.Validate());
  return meta;
}

Status RemoteMetadata::Validate() const {
  if (groups.empty()) {
    return Status::InvalidArgument("metadata has no groups: expected at least 1");
  }
  const int32_t fmt_code = static_cast<int32_t>(fmt);
  if (!IsKnownMemoryFormat(fmt_code)) {
    return Status::InvalidArgument(
        fmt::format("fmt code {} is unknown: expected one of {}", fmt_code, kFormatCodes));
  }
  KVPORT_ASSIGN_OR_RETURN(uint64_t payload, PayloadSize(groups));
  if (length < 0 || static_cast<uint64_t>(length) != payload) {
    return Status::InvalidArgument(fmt::format(
        "length is {} but the {} group(s) describe {} payload bytes: length must equal the sum "
        "of element count * element size over the groups",
        length, groups.size(), payload));
  }
  return Status::Ok();
}

Status RemoteMetadata::EncodeTo(std::span<uint8_t> out) const {
  if (out.size() != EncodedSize(groups.size())) {
    return Status::InvalidArgument(
        fmt::format("metadata with {} group(s) encodes to {} bytes, buffer has {}", groups.size(),
                    EncodedSize(groups.size()), out.size()));
  }
  KVPORT_RETURN_IF_ERROR(Validate());
  uint8_t* p = out.data();
  PutI32LE(p, length);
  PutI32LE(p + 4, static_cast<int32_t>(fmt));
  p += kHeaderSize;
  for (const MetadataGroup& group : groups) {
    PutI32LE(p, static_cast<int32_t>(group.dtype));
    for (size_t d = 0; d < 4; ++d)
      PutI32LE(p + 4 + 4 * d, group.shape[d]);
    p += kGroupSize;
  }
  return Status::Ok();
}

Result<std::vector<uint8_t>> RemoteMetadata::Encode() const {
  std::vector<uint8_t> out(EncodedSize(groups.size()));
  KVPORT_RETURN_IF_ERROR(EncodeTo(out));
  return out;
}

Result<RemoteMetadata> RemoteMetadata::Decode(std::span<const uint8_t> bytes) {
  if (bytes.size() < EncodedSize(1) || (bytes.size() - kHeaderSize) % kGroupSize != 0) {
    return Status::Corruption(
        fmt::format("metadata is {} bytes: expected 8 + 20 * groups bytes with at least 1 group "
                    "(28, 48, 68, ...)",
                    bytes.size()));
  }
  const size_t num_groups = (bytes.size() - kHeaderSize) / kGroupSize;
  RemoteMetadata meta;
  meta.length = GetI32LE(bytes.data());
  const int32_t fmt_code = GetI32LE(bytes.data() + 4);
  if (!IsKnownMemoryFormat(fmt_code)) {
    return Status::Corruption(
        fmt::format("metadata fmt at offset 4 is {}: expected one of {}", fmt_code, kFormatCodes));
  }
  meta.fmt = static_cast<MemoryFormat>(fmt_code);
  meta.groups.resize(num_groups);
  for (size_t g = 0; g < num_groups; ++g) {
    const size_t base = kHeaderSize + g * kGroupSize;
    const int32_t dtype_code = GetI32LE(bytes.data() + base);
    if (!IsKnownMetadataDtype(dtype_code)) {
      return Status::Corruption(
          fmt::format("metadata group {} dtype at offset {} is {}: expected one of {}", g, base,
                      dtype_code, kDtypeCodes));
    }
    MetadataGroup& group = meta.groups[g];
    group.dtype = static_cast<MetadataDtype>(dtype_code);
    for (size_t d = 0; d < 4; ++d) {
      const size_t offset = base + 4 + 4 * d;
      group.shape[d] = GetI32LE(bytes.data() + offset);
      if (group.shape[d] < 0) {
        return Status::Corruption(
            fmt::format("metadata group {} dimension {} at offset {} is {}: dimensions must be "
                        ">= 0",
                        g, d, offset, group.shape[d]));
      }
    }
  }
  Status valid = meta.Validate();
  if (!valid.ok()) return AsCorruption(valid.WithContext("metadata"));
  return meta;
}

}  // namespace kvport
