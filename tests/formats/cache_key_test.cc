// SPDX-License-Identifier: Apache-2.0
#include "kvport/cache_key.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace kvport {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

CacheKey SampleKey() {
  CacheKey key;
  key.model_name = "meta-llama/Llama-3.1-8B";
  key.world_size = 8;
  key.worker_id = 3;
  key.chunk_hash = 0x1f2e3d4c5b6a7988;
  key.dtype = KeyDtype::kBfloat16;
  return key;
}

CacheKey MustParse(std::string_view text) {
  Result<CacheKey> r = CacheKey::Parse(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.ok() ? *r : CacheKey{};
}

std::string ParseError(std::string_view text) {
  Result<CacheKey> r = CacheKey::Parse(text);
  EXPECT_FALSE(r.ok()) << text << " parsed as " << (r.ok() ? r->ToString() : "");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(CacheKeyTest, WritesTheCurrentForm) {
  CacheKey key = SampleKey();
  ASSERT_TRUE(key.Validate().ok());
  EXPECT_EQ(key.ToString(), "meta-llama/Llama-3.1-8B@8@3@1f2e3d4c5b6a7988@bfloat16");
  EXPECT_EQ(MustParse(key.ToString()), key);
}

TEST(CacheKeyTest, ParsesEveryField) {
  CacheKey key = MustParse("m@2@1@abc@half");
  EXPECT_EQ(key.model_name, "m");
  EXPECT_EQ(key.world_size, 2);
  EXPECT_EQ(key.worker_id, 1);
  EXPECT_EQ(key.chunk_hash, 0xabcu);
  EXPECT_FALSE(key.chunk_hash_signed);
  EXPECT_EQ(key.dtype, KeyDtype::kHalf);
  EXPECT_FALSE(key.layer_id.has_value());
  EXPECT_TRUE(key.tags.empty());
  EXPECT_TRUE(key.legacy_fmt.empty());
}

TEST(CacheKeyTest, LayerKeyInsertsLayerIdAfterDtype) {
  CacheKey key = SampleKey();
  key.layer_id = 12;
  EXPECT_EQ(key.ToString(), "meta-llama/Llama-3.1-8B@8@3@1f2e3d4c5b6a7988@bfloat16@12");
  CacheKey parsed = MustParse(key.ToString());
  EXPECT_EQ(parsed.layer_id, 12);
  EXPECT_EQ(parsed, key);
  EXPECT_EQ(MustParse("m@1@0@0@half@0").layer_id, 0);
}

TEST(CacheKeyTest, TagsKeepOrderAndSplitAtFirstPercent) {
  CacheKey key = SampleKey();
  key.tags = {{"lora", "a1"}, {"salt", "x%y"}, {"empty", ""}};
  const std::string text = key.ToString();
  EXPECT_EQ(text, "meta-llama/Llama-3.1-8B@8@3@1f2e3d4c5b6a7988@bfloat16@lora%a1@salt%x%y@empty%");
  CacheKey parsed = MustParse(text);
  ASSERT_EQ(parsed.tags.size(), 3u);
  EXPECT_EQ(parsed.tags[0], (CacheKeyTag{"lora", "a1"}));
  EXPECT_EQ(parsed.tags[1], (CacheKeyTag{"salt", "x%y"}));
  EXPECT_EQ(parsed.tags[2], (CacheKeyTag{"empty", ""}));
  EXPECT_EQ(parsed, key);
}

TEST(CacheKeyTest, LayerIdThenTags) {
  const std::string text = "m@4@0@ff@fp8_e4m3fn@7@tenant%acme@lora%x";
  CacheKey key = MustParse(text);
  EXPECT_EQ(key.layer_id, 7);
  ASSERT_EQ(key.tags.size(), 2u);
  EXPECT_EQ(key.tags[1].name, "lora");
  EXPECT_EQ(key.ToString(), text);
}

TEST(CacheKeyTest, EveryDtypeRoundTrips) {
  const char* names[] = {"half",       "bfloat16",     "float",    "double",      "int8",
                         "uint8",      "int16",        "int32",    "int64",       "bool",
                         "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2", "fp8_e5m2fnuz"};
  for (const char* name : names) {
    Result<KeyDtype> dtype = ParseKeyDtype(name);
    ASSERT_TRUE(dtype.ok()) << name;
    EXPECT_EQ(KeyDtypeName(*dtype), name);
    const std::string text = std::string("m@1@0@1@") + name;
    EXPECT_EQ(MustParse(text).ToString(), text);
  }
}

TEST(CacheKeyTest, HashIsLowercaseHexWithoutLeadingZeros) {
  EXPECT_EQ(CacheKey::HashToHex(0), "0");
  EXPECT_EQ(CacheKey::HashToHex(0xabc), "abc");
  EXPECT_EQ(CacheKey::HashToHex(0x0123456789abcdef), "123456789abcdef");
  EXPECT_EQ(CacheKey::HashToHex(~uint64_t{0}), "ffffffffffffffff");
  EXPECT_EQ(MustParse("m@1@0@0@half").chunk_hash, 0u);
  EXPECT_EQ(MustParse("m@1@0@ffffffffffffffff@half").chunk_hash, ~uint64_t{0});
}

TEST(CacheKeyTest, NegativeHashesFromPythonHashRoundTrip) {
  CacheKey minus_one = MustParse("m@1@0@-1@half");
  EXPECT_TRUE(minus_one.chunk_hash_signed);
  EXPECT_EQ(minus_one.chunk_hash, ~uint64_t{0});
  EXPECT_EQ(minus_one.ToString(), "m@1@0@-1@half");

  CacheKey most_negative = MustParse("m@1@0@-8000000000000000@half");  // -2^63
  EXPECT_EQ(most_negative.chunk_hash, uint64_t{1} << 63);
  EXPECT_EQ(most_negative.ToString(), "m@1@0@-8000000000000000@half");

  CacheKey seven_b = MustParse("m@1@0@-7b@half");
  EXPECT_EQ(static_cast<int64_t>(seven_b.chunk_hash), -0x7b);

  // The same 64 bits written unsigned is a different key string, hence a different key.
  CacheKey unsigned_form = MustParse("m@1@0@ffffffffffffffff@half");
  EXPECT_NE(unsigned_form, minus_one);

  // A non-negative hash prints the same whether or not it is flagged as signed.
  CacheKey key = SampleKey();
  key.chunk_hash_signed = true;
  EXPECT_EQ(key.ToString(), SampleKey().ToString());
  EXPECT_EQ(key, SampleKey());
}

TEST(CacheKeyTest, LegacyFormatFirstIsParsed) {
  CacheKey key = MustParse("vllm@meta-llama/Llama-3.1-8B@8@3@1f2e3d4c5b6a7988@bfloat16");
  EXPECT_EQ(key.legacy_fmt, "vllm");
  EXPECT_EQ(key.model_name, "meta-llama/Llama-3.1-8B");
  EXPECT_EQ(key.world_size, 8);
  EXPECT_EQ(key.worker_id, 3);
  EXPECT_EQ(key.chunk_hash, 0x1f2e3d4c5b6a7988u);
  EXPECT_EQ(key, SampleKey());  // legacy_fmt is not part of equality
  // Written back in the current form, or in the legacy form on request.
  EXPECT_EQ(key.ToString(), SampleKey().ToString());
  EXPECT_EQ(key.ToLegacyString("vllm"),
            "vllm@meta-llama/Llama-3.1-8B@8@3@1f2e3d4c5b6a7988@bfloat16");
}

TEST(CacheKeyTest, LegacyLayerKeyWithTagsAndNegativeHash) {
  const std::string text = "huggingface@m@2@1@-5f@half@3@lora%l1";
  CacheKey key = MustParse(text);
  EXPECT_EQ(key.legacy_fmt, "huggingface");
  EXPECT_EQ(key.layer_id, 3);
  EXPECT_EQ(static_cast<int64_t>(key.chunk_hash), -0x5f);
  ASSERT_EQ(key.tags.size(), 1u);
  EXPECT_EQ(key.ToLegacyString(key.legacy_fmt), text);
  EXPECT_EQ(key.ToString(), "m@2@1@-5f@half@3@lora%l1");
}

TEST(CacheKeyTest, ModelNamesMayLookLikeOtherFields) {
  // Only the sixth field decides the form: these are all current-form keys.
  EXPECT_EQ(MustParse("123@1@0@a@half").model_name, "123");
  EXPECT_EQ(MustParse("half@1@0@a@half").model_name, "half");
  EXPECT_EQ(MustParse("org/m-7b.v2_x y@1@0@a@half").model_name, "org/m-7b.v2_x y");
}

TEST(CacheKeyTest, TooFewFields) {
  EXPECT_THAT(ParseError("m@1@0@ff"),
              AllOf(HasSubstr("'m@1@0@ff'"), HasSubstr("has 4 '@'-separated fields"),
                    HasSubstr("model@world_size@worker_id@chunk_hash@dtype")));
  EXPECT_THAT(ParseError(""), HasSubstr("has 1 '@'-separated fields"));
}

TEST(CacheKeyTest, BadModelName) {
  EXPECT_THAT(ParseError("@1@0@ff@half"),
              AllOf(HasSubstr("field 1 (model name) is ''"), HasSubstr("non-empty")));
}

TEST(CacheKeyTest, BadWorldSize) {
  for (const char* ws : {"x", "0", "-1", "+1", "01", "2147483648", "99999999999", ""}) {
    std::string text = std::string("m@") + ws + "@0@ff@half";
    EXPECT_THAT(ParseError(text), AllOf(HasSubstr("field 2 (world_size) is '" + std::string(ws)),
                                        HasSubstr("decimal integer from 1 to 2147483647")))
        << text;
  }
  EXPECT_EQ(MustParse("m@2147483647@0@ff@half").world_size, 2147483647);
}

TEST(CacheKeyTest, BadWorkerId) {
  EXPECT_THAT(ParseError("m@1@-1@ff@half"),
              AllOf(HasSubstr("field 3 (worker_id) is '-1'"), HasSubstr("from 0 to")));
  EXPECT_THAT(ParseError("m@1@w0@ff@half"), HasSubstr("field 3 (worker_id)"));
}

TEST(CacheKeyTest, BadChunkHash) {
  for (const char* hash : {"0xff", "FF", "", "00ff", "12345678901234567", "g", "-", "-0",
                           "-8000000000000001", "ff "}) {
    std::string text = std::string("m@1@0@") + hash + "@half";
    EXPECT_THAT(ParseError(text), AllOf(HasSubstr("field 4 (chunk hash) is '" + std::string(hash)),
                                        HasSubstr("lowercase hex")))
        << text;
  }
  EXPECT_THAT(ParseError("m@1@0@AB@half"), HasSubstr("uppercase is not LMCache's form"));
  EXPECT_THAT(ParseError("m@1@0@0a@half"), HasSubstr("zero-padded"));
  EXPECT_THAT(ParseError(std::string("m@1@0@") + std::string(64, 'a') + "@half"),
              HasSubstr("256-bit"));
}

TEST(CacheKeyTest, UnknownDtypeListsTheKnownOnes) {
  std::string msg = ParseError("m@1@0@ff@float16");  // torch's name, not LMCache's
  EXPECT_THAT(msg, AllOf(HasSubstr("field 5 (dtype) is 'float16'"), HasSubstr("half, bfloat16"),
                         HasSubstr("fp8_e5m2fnuz")));
  EXPECT_THAT(ParseError("m@1@0@ff@"), HasSubstr("field 5 (dtype) is ''"));
  EXPECT_THAT(ParseKeyDtype("BF16").status().message(),
              AllOf(HasSubstr("'BF16'"), HasSubstr("bfloat16")));
}

TEST(CacheKeyTest, BadLayerIdOrTag) {
  EXPECT_THAT(ParseError("m@1@0@ff@half@abc"),
              AllOf(HasSubstr("field 6 (layer id or tag) is 'abc'"), HasSubstr("name%value")));
  EXPECT_THAT(ParseError("m@1@0@ff@half@"), HasSubstr("field 6 (layer id or tag) is ''"));
  EXPECT_THAT(ParseError("m@1@0@ff@half@007"), HasSubstr("field 6 (layer id) is '007'"));
  EXPECT_THAT(ParseError("m@1@0@ff@half@3@notag"),
              AllOf(HasSubstr("field 7 (tag) is 'notag'"), HasSubstr("needs a '%'")));
  EXPECT_THAT(ParseError("m@1@0@ff@half@%v"), HasSubstr("field 6 (tag) is '%v'"));
  EXPECT_THAT(ParseError("m@1@0@ff@half@a%b@4"), HasSubstr("field 7 (tag) is '4'"));
}

TEST(CacheKeyTest, LegacyErrorsCountTheFormatField) {
  EXPECT_THAT(ParseError("@m@1@0@ff@half"), HasSubstr("field 1 (format) is ''"));
  EXPECT_THAT(ParseError("vllm@m@x@0@ff@half"), HasSubstr("field 3 (world_size) is 'x'"));
  EXPECT_THAT(ParseError("vllm@m@1@0@fg@half"), HasSubstr("field 5 (chunk hash) is 'fg'"));
}

TEST(CacheKeyTest, LongKeysAreCutInMessages) {
  std::string text = std::string(5000, 'm') + "@1@0@zz@half";
  std::string msg = ParseError(text);
  EXPECT_THAT(msg, HasSubstr("...' (5012 bytes)"));
  EXPECT_LT(msg.size(), 600u);
}

TEST(CacheKeyTest, ValidateNamesTheUnwritableField) {
  EXPECT_TRUE(SampleKey().Validate().ok());
  auto error_of = [](auto mutate) {
    CacheKey key = SampleKey();
    mutate(key);
    Status s = key.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    return s.message();
  };
  EXPECT_THAT(error_of([](CacheKey& k) { k.model_name = ""; }), HasSubstr("model name"));
  EXPECT_THAT(error_of([](CacheKey& k) { k.model_name = "a@b"; }),
              AllOf(HasSubstr("'a@b'"), HasSubstr("contains '@'")));
  EXPECT_THAT(error_of([](CacheKey& k) { k.world_size = 0; }), HasSubstr("world_size '0'"));
  EXPECT_THAT(error_of([](CacheKey& k) { k.worker_id = -2; }), HasSubstr("worker_id '-2'"));
  EXPECT_THAT(error_of([](CacheKey& k) { k.layer_id = -1; }), HasSubstr("layer id '-1'"));
  EXPECT_THAT(error_of([](CacheKey& k) { k.tags = {{"", "v"}}; }), HasSubstr("tag name ''"));
  EXPECT_THAT(error_of([](CacheKey& k) { k.tags = {{"a%b", "v"}}; }), HasSubstr("tag name"));
  EXPECT_THAT(error_of([](CacheKey& k) { k.tags = {{"a", "v@w"}}; }), HasSubstr("tag value"));
  EXPECT_THAT(error_of([](CacheKey& k) { k.dtype = static_cast<KeyDtype>(99); }),
              HasSubstr("dtype"));
}

TEST(CacheKeyTest, ValidKeysRoundTrip) {
  // A small grid over every optional part: Parse(ToString(k)) == k and the text is stable.
  for (int layer = -1; layer < 2; ++layer) {
    for (int ntags = 0; ntags < 3; ++ntags) {
      for (uint64_t hash : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}, uint64_t{1} << 63}) {
        for (bool is_signed : {false, true}) {
          CacheKey key = SampleKey();
          key.chunk_hash = hash;
          key.chunk_hash_signed = is_signed;
          if (layer >= 0) key.layer_id = layer;
          for (int t = 0; t < ntags; ++t) {
            key.tags.push_back({"t" + std::to_string(t), "v%" + std::to_string(t)});
          }
          ASSERT_TRUE(key.Validate().ok());
          CacheKey back = MustParse(key.ToString());
          EXPECT_EQ(back, key) << key.ToString();
          EXPECT_EQ(back.ToString(), key.ToString());
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvport
