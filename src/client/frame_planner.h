// SPDX-License-Identifier: Apache-2.0
// FramePlanner: splits a batch into frames that fit the node's limits.
//
// The node announces how many keys one request may carry (max_batch_keys) and how large its
// header and descriptor may be (max_frame_bytes). A caller's batch may be larger than either;
// it is sent as several frames, pipelined over the pool's connections. Payload bytes are not
// limited per frame by the protocol, but a frame is also closed at `payload_budget` bytes so
// that a very large batch is spread over several connections instead of queueing behind one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "protocol/limits.h"

namespace kvport::client {

// Items [begin, end) of the planned list go in one frame.
struct FrameSlice {
  size_t begin = 0;
  size_t end = 0;
};

struct FrameCosts {
  // Descriptor bytes item i adds (a safe over-estimate of its encoded size).
  std::function<uint64_t(size_t)> descriptor_bytes;
  // Payload bytes item i adds (value length; 0 for requests without payload).
  std::function<uint64_t(size_t)> payload_bytes;
};

// Conservative bytes of a request's header and fixed descriptor fields (namespace, ttl, count).
inline constexpr uint64_t kFrameFixedBytes = 512;
// Default payload per frame before a new frame is started.
inline constexpr uint64_t kDefaultPayloadBudget = uint64_t{64} << 20;

// Splits `count` items, in order, into slices. Every slice holds at least one item (an item
// too large on its own gets a frame to itself; the encoder then rejects it with the reason).
std::vector<FrameSlice> PlanFrames(size_t count, const FrameCosts& costs,
                                   const protocol::Limits& limits,
                                   uint64_t payload_budget = kDefaultPayloadBudget);

}  // namespace kvport::client
