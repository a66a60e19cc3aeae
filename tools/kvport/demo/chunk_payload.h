// SPDX-License-Identifier: Apache-2.0
// The demo's stand-in for KV tensors: chunk bytes computed from the chunk's hash.
//
// "Prefill" of a chunk fills its payload from its chain hash, so any later read of that chunk,
// by any process, can be checked byte for byte against the hash alone: a chunk served under the
// wrong key, truncated, or damaged anywhere fails VerifyChunkPayload.
#pragma once

#include <cstdint>
#include <span>

namespace kvport::demo {

// Writes the payload of the chunk named by `hash`: 64-bit words of a counter-based SplitMix64
// stream keyed by the hash, little-endian, the last word cut to fit.
void FillChunkPayload(uint64_t hash, std::span<uint8_t> out);

// True when `bytes` is exactly what FillChunkPayload(hash, ...) writes for that size.
bool VerifyChunkPayload(uint64_t hash, std::span<const uint8_t> bytes);

}  // namespace kvport::demo
