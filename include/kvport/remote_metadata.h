// SPDX-License-Identifier: Apache-2.0
// RemoteMetadata: LMCache's small binary header that describes a stored chunk's payload.
//
// Layout (LMCache v1 lmcache/v1/protocol.py, struct "i" * (2 + 5 * groups)), every field a
// 32-bit little-endian two's-complement integer:
//
//   offset 0   length     payload size in bytes (sum of the groups' byte sizes)
//   offset 4   fmt        MemoryFormat code
//   offset 8   group 0:   dtype code, d0, d1, d2, d3
//   offset 28  group 1:   dtype code, d0, d1, d2, d3      ...
//
// so one group is 28 bytes, two are 48, k groups 8 + 20k. A shape with fewer than 4 dimensions
// is padded with trailing zeros ([n, 0, 0, 0] for LMCache's BINARY objects). The groups of a
// multi-group object (e.g. MLA latent KV in bf16 plus a rope group in fp8) lie back to back in
// one payload: group g starts at the sum of the byte sizes of groups 0..g-1 (group 0 at 0).
//
// Encoding and decoding go field by field with explicit byte order, so the same bytes mean the
// same thing on x86-64 and aarch64. docs/formats.md has the enums and a worked example.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kvport/export.h"
#include "kvport/status.h"

namespace kvport {

// LMCache's DTYPE_TO_INT codes.
enum class MetadataDtype : int32_t {
  kNone = 0,       // no dtype: untyped bytes, 1 byte per element (kvport's reading)
  kHalf = 1,       // torch.half
  kFloat16 = 2,    // torch.float16 (the same type as half; LMCache keeps both codes)
  kBfloat16 = 3,   // torch.bfloat16
  kFloat32 = 4,    // torch.float / float32
  kFloat64 = 5,    // torch.double / float64
  kUint8 = 6,      // torch.uint8
  kFp8E4m3fn = 7,  // torch.float8_e4m3fn
  kFp8E5m2 = 8,    // torch.float8_e5m2
};

// LMCache's MemoryFormat codes; the comments give the shape each one lays out.
enum class MemoryFormat : int32_t {
  kUndefined = 0,
  kKv2LTD = 1,        // [2, layers, tokens, hidden]
  kKvT2D = 2,         // [tokens, 2, hidden]
  kKv2TD = 3,         // [2, tokens, hidden]
  kBinary = 4,        // [bytes, 0, 0, 0]
  kBinaryBuffer = 5,  // [bytes, 0, 0, 0]
  kKvMlaFmt = 6,      // [1, layers, tokens, head]
  kEcTD = 7,
  kHsTD = 8,
};

// True when `code` is one of the values above.
KVPORT_API bool IsKnownMetadataDtype(int32_t code);
KVPORT_API bool IsKnownMemoryFormat(int32_t code);
// "none", "half", "float16", "bfloat16", "float32", "float64", "uint8", "fp8_e4m3fn",
// "fp8_e5m2"; "unknown" for any other value.
KVPORT_API std::string_view MetadataDtypeName(MetadataDtype dtype);
// Bytes per element: 1, 2, 2, 2, 4, 8, 1, 1, 1 in code order; 0 for an unknown value.
KVPORT_API size_t MetadataDtypeSize(MetadataDtype dtype);
// "UNDEFINED", "KV_2LTD", "KV_T2D", "KV_2TD", "BINARY", "BINARY_BUFFER", "KV_MLA_FMT",
// "EC_TD", "HS_TD"; "unknown" for any other value.
KVPORT_API std::string_view MemoryFormatName(MemoryFormat fmt);

// One group of same-shaped, same-typed tensors.
struct KVPORT_API MetadataGroup {
  MetadataDtype dtype = MetadataDtype::kNone;
  // Up to 4 dimensions; trailing zeros are padding. The element count is the product of the
  // dimensions up to the last non-zero one (so a zero before it means an empty tensor, and an
  // all-zero shape has no elements).
  std::array<int32_t, 4> shape{};

  bool operator==(const MetadataGroup&) const = default;
};

struct KVPORT_API RemoteMetadata {
  static constexpr size_t kHeaderSize = 8;  // length, fmt
  static constexpr size_t kGroupSize = 20;  // dtype, d0..d3
  static constexpr size_t EncodedSize(size_t num_groups) {
    return kHeaderSize + kGroupSize * num_groups;
  }

  // Payload bytes. LMCache writes len(payload) here and reads exactly that many bytes back;
  // kvport requires it to equal PayloadSize(groups), which also bounds it to int32.
  int32_t length = 0;
  MemoryFormat fmt = MemoryFormat::kUndefined;
  std::vector<MetadataGroup> groups;  // 1 or more

  // Metadata for `groups` with `length` computed from them; InvalidArgument if Validate()
  // would fail (no groups, unknown codes, a negative dimension, payload over 2^31 - 1 bytes).
  static Result<RemoteMetadata> ForGroups(MemoryFormat fmt, std::vector<MetadataGroup> groups);

  // Payload bytes of `groups`: sum of element count * element size. InvalidArgument naming the
  // group for an unknown dtype or a negative dimension; an error too if the sum overflows.
  static Result<uint64_t> PayloadSize(std::span<const MetadataGroup> groups);
  // Byte size of each group, and where each starts in the payload (offset 0 for group 0, then
  // prefix sums). Same errors as PayloadSize().
  static Result<std::vector<uint64_t>> GroupSizes(std::span<const MetadataGroup> groups);
  static Result<std::vector<uint64_t>> GroupOffsets(std::span<const MetadataGroup> groups);

  // OK when the metadata can be encoded and decoded back: >= 1 group, known fmt and dtype
  // codes, no negative dimension, length == PayloadSize(groups). InvalidArgument otherwise,
  // naming the field.
  Status Validate() const;

  // EncodedSize(groups.size()) bytes. Fails (InvalidArgument) exactly when Validate() fails.
  Result<std::vector<uint8_t>> Encode() const;
  // Same into a caller's buffer, which must be exactly EncodedSize(groups.size()) bytes.
  Status EncodeTo(std::span<uint8_t> out) const;

  // Reads a blob. Corruption, naming the offending field, its offset and value, when: the size
  // is not 8 + 20k bytes with k >= 1, a fmt or dtype code is unknown, a dimension is negative,
  // or length differs from the payload size the groups describe.
  static Result<RemoteMetadata> Decode(std::span<const uint8_t> bytes);

  bool operator==(const RemoteMetadata&) const = default;
};

}  // namespace kvport
