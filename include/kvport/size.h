// SPDX-License-Identifier: Apache-2.0
// Byte sizes with units, as written in configuration files and on the command line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvport/export.h"
#include "kvport/status.h"

namespace kvport {

// The unit a bare number is read in. Each config key documents its own (LMCache's
// max_local_cpu_size is GiB; a node's capacity is bytes).
enum class SizeUnit { kBytes, kKiB, kMiB, kGiB, kTiB };

// Parses "512GiB", "512 GiB", "1.5TiB", "64MB" (decimal: 64 * 10^6), "64MiB", "4096" (a bare
// number, read in `bare_unit`), "0.5" (fractions allowed; the result is rounded down to whole
// bytes, exactly: "0.1KiB" is 102). Exponents are accepted ("1e9"). Leading and trailing
// whitespace, and whitespace between number and unit, are ignored. Units are case-insensitive:
// B (also "byte", "bytes"), K/KB, M/MB, G/GB, T/TB are powers of 1000 and KiB, MiB, GiB, TiB
// powers of 1024. Errors (InvalidArgument) quote the text and name the problem: empty text,
// negative, NaN/inf, no number, an unknown unit (listing the known ones), or a value that
// overflows 2^64 - 1 bytes (saying about how large it is, e.g. "about 476.8 EiB", and in which
// unit the number was read).
KVPORT_API Result<uint64_t> ParseSize(std::string_view text, SizeUnit bare_unit);

// Human-readable, binary units (B, KiB, ... EiB), at most 4 significant digits, trailing zeros
// dropped: "0 B", "1000 B", 4096 bytes is "4 KiB", "1.5 TiB", "476.8 EiB". Exact multiples print
// without decimals; other values are rounded to nearest, so the text is for people, not parsing.
KVPORT_API std::string FormatSize(uint64_t bytes);
// Same for a value that may exceed 2^64 (e.g. an explanation of an overflowing config value):
// continues to ZiB and YiB; negative values get a '-', NaN and infinity print "NaN B", "inf B".
KVPORT_API std::string FormatSize(long double bytes);

// Name of a SizeUnit as written in docs and messages: "bytes", "KiB", "MiB", "GiB", "TiB".
KVPORT_API std::string_view SizeUnitName(SizeUnit unit);

}  // namespace kvport
