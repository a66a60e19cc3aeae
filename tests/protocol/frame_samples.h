// SPDX-License-Identifier: Apache-2.0
// Valid frames of every opcode and direction, built with the encoders: the round-trip and
// truncation tests iterate over them and the fuzzer's seed corpus is made of them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvport/status.h"
#include "protocol/limits.h"

namespace kvport::protocol::testing {

struct SampleFrame {
  std::string name;   // e.g. "mset_request"; also the seed file name
  std::string bytes;  // header + descriptor + payload
};

// At least one request and one response per opcode, an ERROR response, a meta-only MGET and an
// MGET response mixing hits, misses and a too-small buffer, all version 1; then version 2 frames
// (names "v2_..."), among them the any-namespace MGET (plain and meta-only), MEXIST and MDEL
// requests; then version 3 frames (names "v3_..."): both directions of NODE_INFO and every
// SHM_ATTACH and ARENA_* opcode (granted and refused attach, reservations and gets with and without
// hits, an any-namespace ARENA_GET) and older opcodes in version 3 frames; then both directions of
// UCX_ATTACH in version 9 frames (names "v9_...", granted and refused); then version 10 frames
// (names "v10_...") of every message that carries checksums (MSET and ARENA_RESERVE requests with
// and without them, MGET responses plain and meta-only, ARENA_COMMIT requests with and without
// them, ARENA_GET responses with and without hits) and of unchanged ones. Encoded with default
// Limits.
std::vector<SampleFrame> SampleFrames();

// Decodes `frame` as one complete frame (SplitFrame, then DecodeAnyRequest/DecodeAnyResponse by
// the response flag) and returns the decode status. When it succeeds, re-encodes the decoded
// message with the same request id and version (payload spans pointing into `frame`) and stores
// the flattened result in *reencoded: for a valid frame it equals `frame` byte for byte, since
// every field has exactly one encoding.
Status DecodeAndReencode(std::string_view frame, const Limits& limits, std::string* reencoded);

}  // namespace kvport::protocol::testing
