// SPDX-License-Identifier: Apache-2.0
#include "kvport/size.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kvport {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t kKiB = 1ULL << 10;
constexpr uint64_t kMiB = 1ULL << 20;
constexpr uint64_t kGiB = 1ULL << 30;
constexpr uint64_t kTiB = 1ULL << 40;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// Parses `text` and expects success; returns the byte count (0 after a reported failure).
uint64_t Parse(std::string_view text, SizeUnit bare = SizeUnit::kBytes) {
  Result<uint64_t> r = ParseSize(text, bare);
  EXPECT_TRUE(r.ok()) << "'" << text << "': " << r.status().ToString();
  return r.ok() ? *r : 0;
}

// Parses `text` and expects an InvalidArgument; returns its message.
std::string ParseError(std::string_view text, SizeUnit bare = SizeUnit::kBytes) {
  Result<uint64_t> r = ParseSize(text, bare);
  EXPECT_FALSE(r.ok()) << "'" << text << "' parsed as " << (r.ok() ? *r : 0);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(ParseSizeTest, BinaryUnits) {
  EXPECT_EQ(Parse("512GiB"), 512 * kGiB);
  EXPECT_EQ(Parse("1KiB"), kKiB);
  EXPECT_EQ(Parse("64MiB"), 64 * kMiB);
  EXPECT_EQ(Parse("3TiB"), 3 * kTiB);
}

TEST(ParseSizeTest, DecimalUnits) {
  EXPECT_EQ(Parse("64MB"), 64'000'000u);
  EXPECT_EQ(Parse("64M"), 64'000'000u);
  EXPECT_EQ(Parse("2KB"), 2'000u);
  EXPECT_EQ(Parse("2K"), 2'000u);
  EXPECT_EQ(Parse("5GB"), 5'000'000'000u);
  EXPECT_EQ(Parse("5G"), 5'000'000'000u);
  EXPECT_EQ(Parse("1TB"), 1'000'000'000'000u);
  EXPECT_EQ(Parse("1T"), 1'000'000'000'000u);
  EXPECT_EQ(Parse("7B"), 7u);
  EXPECT_EQ(Parse("7 bytes"), 7u);
  EXPECT_EQ(Parse("1 byte"), 1u);
  // The same digits in the two systems differ: 64 MB < 64 MiB.
  EXPECT_LT(Parse("64MB"), Parse("64MiB"));
}

TEST(ParseSizeTest, UnitsAreCaseInsensitive) {
  EXPECT_EQ(Parse("512gib"), 512 * kGiB);
  EXPECT_EQ(Parse("512GIB"), 512 * kGiB);
  EXPECT_EQ(Parse("64mb"), 64'000'000u);
  EXPECT_EQ(Parse("1k"), 1'000u);
  EXPECT_EQ(Parse("3 BYTES"), 3u);
}

TEST(ParseSizeTest, Whitespace) {
  EXPECT_EQ(Parse("512 GiB"), 512 * kGiB);
  EXPECT_EQ(Parse("512\tGiB"), 512 * kGiB);
  EXPECT_EQ(Parse("  512GiB  "), 512 * kGiB);
  EXPECT_EQ(Parse("\n4096\n"), 4096u);
}

TEST(ParseSizeTest, Fractions) {
  EXPECT_EQ(Parse("1.5TiB"), kTiB + kTiB / 2);
  EXPECT_EQ(Parse("0.5", SizeUnit::kGiB), kGiB / 2);
  EXPECT_EQ(Parse(".5", SizeUnit::kGiB), kGiB / 2);
  EXPECT_EQ(Parse("2.", SizeUnit::kGiB), 2 * kGiB);
  EXPECT_EQ(Parse("5.0", SizeUnit::kGiB), 5 * kGiB);  // LMCache's max_local_cpu_size default
  // Rounded down to whole bytes, exactly (no binary floating-point error).
  EXPECT_EQ(Parse("0.1KiB"), 102u);  // 102.4
  EXPECT_EQ(Parse("0.3KB"), 300u);   // 0.3 * 1000 is 299.99999999999997 in double
  EXPECT_EQ(Parse("0.7"), 0u);       // less than a byte
  EXPECT_EQ(Parse("1.999999999999999999999999999", SizeUnit::kBytes), 1u);
  EXPECT_EQ(Parse("0.000000000000000000000000000001TiB"), 0u);
}

TEST(ParseSizeTest, Exponents) {
  EXPECT_EQ(Parse("1e9"), 1'000'000'000u);
  EXPECT_EQ(Parse("1E3 KiB"), 1000 * kKiB);
  EXPECT_EQ(Parse("1.5e3"), 1500u);
  EXPECT_EQ(Parse("25e-1 GiB"), 2 * kGiB + kGiB / 2);
  EXPECT_EQ(Parse("5e+2"), 500u);
  EXPECT_EQ(Parse("1e-400 TiB"), 0u);
}

TEST(ParseSizeTest, BareNumberInEachUnit) {
  EXPECT_EQ(Parse("4096", SizeUnit::kBytes), 4096u);
  EXPECT_EQ(Parse("4096", SizeUnit::kKiB), 4096 * kKiB);
  EXPECT_EQ(Parse("4096", SizeUnit::kMiB), 4096 * kMiB);
  EXPECT_EQ(Parse("4096", SizeUnit::kGiB), 4096 * kGiB);
  EXPECT_EQ(Parse("4096", SizeUnit::kTiB), 4096 * kTiB);
  // An explicit unit wins over the bare unit.
  EXPECT_EQ(Parse("4096B", SizeUnit::kGiB), 4096u);
  EXPECT_EQ(Parse("1MB", SizeUnit::kTiB), 1'000'000u);
}

TEST(ParseSizeTest, ZeroAndSign) {
  EXPECT_EQ(Parse("0"), 0u);
  EXPECT_EQ(Parse("0GiB"), 0u);
  EXPECT_EQ(Parse("0.0"), 0u);
  EXPECT_EQ(Parse("+5KiB"), 5 * kKiB);
  EXPECT_EQ(Parse("000123"), 123u);
}

TEST(ParseSizeTest, LimitsOf64Bits) {
  EXPECT_EQ(Parse("18446744073709551615"), kMax);  // every digit kept: no rounding to 2^64
  EXPECT_EQ(Parse("16777215.999999999999TiB"), 16777215 * kTiB + kTiB - 2);
  EXPECT_EQ(Parse("17179869183GiB"), 17179869183ULL * kGiB);

  EXPECT_THAT(ParseError("18446744073709551616"),
              AllOf(HasSubstr("'18446744073709551616'"), HasSubstr("too large"),
                    HasSubstr("2^64 - 1 bytes")));
  EXPECT_THAT(ParseError("16777216TiB"), HasSubstr("about 16 EiB"));
  EXPECT_THAT(ParseError("17179869184", SizeUnit::kGiB), HasSubstr("too large"));
  EXPECT_THAT(ParseError("100000000000000000000000"), HasSubstr("too large"));
}

TEST(ParseSizeTest, BytesReadAsGiBExplainsTheSize) {
  // The config bug that started the project: 512000000000 meant bytes, read as GiB.
  std::string msg = ParseError("512000000000", SizeUnit::kGiB);
  EXPECT_THAT(msg, AllOf(HasSubstr("'512000000000'"), HasSubstr("about 476.8 EiB"),
                         HasSubstr("read in GiB"), HasSubstr("too large")));
}

TEST(ParseSizeTest, HugeExponentIsTooLarge) {
  EXPECT_THAT(ParseError("1e400"), AllOf(HasSubstr("'1e400'"), HasSubstr("too large")));
  EXPECT_THAT(ParseError("1e25"), HasSubstr("about 8.272 YiB"));
  EXPECT_THAT(ParseError("9e999999999999999999"), HasSubstr("too large"));
}

TEST(ParseSizeTest, EmptyIsAnError) {
  EXPECT_THAT(ParseError(""), AllOf(HasSubstr("empty"), HasSubstr("512GiB")));
  EXPECT_THAT(ParseError("   "), HasSubstr("empty"));
  EXPECT_THAT(ParseError("", SizeUnit::kGiB), HasSubstr("read in GiB"));
}

TEST(ParseSizeTest, NegativeIsAnError) {
  EXPECT_THAT(ParseError("-5GiB"), AllOf(HasSubstr("'-5GiB'"), HasSubstr("negative")));
  EXPECT_THAT(ParseError("-0"), HasSubstr("negative"));
  EXPECT_THAT(ParseError(" -1"), HasSubstr("negative"));
}

TEST(ParseSizeTest, NanAndInfAreErrors) {
  EXPECT_THAT(ParseError("nan"), AllOf(HasSubstr("'nan'"), HasSubstr("not a number")));
  EXPECT_THAT(ParseError("NaN GiB"), HasSubstr("not a number"));
  EXPECT_THAT(ParseError("inf"), AllOf(HasSubstr("'inf'"), HasSubstr("infinite")));
  EXPECT_THAT(ParseError("+Infinity"), HasSubstr("infinite"));
  EXPECT_THAT(ParseError("-inf"), HasSubstr("negative"));
}

TEST(ParseSizeTest, UnknownUnitListsTheKnownOnes) {
  std::string msg = ParseError("5 GiBs");
  EXPECT_THAT(msg, AllOf(HasSubstr("unknown unit 'GiBs'"), HasSubstr("'5 GiBs'"),
                         HasSubstr("KiB, MiB, GiB, TiB"), HasSubstr("K/KB, M/MB, G/GB, T/TB")));
  EXPECT_THAT(ParseError("5XB"), HasSubstr("unknown unit 'XB'"));
  EXPECT_THAT(ParseError("5 PiB"), HasSubstr("unknown unit 'PiB'"));
  EXPECT_THAT(ParseError("5e"), HasSubstr("unknown unit 'e'"));  // not an exponent
  EXPECT_THAT(ParseError("5 GiB x"), HasSubstr("unknown unit 'GiB x'"));
}

TEST(ParseSizeTest, MalformedNumbers) {
  EXPECT_THAT(ParseError("GiB"), AllOf(HasSubstr("'GiB'"), HasSubstr("does not start with")));
  EXPECT_THAT(ParseError("."), HasSubstr("does not start with"));
  EXPECT_THAT(ParseError("0x10"), HasSubstr("unknown unit 'x10'"));
  EXPECT_THAT(ParseError("1.2.3"),
              AllOf(HasSubstr("unexpected '.3'"), HasSubstr("after the number '1.2'")));
  EXPECT_THAT(ParseError("5 5"), HasSubstr("unexpected '5'"));
  EXPECT_THAT(ParseError("1,5GiB"), HasSubstr("unexpected ',5GiB'"));
}

TEST(FormatSizeTest, Bytes) {
  EXPECT_EQ(FormatSize(uint64_t{0}), "0 B");
  EXPECT_EQ(FormatSize(uint64_t{1}), "1 B");
  EXPECT_EQ(FormatSize(uint64_t{1000}), "1000 B");
  EXPECT_EQ(FormatSize(uint64_t{1023}), "1023 B");
}

TEST(FormatSizeTest, ExactMultiplesHaveNoDecimals) {
  EXPECT_EQ(FormatSize(uint64_t{1024}), "1 KiB");
  EXPECT_EQ(FormatSize(uint64_t{4096}), "4 KiB");
  EXPECT_EQ(FormatSize(512 * kGiB), "512 GiB");
  EXPECT_EQ(FormatSize(1000 * kKiB), "1000 KiB");
  EXPECT_EQ(FormatSize(uint64_t{1} << 50), "1 PiB");
  EXPECT_EQ(FormatSize(uint64_t{1} << 60), "1 EiB");
}

TEST(FormatSizeTest, FractionsHaveAtMostFourSignificantDigits) {
  EXPECT_EQ(FormatSize(kTiB + kTiB / 2), "1.5 TiB");
  EXPECT_EQ(FormatSize(uint64_t{1536}), "1.5 KiB");
  EXPECT_EQ(FormatSize(uint64_t{1234567}), "1.177 MiB");  // 1.17737...
  EXPECT_EQ(FormatSize(uint64_t{123456789}), "117.7 MiB");
  EXPECT_EQ(FormatSize(kMax), "16 EiB");  // 15.99999... rounds up
}

TEST(FormatSizeTest, LongDoubleBeyond64Bits) {
  EXPECT_EQ(FormatSize(512000000000.0L * kGiB), "476.8 EiB");
  EXPECT_EQ(FormatSize(1024.0L * (uint64_t{1} << 60)), "1 ZiB");
  EXPECT_EQ(FormatSize(1e25L), "8.272 YiB");
  EXPECT_THAT(FormatSize(1e400L), AllOf(HasSubstr("e+"), HasSubstr("YiB")));
  EXPECT_EQ(FormatSize(0.0L), "0 B");
  EXPECT_EQ(FormatSize(-2048.0L), "-2 KiB");
  EXPECT_EQ(FormatSize(std::nanl("")), "NaN B");
  EXPECT_EQ(FormatSize(std::numeric_limits<long double>::infinity()), "inf B");
}

TEST(FormatSizeTest, ExactMultiplesRoundTripThroughParse) {
  for (uint64_t bytes : {uint64_t{0}, uint64_t{7}, kKiB, 3 * kMiB, 512 * kGiB, 6 * kTiB,
                         kTiB + kTiB / 2, 1536 * kMiB}) {
    std::string text = FormatSize(bytes);
    EXPECT_EQ(Parse(text), bytes) << text;
  }
}

TEST(SizeUnitNameTest, Names) {
  EXPECT_EQ(SizeUnitName(SizeUnit::kBytes), "bytes");
  EXPECT_EQ(SizeUnitName(SizeUnit::kKiB), "KiB");
  EXPECT_EQ(SizeUnitName(SizeUnit::kMiB), "MiB");
  EXPECT_EQ(SizeUnitName(SizeUnit::kGiB), "GiB");
  EXPECT_EQ(SizeUnitName(SizeUnit::kTiB), "TiB");
}

}  // namespace
}  // namespace kvport
