// SPDX-License-Identifier: Apache-2.0
// Explicit little-endian encoding of fixed-width integers, independent of the host's byte order
// and alignment (LevelDB's coding.h idea). The formats of src/formats/ (RemoteMetadata, the chunk
// hash input) are defined in these terms.
#pragma once

#include <cstdint>

namespace kvport::formats_internal {

inline void PutU32LE(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

inline void PutI32LE(uint8_t* p, int32_t v) {
  PutU32LE(p, static_cast<uint32_t>(v));
}

inline void PutU64LE(uint8_t* p, uint64_t v) {
  PutU32LE(p, static_cast<uint32_t>(v));
  PutU32LE(p + 4, static_cast<uint32_t>(v >> 32));
}

inline uint32_t GetU32LE(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Two's complement: the conversion from uint32_t is well defined in C++20.
inline int32_t GetI32LE(const uint8_t* p) {
  return static_cast<int32_t>(GetU32LE(p));
}

}  // namespace kvport::formats_internal
