// SPDX-License-Identifier: Apache-2.0
#include "store/ttl_clock.h"

#include <chrono>

namespace kvport::store {

SteadyTtlClock* SteadyTtlClock::Get() {
  static SteadyTtlClock clock;
  return &clock;
}

uint64_t SteadyTtlClock::NowMillis() const {
  auto since_epoch = std::chrono::steady_clock::now().time_since_epoch();
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count());
}

}  // namespace kvport::store
