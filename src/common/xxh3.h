// SPDX-License-Identifier: Apache-2.0
// The xxh3-64 entry points values are hashed with for their end-to-end checksums (the client's
// at put and get, the node's for what it writes itself): on x86-64 libxxhash's runtime dispatch,
// which takes AVX2 or AVX-512 where the CPU has them (about twice its SSE2 default's rate on
// large values here), elsewhere its default (NEON on aarch64). The hash is the same either way:
// XXH3_64bits of the bytes. Header-only: a library that includes it links libxxhash.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t, for states kept in place
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

namespace kvport {

inline uint64_t Xxh3(const void* data, size_t size) {
#if defined(__x86_64__)
  return XXH3_64bits_dispatch(data, size);
#else
  return XXH3_64bits(data, size);
#endif
}

inline void Xxh3Update(XXH3_state_t* state, const void* data, size_t size) {
#if defined(__x86_64__)
  (void)XXH3_64bits_update_dispatch(state, data, size);
#else
  (void)XXH3_64bits_update(state, data, size);
#endif
}

// Copies `bytes` from `from` to `to` a chunk at a time; with `hash`, hashes each chunk right
// after its copy, from the destination or the source (`hash_destination`), while it is in cache:
// the checksum costs no pass over the value of its own. The digest when hashing, else 0.
inline uint64_t CopyHashing(void* to, const void* from, size_t bytes, bool hash,
                            bool hash_destination) {
  if (!hash) {
    std::memcpy(to, from, bytes);
    return 0;
  }
  constexpr size_t kChunk = 64 << 10;  // well within L2
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  for (size_t done = 0; done < bytes; done += kChunk) {
    const size_t n = std::min(kChunk, bytes - done);
    std::memcpy(static_cast<char*>(to) + done, static_cast<const char*>(from) + done, n);
    Xxh3Update(
        &state,
        (hash_destination ? static_cast<const char*>(to) : static_cast<const char*>(from)) + done,
        n);
  }
  return XXH3_64bits_digest(&state);
}

}  // namespace kvport
