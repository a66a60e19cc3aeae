// SPDX-License-Identifier: Apache-2.0
#include "kvport/remote_metadata.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace kvport {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Test vectors written by hand from the layout in remote_metadata.h: int32 little-endian.

// One group: KV_2LTD, bf16 [2, 32, 256, 1024]: 2*32*256*1024*2 = 33554432 = 0x02000000 bytes.
const std::vector<uint8_t> kOneGroup = {
    0x00, 0x00, 0x00, 0x02,  // length 0x02000000
    0x01, 0x00, 0x00, 0x00,  // fmt 1 KV_2LTD
    0x03, 0x00, 0x00, 0x00,  // dtype 3 bf16
    0x02, 0x00, 0x00, 0x00,  // 2
    0x20, 0x00, 0x00, 0x00,  // 32 layers
    0x00, 0x01, 0x00, 0x00,  // 256 tokens
    0x00, 0x04, 0x00, 0x00,  // 1024 hidden
};

// Two groups: KV_2LTD, bf16 [2, 16, 256, 512] (0x800000 bytes) then fp32 [2, 4, 256, 128]
// (0x100000 bytes): length 0x900000.
const std::vector<uint8_t> kTwoGroups = {
    0x00, 0x00, 0x90, 0x00,  // length 0x900000 = 9437184
    0x01, 0x00, 0x00, 0x00,  // fmt 1 KV_2LTD
    0x03, 0x00, 0x00, 0x00,  // group 0: dtype 3 bf16
    0x02, 0x00, 0x00, 0x00,  //   2
    0x10, 0x00, 0x00, 0x00,  //   16
    0x00, 0x01, 0x00, 0x00,  //   256
    0x00, 0x02, 0x00, 0x00,  //   512
    0x04, 0x00, 0x00, 0x00,  // group 1: dtype 4 fp32
    0x02, 0x00, 0x00, 0x00,  //   2
    0x04, 0x00, 0x00, 0x00,  //   4
    0x00, 0x01, 0x00, 0x00,  //   256
    0x80, 0x00, 0x00, 0x00,  //   128
};

// MLA (DeepSeek-like, 61 layers, 256 tokens): KV_MLA_FMT, latent bf16 [1, 61, 256, 512]
// (61*256*512*2 = 0xF40000 bytes) then rope fp8_e4m3fn [1, 61, 256, 64] (0xF4000 bytes):
// length 0x1034000 = 16990208.
const std::vector<uint8_t> kMla = {
    0x00, 0x40, 0x03, 0x01,  // length 0x01034000
    0x06, 0x00, 0x00, 0x00,  // fmt 6 KV_MLA_FMT
    0x03, 0x00, 0x00, 0x00,  // group 0: dtype 3 bf16
    0x01, 0x00, 0x00, 0x00,  //   1
    0x3d, 0x00, 0x00, 0x00,  //   61 layers
    0x00, 0x01, 0x00, 0x00,  //   256 tokens
    0x00, 0x02, 0x00, 0x00,  //   512 (kv_lora_rank)
    0x07, 0x00, 0x00, 0x00,  // group 1: dtype 7 fp8_e4m3fn
    0x01, 0x00, 0x00, 0x00,  //   1
    0x3d, 0x00, 0x00, 0x00,  //   61
    0x00, 0x01, 0x00, 0x00,  //   256
    0x40, 0x00, 0x00, 0x00,  //   64 (rope head dim)
};

RemoteMetadata MustDecode(const std::vector<uint8_t>& bytes) {
  Result<RemoteMetadata> r = RemoteMetadata::Decode(bytes);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : RemoteMetadata{};
}

std::string DecodeError(const std::vector<uint8_t>& bytes) {
  Result<RemoteMetadata> r = RemoteMetadata::Decode(bytes);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  return r.status().message();
}

void PutI32(std::vector<uint8_t>& bytes, size_t offset, int32_t v) {
  const uint32_t u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; ++i)
    bytes[offset + i] = static_cast<uint8_t>(u >> (8 * i));
}

TEST(RemoteMetadataTest, SizesFollowTheLayout) {
  EXPECT_EQ(RemoteMetadata::EncodedSize(1), 28u);
  EXPECT_EQ(RemoteMetadata::EncodedSize(2), 48u);
  EXPECT_EQ(RemoteMetadata::EncodedSize(3), 68u);
  EXPECT_EQ(kOneGroup.size(), 28u);
  EXPECT_EQ(kTwoGroups.size(), 48u);
  EXPECT_EQ(kMla.size(), 48u);
}

TEST(RemoteMetadataTest, OneGroupDecodesAndEncodes) {
  RemoteMetadata meta = MustDecode(kOneGroup);
  EXPECT_EQ(meta.length, 33554432);
  EXPECT_EQ(meta.fmt, MemoryFormat::kKv2LTD);
  ASSERT_EQ(meta.groups.size(), 1u);
  EXPECT_EQ(meta.groups[0].dtype, MetadataDtype::kBfloat16);
  EXPECT_THAT(meta.groups[0].shape, ElementsAre(2, 32, 256, 1024));

  Result<RemoteMetadata> built = RemoteMetadata::ForGroups(
      MemoryFormat::kKv2LTD, {{MetadataDtype::kBfloat16, {2, 32, 256, 1024}}});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_EQ(*built, meta);
  Result<std::vector<uint8_t>> bytes = built->Encode();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, kOneGroup);
}

TEST(RemoteMetadataTest, TwoGroupsDecodeAndEncode) {
  RemoteMetadata meta = MustDecode(kTwoGroups);
  EXPECT_EQ(meta.length, 9437184);
  ASSERT_EQ(meta.groups.size(), 2u);
  EXPECT_EQ(meta.groups[1].dtype, MetadataDtype::kFloat32);
  EXPECT_THAT(meta.groups[1].shape, ElementsAre(2, 4, 256, 128));
  Result<std::vector<uint64_t>> offsets = RemoteMetadata::GroupOffsets(meta.groups);
  ASSERT_TRUE(offsets.ok());
  EXPECT_THAT(*offsets, ElementsAre(0u, 8388608u));
  Result<std::vector<uint8_t>> bytes = meta.Encode();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, kTwoGroups);
}

TEST(RemoteMetadataTest, MlaLatentPlusRopeGroups) {
  RemoteMetadata meta = MustDecode(kMla);
  EXPECT_EQ(meta.fmt, MemoryFormat::kKvMlaFmt);
  ASSERT_EQ(meta.groups.size(), 2u);
  EXPECT_EQ(meta.groups[0].dtype, MetadataDtype::kBfloat16);
  EXPECT_EQ(meta.groups[1].dtype, MetadataDtype::kFp8E4m3fn);
  EXPECT_THAT(meta.groups[0].shape, ElementsAre(1, 61, 256, 512));
  EXPECT_THAT(meta.groups[1].shape, ElementsAre(1, 61, 256, 64));

  Result<std::vector<uint64_t>> sizes = RemoteMetadata::GroupSizes(meta.groups);
  ASSERT_TRUE(sizes.ok());
  EXPECT_THAT(*sizes, ElementsAre(15990784u, 999424u));
  Result<std::vector<uint64_t>> offsets = RemoteMetadata::GroupOffsets(meta.groups);
  ASSERT_TRUE(offsets.ok());
  // The rope group starts right after the latent group, not at a one-group view's base.
  EXPECT_THAT(*offsets, ElementsAre(0u, 15990784u));
  Result<uint64_t> payload = RemoteMetadata::PayloadSize(meta.groups);
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(*payload, 16990208u);

  Result<RemoteMetadata> built = RemoteMetadata::ForGroups(
      MemoryFormat::kKvMlaFmt, {{MetadataDtype::kBfloat16, {1, 61, 256, 512}},
                                {MetadataDtype::kFp8E4m3fn, {1, 61, 256, 64}}});
  ASSERT_TRUE(built.ok());
  Result<std::vector<uint8_t>> bytes = built->Encode();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, kMla);
}

TEST(RemoteMetadataTest, BinaryObjectUsesPaddedOneDimShape) {
  const std::vector<uint8_t> binary = {
      0xe8, 0x03, 0x00, 0x00,  // length 1000
      0x04, 0x00, 0x00, 0x00,  // fmt 4 BINARY
      0x06, 0x00, 0x00, 0x00,  // dtype 6 uint8
      0xe8, 0x03, 0x00, 0x00,  // 1000
      0x00, 0x00, 0x00, 0x00,  // padding
      0x00, 0x00, 0x00, 0x00,  // padding
      0x00, 0x00, 0x00, 0x00,  // padding
  };
  RemoteMetadata meta = MustDecode(binary);
  EXPECT_EQ(meta.fmt, MemoryFormat::kBinary);
  EXPECT_EQ(meta.length, 1000);
  EXPECT_THAT(meta.groups[0].shape, ElementsAre(1000, 0, 0, 0));
}

TEST(RemoteMetadataTest, ManyGroupsRoundTrip) {
  std::vector<MetadataGroup> groups;
  for (int32_t g = 0; g < 9; ++g) {
    groups.push_back({static_cast<MetadataDtype>(g), {g + 1, 3, 0, 0}});
  }
  Result<RemoteMetadata> meta = RemoteMetadata::ForGroups(MemoryFormat::kHsTD, groups);
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  Result<std::vector<uint8_t>> bytes = meta->Encode();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), RemoteMetadata::EncodedSize(9));
  EXPECT_EQ(MustDecode(*bytes), *meta);
  // 1*3*1 + 2*3*2 + 3*3*2 + 4*3*2 + 5*3*4 + 6*3*8 + 7*3*1 + 8*3*1 + 9*3*1
  EXPECT_EQ(meta->length, 3 + 12 + 18 + 24 + 60 + 144 + 21 + 24 + 27);
}

TEST(RemoteMetadataTest, EncodeToCallerBuffer) {
  RemoteMetadata meta = MustDecode(kTwoGroups);
  std::vector<uint8_t> out(48, 0xee);
  ASSERT_TRUE(meta.EncodeTo(out).ok());
  EXPECT_EQ(out, kTwoGroups);
  std::vector<uint8_t> small(47);
  Status s = meta.EncodeTo(small);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("48 bytes"), HasSubstr("buffer has 47")));
}

TEST(RemoteMetadataTest, ElementSizesAndNames) {
  EXPECT_EQ(MetadataDtypeSize(MetadataDtype::kNone), 1u);
  EXPECT_EQ(MetadataDtypeSize(MetadataDtype::kHalf), 2u);
  EXPECT_EQ(MetadataDtypeSize(MetadataDtype::kFloat16), 2u);
  EXPECT_EQ(MetadataDtypeSize(MetadataDtype::kBfloat16), 2u);
  EXPECT_EQ(MetadataDtypeSize(MetadataDtype::kFloat32), 4u);
  EXPECT_EQ(MetadataDtypeSize(MetadataDtype::kFloat64), 8u);
  EXPECT_EQ(MetadataDtypeSize(MetadataDtype::kUint8), 1u);
  EXPECT_EQ(MetadataDtypeSize(MetadataDtype::kFp8E4m3fn), 1u);
  EXPECT_EQ(MetadataDtypeSize(MetadataDtype::kFp8E5m2), 1u);
  EXPECT_EQ(MetadataDtypeSize(static_cast<MetadataDtype>(9)), 0u);
  EXPECT_EQ(MetadataDtypeName(MetadataDtype::kFp8E5m2), "fp8_e5m2");
  EXPECT_EQ(MetadataDtypeName(static_cast<MetadataDtype>(-3)), "unknown");
  EXPECT_EQ(MemoryFormatName(MemoryFormat::kKvMlaFmt), "KV_MLA_FMT");
  EXPECT_EQ(MemoryFormatName(MemoryFormat::kBinaryBuffer), "BINARY_BUFFER");
  EXPECT_EQ(MemoryFormatName(static_cast<MemoryFormat>(42)), "unknown");
  for (int32_t code = 0; code <= 8; ++code) {
    EXPECT_TRUE(IsKnownMetadataDtype(code));
    EXPECT_TRUE(IsKnownMemoryFormat(code));
  }
  EXPECT_FALSE(IsKnownMetadataDtype(9));
  EXPECT_FALSE(IsKnownMetadataDtype(-1));
  EXPECT_FALSE(IsKnownMemoryFormat(9));
}

TEST(RemoteMetadataTest, ElementCountIgnoresTrailingPadding) {
  auto bytes_of = [](std::array<int32_t, 4> shape) {
    MetadataGroup g{MetadataDtype::kFloat32, shape};
    Result<uint64_t> r = RemoteMetadata::PayloadSize(std::span(&g, 1));
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : ~uint64_t{0};
  };
  EXPECT_EQ(bytes_of({5, 0, 0, 0}), 20u);
  EXPECT_EQ(bytes_of({5, 3, 0, 0}), 60u);
  EXPECT_EQ(bytes_of({5, 3, 2, 0}), 120u);
  EXPECT_EQ(bytes_of({2, 0, 3, 0}), 0u);  // a zero before a non-zero dim: empty tensor
  EXPECT_EQ(bytes_of({0, 0, 0, 0}), 0u);
}

TEST(RemoteMetadataTest, WrongSizeIsCorruption) {
  for (size_t size : {0, 4, 8, 27, 29, 47, 49, 100}) {
    std::vector<uint8_t> bytes(size, 0);
    EXPECT_THAT(DecodeError(bytes),
                AllOf(HasSubstr(std::to_string(size) + " bytes"), HasSubstr("8 + 20 * groups")))
        << size;
  }
  // 8 bytes is a header with zero groups.
  EXPECT_THAT(DecodeError(std::vector<uint8_t>(8)), HasSubstr("at least 1 group"));
}

TEST(RemoteMetadataTest, UnknownCodesAreCorruption) {
  std::vector<uint8_t> bad_fmt = kOneGroup;
  PutI32(bad_fmt, 4, 9);
  EXPECT_THAT(DecodeError(bad_fmt),
              AllOf(HasSubstr("fmt at offset 4 is 9"), HasSubstr("6 (KV_MLA_FMT)")));
  PutI32(bad_fmt, 4, -1);
  EXPECT_THAT(DecodeError(bad_fmt), HasSubstr("fmt at offset 4 is -1"));

  std::vector<uint8_t> bad_dtype = kTwoGroups;
  PutI32(bad_dtype, 28, 9);
  EXPECT_THAT(DecodeError(bad_dtype),
              AllOf(HasSubstr("group 1 dtype at offset 28 is 9"), HasSubstr("8 (fp8_e5m2)")));
}

TEST(RemoteMetadataTest, NegativeDimensionIsCorruption) {
  std::vector<uint8_t> bytes = kOneGroup;
  bytes[20] = bytes[21] = bytes[22] = bytes[23] = 0xff;  // d2 = -1
  EXPECT_THAT(DecodeError(bytes),
              AllOf(HasSubstr("group 0 dimension 2 at offset 20 is -1"), HasSubstr(">= 0")));
  std::vector<uint8_t> mla = kMla;
  PutI32(mla, 32, INT32_MIN);  // group 1 d0
  EXPECT_THAT(DecodeError(mla), HasSubstr("group 1 dimension 0 at offset 32 is -2147483648"));
}

TEST(RemoteMetadataTest, LengthMustMatchTheShapes) {
  for (int32_t length : {33554431, 33554433, 0, -1, INT32_MAX}) {
    std::vector<uint8_t> bytes = kOneGroup;
    PutI32(bytes, 0, length);
    EXPECT_THAT(DecodeError(bytes), AllOf(HasSubstr("length is " + std::to_string(length)),
                                          HasSubstr("describe 33554432 payload bytes")))
        << length;
  }
}

TEST(RemoteMetadataTest, OverflowingShapesAreRejected) {
  std::vector<uint8_t> bytes = kOneGroup;
  for (size_t d = 0; d < 4; ++d)
    PutI32(bytes, 12 + 4 * d, INT32_MAX);
  EXPECT_THAT(DecodeError(bytes), HasSubstr("more than 2^64 elements"));

  Result<RemoteMetadata> too_big = RemoteMetadata::ForGroups(
      MemoryFormat::kKv2LTD, {{MetadataDtype::kFloat32, {2, 32, 4096, 8192}}});  // 8 GiB
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.status().message(),
              AllOf(HasSubstr("8589934592 bytes"), HasSubstr("int32 length field")));
}

TEST(RemoteMetadataTest, EncodeRejectsWhatDecodeWouldReject) {
  RemoteMetadata none;
  Result<std::vector<uint8_t>> r = none.Encode();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("no groups"));

  RemoteMetadata meta = MustDecode(kOneGroup);
  RemoteMetadata bad = meta;
  bad.groups[0].dtype = static_cast<MetadataDtype>(12);
  EXPECT_THAT(bad.Encode().status().message(), HasSubstr("group 0 dtype code 12 is unknown"));
  bad = meta;
  bad.fmt = static_cast<MemoryFormat>(-5);
  EXPECT_THAT(bad.Encode().status().message(), HasSubstr("fmt code -5 is unknown"));
  bad = meta;
  bad.groups[0].shape[1] = -32;
  EXPECT_THAT(bad.Encode().status().message(), HasSubstr("group 0 dimension 1 is -32"));
  bad = meta;
  bad.length += 2;
  EXPECT_THAT(bad.Encode().status().message(), HasSubstr("length is 33554434"));
  EXPECT_TRUE(meta.Validate().ok());
}

TEST(RemoteMetadataTest, DecodeReadsEveryFieldWithExplicitByteOrder) {
  // Each field with a distinct value in every byte lane, to catch a swapped or shifted read.
  std::vector<uint8_t> bytes(28);
  PutI32(bytes, 4, 2);                  // KV_T2D
  PutI32(bytes, 8, 1);                  // half
  PutI32(bytes, 12, 0x0102);            // 258 tokens
  PutI32(bytes, 16, 0x02);              // 2
  PutI32(bytes, 20, 0x0304);            // 772 hidden
  PutI32(bytes, 0, 258 * 2 * 772 * 2);  // length
  EXPECT_EQ(bytes[12], 0x02);
  EXPECT_EQ(bytes[13], 0x01);
  RemoteMetadata meta = MustDecode(bytes);
  EXPECT_EQ(meta.fmt, MemoryFormat::kKvT2D);
  EXPECT_EQ(meta.groups[0].dtype, MetadataDtype::kHalf);
  EXPECT_THAT(meta.groups[0].shape, ElementsAre(258, 2, 772, 0));
  EXPECT_EQ(meta.length, 796704);
}

}  // namespace
}  // namespace kvport
