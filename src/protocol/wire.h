// SPDX-License-Identifier: Apache-2.0
// Little-endian wire primitives: bounded readers and appending writers.
//
// Every multi-byte integer on the kvport wire is little-endian and is assembled byte by byte
// here, never by copying a struct or relying on the host's byte order, so the same bytes decode
// to the same values on x86-64 and aarch64. WireReader never reads past the end of its input:
// a short input is a Corruption Status whose message names the field being read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvport/status.h"

namespace kvport::protocol {

// Stores `v` as little-endian bytes at `p` (which must have room for them).
inline void StoreLE16(char* p, uint16_t v) {
  p[0] = static_cast<char>(v & 0xff);
  p[1] = static_cast<char>(v >> 8);
}
inline void StoreLE32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
inline void StoreLE64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// Loads a little-endian integer from `p` (which must hold enough bytes).
inline uint16_t LoadLE16(const char* p) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) |
                               (static_cast<uint16_t>(static_cast<uint8_t>(p[1])) << 8));
}
inline uint32_t LoadLE32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
inline uint64_t LoadLE64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Appends wire values to a string it does not own. Never fails (the string grows).
class WireWriter {
 public:
  explicit WireWriter(std::string* out) : out_(out) {}

  void PutU8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void PutU16(uint16_t v) {
    char b[2];
    StoreLE16(b, v);
    out_->append(b, 2);
  }
  void PutU32(uint32_t v) {
    char b[4];
    StoreLE32(b, v);
    out_->append(b, 4);
  }
  void PutU64(uint64_t v) {
    char b[8];
    StoreLE64(b, v);
    out_->append(b, 8);
  }
  void PutBytes(std::string_view bytes) { out_->append(bytes.data(), bytes.size()); }

  // Bytes in the target string (including what was there before this writer).
  size_t size() const { return out_->size(); }

 private:
  std::string* out_;
};

// Reads wire values from a byte range it does not own, front to back. Each Read* either fills
// its output and advances, or returns Corruption naming `context` and the field and leaves the
// position unchanged. Views returned by ReadBytes point into the input.
class WireReader {
 public:
  // `context` prefixes every error message, e.g. "MSET request".
  WireReader(std::string_view bytes, std::string_view context) : bytes_(bytes), context_(context) {}

  Status ReadU8(std::string_view field, uint8_t* v);
  Status ReadU16(std::string_view field, uint16_t* v);
  Status ReadU32(std::string_view field, uint32_t* v);
  Status ReadU64(std::string_view field, uint64_t* v);
  // Reads `n` raw bytes as a view into the input.
  Status ReadBytes(std::string_view field, uint64_t n, std::string_view* v);

  // Corruption ("trailing bytes") unless every byte was consumed.
  Status ExpectEnd() const;

  size_t offset() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  std::string_view context() const { return context_; }

  // A Status of `code` whose message is "<context>: <message>"; for callers that validate a
  // value they just read (e.g. a count that exceeds a limit).
  Status Error(StatusCode code, std::string_view message) const;

 private:
  Status Truncated(std::string_view field, uint64_t need) const;

  std::string_view bytes_;
  std::string_view context_;
  size_t pos_ = 0;
};

}  // namespace kvport::protocol
