// SPDX-License-Identifier: Apache-2.0
#include "demo/chunk_payload.h"

#include <cstring>

namespace kvport::demo {
namespace {

// Word i of chunk `hash`. Counter-based (each word computed from its index), so filling and
// checking need no state and run at memory speed.
inline uint64_t Word(uint64_t hash, uint64_t i) {
  uint64_t z = hash + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The word's bytes in little-endian order, whatever the host's byte order.
inline void StoreLe(uint64_t w, uint8_t* out, size_t n) {
  for (size_t b = 0; b < n; ++b)
    out[b] = static_cast<uint8_t>(w >> (8 * b));
}

inline uint64_t LoadLe(const uint8_t* in) {
  uint64_t w = 0;
  for (size_t b = 0; b < 8; ++b)
    w |= static_cast<uint64_t>(in[b]) << (8 * b);
  return w;
}

}  // namespace

void FillChunkPayload(uint64_t hash, std::span<uint8_t> out) {
  const size_t words = out.size() / 8;
  for (size_t i = 0; i < words; ++i)
    StoreLe(Word(hash, i), out.data() + 8 * i, 8);
  if (const size_t tail = out.size() % 8; tail != 0) {
    StoreLe(Word(hash, words), out.data() + 8 * words, tail);
  }
}

bool VerifyChunkPayload(uint64_t hash, std::span<const uint8_t> bytes) {
  const size_t words = bytes.size() / 8;
  for (size_t i = 0; i < words; ++i) {
    if (LoadLe(bytes.data() + 8 * i) != Word(hash, i)) return false;
  }
  if (const size_t tail = bytes.size() % 8; tail != 0) {
    uint8_t want[8];
    StoreLe(Word(hash, words), want, tail);
    return std::memcmp(want, bytes.data() + 8 * words, tail) == 0;
  }
  return true;
}

}  // namespace kvport::demo
