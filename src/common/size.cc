// SPDX-License-Identifier: Apache-2.0
#include "kvport/size.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <string>

namespace kvport {
namespace {

struct UnitSpelling {
  std::string_view lower_name;  // as matched, after lowercasing the input
  uint64_t multiplier;
};

// Every accepted unit spelling, matched case-insensitively. The decimal ones follow SI (and
// LMCache's documentation of "MB" means 10^6); the binary ones are the IEC names.
constexpr UnitSpelling kUnits[] = {
    {"b", 1},
    {"byte", 1},
    {"bytes", 1},
    {"k", 1000ULL},
    {"kb", 1000ULL},
    {"m", 1000ULL * 1000},
    {"mb", 1000ULL * 1000},
    {"g", 1000ULL * 1000 * 1000},
    {"gb", 1000ULL * 1000 * 1000},
    {"t", 1000ULL * 1000 * 1000 * 1000},
    {"tb", 1000ULL * 1000 * 1000 * 1000},
    {"kib", 1ULL << 10},
    {"mib", 1ULL << 20},
    {"gib", 1ULL << 30},
    {"tib", 1ULL << 40},
};

constexpr std::string_view kKnownUnits =
    "B, K/KB, M/MB, G/GB, T/TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), "
    "case-insensitive";

uint64_t Multiplier(SizeUnit unit) {
  switch (unit) {
    case SizeUnit::kBytes:
      return 1;
    case SizeUnit::kKiB:
      return 1ULL << 10;
    case SizeUnit::kMiB:
      return 1ULL << 20;
    case SizeUnit::kGiB:
      return 1ULL << 30;
    case SizeUnit::kTiB:
      return 1ULL << 40;
  }
  return 1;
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v';
}
bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}
bool IsAlpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
char ToLower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = ToLower(c);
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back()))
    s.remove_suffix(1);
  return s;
}

// floor(0.<frac_digits> * multiplier), exactly, for any number of digits: schoolbook
// multiplication of the decimal fraction by `multiplier`, keeping only the carry out of the
// units position. Each step is floor(suffix * multiplier / 10^k), so no precision is lost.
uint64_t FloorFractionTimes(std::string_view frac_digits, uint64_t multiplier) {
  uint64_t carry = 0;  // always < multiplier, so d * multiplier + carry < 10 * multiplier
  for (auto it = frac_digits.rbegin(); it != frac_digits.rend(); ++it) {
    carry = (static_cast<uint64_t>(*it - '0') * multiplier + carry) / 10;
  }
  return carry;
}

// Formats v (>= 0, finite) with at most 4 significant digits and no trailing zeros.
std::string FormatSignificant(long double v) {
  int decimals = v < 10 ? 3 : v < 100 ? 2 : v < 1000 ? 1 : 0;
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0')
      s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

}  // namespace

std::string_view SizeUnitName(SizeUnit unit) {
  switch (unit) {
    case SizeUnit::kBytes:
      return "bytes";
    case SizeUnit::kKiB:
      return "KiB";
    case SizeUnit::kMiB:
      return "MiB";
    case SizeUnit::kGiB:
      return "GiB";
    case SizeUnit::kTiB:
      return "TiB";
  }
  return "bytes";
}

Result<uint64_t> ParseSize(std::string_view text, SizeUnit bare_unit) {
  const std::string_view t = Trim(text);
  const std::string_view bare_name = SizeUnitName(bare_unit);
  if (t.empty()) {
    return Status::InvalidArgument(
        fmt::format("size is empty: expected a number with an optional unit, such as 512GiB, "
                    "1.5 TiB or 4096 (a bare number is read in {})",
                    bare_name));
  }

  size_t pos = 0;
  if (t[0] == '-') {
    return Status::InvalidArgument(
        fmt::format("size '{}' is negative: a size must be zero or more", t));
  }
  if (t[0] == '+') pos = 1;

  const std::string lower = Lower(t.substr(pos));
  if (lower.starts_with("nan")) {
    return Status::InvalidArgument(
        fmt::format("size '{}' is not a number (NaN): expected a finite number such as 512GiB", t));
  }
  if (lower.starts_with("inf")) {
    return Status::InvalidArgument(
        fmt::format("size '{}' is infinite: expected a finite number such as 512GiB", t));
  }

  // Number: digits [. digits] [e|E [+|-] digits]. Parsed by hand (not strtod) so that an
  // integer such as 2^64 - 1 keeps every digit and a fraction is rounded down exactly.
  const size_t number_begin = pos;
  size_t int_begin = pos;
  while (pos < t.size() && IsDigit(t[pos]))
    ++pos;
  std::string_view int_digits = t.substr(int_begin, pos - int_begin);
  std::string_view frac_digits;
  if (pos < t.size() && t[pos] == '.') {
    size_t frac_begin = ++pos;
    while (pos < t.size() && IsDigit(t[pos]))
      ++pos;
    frac_digits = t.substr(frac_begin, pos - frac_begin);
  }
  if (int_digits.empty() && frac_digits.empty()) {
    return Status::InvalidArgument(
        fmt::format("size '{}' does not start with a number: expected digits such as 512GiB, "
                    "1.5 TiB or 4096",
                    t));
  }
  int64_t exponent = 0;
  if (pos < t.size() && (t[pos] == 'e' || t[pos] == 'E')) {
    size_t p = pos + 1;
    bool negative_exponent = false;
    if (p < t.size() && (t[p] == '+' || t[p] == '-')) negative_exponent = t[p++] == '-';
    if (p < t.size() && IsDigit(t[p])) {
      while (p < t.size() && IsDigit(t[p])) {
        // Saturate: any exponent past 10^6 is as good as infinite for a 20-digit result.
        if (exponent < 1000000) exponent = exponent * 10 + (t[p] - '0');
        ++p;
      }
      if (negative_exponent) exponent = -exponent;
      pos = p;
    }  // else the 'e' is not an exponent: it starts the unit (and is reported as unknown)
  }
  const std::string_view number = t.substr(number_begin, pos - number_begin);

  while (pos < t.size() && IsSpace(t[pos]))
    ++pos;
  const std::string_view unit_text = t.substr(pos);
  uint64_t multiplier = Multiplier(bare_unit);
  // How the number was read, for the overflow message.
  std::string read_as = fmt::format("{} read in {} (the unit of a bare number)", number, bare_name);
  if (!unit_text.empty()) {
    if (!IsAlpha(unit_text[0])) {
      return Status::InvalidArgument(
          fmt::format("size '{}' has unexpected '{}' after the number '{}': expected a unit "
                      "({}) or nothing",
                      t, unit_text, number, kKnownUnits));
    }
    const std::string unit_lower = Lower(unit_text);
    bool found = false;
    for (const UnitSpelling& u : kUnits) {
      if (u.lower_name == unit_lower) {
        multiplier = u.multiplier;
        found = true;
        break;
      }
    }
    if (!found) {
      return Status::InvalidArgument(
          fmt::format("size '{}' has an unknown unit '{}': expected one of {}, or no unit "
                      "(a bare number is read in {})",
                      t, unit_text, kKnownUnits, bare_name));
    }
    read_as = fmt::format("{} {}", number, unit_text);
  }

  // value = 0.<digits> * 10^point. Leading zeros carry no information; drop them.
  std::string digits = std::string(int_digits) + std::string(frac_digits);
  int64_t point = static_cast<int64_t>(int_digits.size()) + exponent;
  size_t first_nonzero = digits.find_first_not_of('0');
  if (first_nonzero == std::string::npos) return uint64_t{0};
  digits.erase(0, first_nonzero);
  point -= static_cast<int64_t>(first_nonzero);

  auto too_large = [&]() -> Status {
    long double approx =
        std::strtold(std::string(number).c_str(), nullptr) * static_cast<long double>(multiplier);
    std::string approx_text = std::isfinite(approx) ? fmt::format("about {}", FormatSize(approx))
                                                    : "astronomically large";
    return Status::InvalidArgument(
        fmt::format("size '{}' is too large: {} is {}, more than the largest size of 16 EiB "
                    "(2^64 - 1 bytes)",
                    t, read_as, approx_text));
  };

  // The integer part has `point` digits, the first non-zero: more than 20 cannot fit 64 bits.
  if (point > 20) return too_large();
  unsigned __int128 total = 0;
  if (point > 0) {
    std::string int_part = digits.substr(0, static_cast<size_t>(point));
    int_part.resize(static_cast<size_t>(point), '0');  // 1e3 -> "1" -> "1000"
    unsigned __int128 int_value = 0;
    for (char c : int_part)
      int_value = int_value * 10 + static_cast<unsigned>(c - '0');
    total = int_value * multiplier;  // < 10^20 * 2^40 < 2^107: no overflow in 128 bits
  }
  // Fraction digits below 10^-40 cannot reach a whole byte (multiplier < 2^41 < 10^13).
  if (point > -40) {
    std::string frac_part;
    if (point < 0) frac_part.assign(static_cast<size_t>(-point), '0');
    if (point < static_cast<int64_t>(digits.size())) {
      frac_part += digits.substr(static_cast<size_t>(std::max<int64_t>(point, 0)));
    }
    total += FloorFractionTimes(frac_part, multiplier);
  }
  if (total > std::numeric_limits<uint64_t>::max()) return too_large();
  return static_cast<uint64_t>(total);
}

std::string FormatSize(uint64_t bytes) {
  // long double holds every uint64_t exactly (x87 64-bit mantissa; binary128 on aarch64).
  return FormatSize(static_cast<long double>(bytes));
}

std::string FormatSize(long double bytes) {
  if (std::isnan(bytes)) return "NaN B";
  if (bytes < 0) return "-" + FormatSize(-bytes);
  if (std::isinf(bytes)) return "inf B";
  static constexpr std::string_view kNames[] = {"B",   "KiB", "MiB", "GiB", "TiB",
                                                "PiB", "EiB", "ZiB", "YiB"};
  constexpr size_t kLast = std::size(kNames) - 1;
  size_t unit = 0;
  long double v = bytes;
  while (v >= 1024 && unit < kLast) {
    v /= 1024;  // exact: a power-of-two division only changes the exponent
    ++unit;
  }
  if (v >= 1024) return fmt::format("{:.4g} {}", v, kNames[kLast]);
  return fmt::format("{} {}", FormatSignificant(v), kNames[unit]);
}

}  // namespace kvport
