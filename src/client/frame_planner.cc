// SPDX-License-Identifier: Apache-2.0
#include "client/frame_planner.h"

namespace kvport::client {

std::vector<FrameSlice> PlanFrames(size_t count, const FrameCosts& costs,
                                   const protocol::Limits& limits, uint64_t payload_budget) {
  std::vector<FrameSlice> slices;
  const uint64_t descriptor_budget =
      limits.max_frame_bytes > kFrameFixedBytes ? limits.max_frame_bytes - kFrameFixedBytes : 0;
  size_t begin = 0;
  while (begin < count) {
    size_t end = begin;
    uint64_t descriptor = 0;
    uint64_t payload = 0;
    while (end < count && end - begin < limits.max_batch_keys) {
      const uint64_t d = costs.descriptor_bytes(end);
      const uint64_t p = costs.payload_bytes ? costs.payload_bytes(end) : 0;
      if (end > begin && (descriptor + d > descriptor_budget || payload + p > payload_budget)) {
        break;
      }
      descriptor += d;
      payload += p;
      ++end;
    }
    slices.push_back(FrameSlice{begin, end});
    begin = end;
  }
  return slices;
}

}  // namespace kvport::client
