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
#include <vector>

#include "protocol/limits.h"

namespace kvport::client {

// Items [begin, end) of the planned list go in one frame.
struct FrameSlice {
  size_t begin = 0;
  size_t end = 0;
};

// Conservative bytes of a request's header and fixed descriptor fields (namespace, ttl, count).
inline constexpr uint64_t kFrameFixedBytes = 512;
// Default payload per frame before a new frame is started.
inline constexpr uint64_t kDefaultPayloadBudget = uint64_t{64} << 20;

// Splits `count` items, in order, into slices, replacing *slices (whose capacity it reuses).
// `descriptor_bytes(i)`: the descriptor bytes item i adds (a safe over-estimate of its encoded
// size); `payload_bytes(i)`: the payload bytes it adds (its value length; 0 without payload).
// Every slice holds at least one item (an item too large on its own gets a frame to itself; the
// encoder then rejects it with the reason). A template, so the costs are called directly.
template <typename DescriptorBytes, typename PayloadBytes>
void PlanFrames(size_t count, const DescriptorBytes& descriptor_bytes,
                const PayloadBytes& payload_bytes, const protocol::Limits& limits,
                std::vector<FrameSlice>* slices, uint64_t payload_budget = kDefaultPayloadBudget) {
  slices->clear();
  const uint64_t descriptor_budget =
      limits.max_frame_bytes > kFrameFixedBytes ? limits.max_frame_bytes - kFrameFixedBytes : 0;
  size_t begin = 0;
  while (begin < count) {
    size_t end = begin;
    uint64_t descriptor = 0;
    uint64_t payload = 0;
    while (end < count && end - begin < limits.max_batch_keys) {
      const uint64_t d = descriptor_bytes(end);
      const uint64_t p = payload_bytes(end);
      if (end > begin && (descriptor + d > descriptor_budget || payload + p > payload_budget)) {
        break;
      }
      descriptor += d;
      payload += p;
      ++end;
    }
    slices->push_back(FrameSlice{begin, end});
    begin = end;
  }
}

}  // namespace kvport::client
