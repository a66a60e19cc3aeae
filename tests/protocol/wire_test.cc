// SPDX-License-Identifier: Apache-2.0
#include "protocol/wire.h"

#include <gtest/gtest.h>

#include <string>

namespace kvport::protocol {
namespace {

TEST(WireTest, LittleEndianLayoutIsExplicit) {
  std::string out;
  WireWriter w(&out);
  w.PutU8(0xAB);
  w.PutU16(0x0102);
  w.PutU32(0x03040506);
  w.PutU64(0x0708090A0B0C0D0Eull);
  w.PutBytes("xy");
  const std::string expected("\xAB\x02\x01\x06\x05\x04\x03\x0E\x0D\x0C\x0B\x0A\x09\x08\x07xy", 17);
  EXPECT_EQ(out, expected);
}

TEST(WireTest, ReadsHandWrittenBytes) {
  const std::string bytes(
      "\xFF\x34\x12\x78\x56\x34\x12\xEF\xCD\xAB\x89\x67\x45\x23\x01"
      "abc",
      18);
  WireReader r(bytes, "test");
  uint8_t a = 0;
  uint16_t b = 0;
  uint32_t c = 0;
  uint64_t d = 0;
  std::string_view e;
  ASSERT_TRUE(r.ReadU8("a", &a).ok());
  ASSERT_TRUE(r.ReadU16("b", &b).ok());
  ASSERT_TRUE(r.ReadU32("c", &c).ok());
  ASSERT_TRUE(r.ReadU64("d", &d).ok());
  ASSERT_TRUE(r.ReadBytes("e", 3, &e).ok());
  EXPECT_EQ(a, 0xFF);
  EXPECT_EQ(b, 0x1234);
  EXPECT_EQ(c, 0x12345678u);
  EXPECT_EQ(d, 0x0123456789ABCDEFull);
  EXPECT_EQ(e, "abc");
  EXPECT_TRUE(r.ExpectEnd().ok());
}

TEST(WireTest, HighBitBytesDoNotSignExtend) {
  const std::string bytes(8, '\xFF');
  EXPECT_EQ(LoadLE16(bytes.data()), 0xFFFF);
  EXPECT_EQ(LoadLE32(bytes.data()), 0xFFFFFFFFu);
  EXPECT_EQ(LoadLE64(bytes.data()), ~0ull);
}

TEST(WireTest, TruncatedReadNamesFieldAndKeepsPosition) {
  const std::string bytes("\x01\x02\x03", 3);
  WireReader r(bytes, "MSET request");
  uint32_t v = 0;
  Status s = r.ReadU32("ttl_seconds", &v);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("MSET request"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("ttl_seconds"), std::string::npos) << s.ToString();
  EXPECT_EQ(r.offset(), 0u);
  std::string_view view;
  EXPECT_EQ(r.ReadBytes("key", ~0ull, &view).code(), StatusCode::kCorruption);
  uint16_t w = 0;
  EXPECT_TRUE(r.ReadU16("x", &w).ok());
  Status trailing = r.ExpectEnd();
  EXPECT_EQ(trailing.code(), StatusCode::kCorruption);
  EXPECT_NE(trailing.message().find("trailing"), std::string::npos);
}

}  // namespace
}  // namespace kvport::protocol
