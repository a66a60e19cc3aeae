// SPDX-License-Identifier: Apache-2.0
// The xxh3-64 entry points the client hashes values with (client/value_checksums.h): on x86-64
// libxxhash's runtime dispatch, which takes AVX2 or AVX-512 where the CPU has them (about twice
// its SSE2 default's rate on large values here), elsewhere its default (NEON on aarch64). The
// hash is the same either way: XXH3_64bits of the bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t, for states kept in place
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

namespace kvport::client {

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

}  // namespace kvport::client
