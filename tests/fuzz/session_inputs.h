// SPDX-License-Identifier: Apache-2.0
// The inputs of the session fuzzer (fuzz_session.cc) and what they mean.
//
// An input is one control byte followed by the bytes a client sends on one connection:
//   bits 0-1  how the bytes are fed: 0 byte by byte, 1 in chunks of 1..8 bytes, 2 in chunks of
//             1..64 bytes (chunk sizes from a generator seeded by the input), 3 all at once;
//   bit 2     the connection: 0 TCP, 1 the node's Unix socket (the shared-memory requests);
//   bits 3-4  3: the bytes are sent as they are; otherwise a valid HELLO goes first, so that most
//             inputs reach the states after the handshake;
//   bits 5-7  salt for the chunk generator.
// The seeds are request sequences written with the protocol encoder (protocol/messages.h), so
// they follow the protocol as it changes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/limits.h"

namespace kvport::fuzz {

inline constexpr uint8_t kFeedByteByByte = 0;
inline constexpr uint8_t kFeedSmallChunks = 1;
inline constexpr uint8_t kFeedChunks = 2;
inline constexpr uint8_t kFeedAtOnce = 3;
inline constexpr uint8_t kUnixSocket = 1 << 2;
inline constexpr uint8_t kNoHello = 3 << 3;

// The limits of the fuzzed node: small, so that short inputs reach every limit check.
protocol::Limits FuzzLimits();

// A valid HELLO request (what the driver sends first unless the control byte says not to).
std::string HelloFrame();

struct SeedInput {
  std::string name;
  std::string bytes;  // control byte first
};
// Request sequences: every request type, a truncated MSET, a malformed frame after valid
// ones, the shared-memory requests on the Unix socket; each fed in several ways.
std::vector<SeedInput> SeedInputs();

}  // namespace kvport::fuzz
