#include "store/clock.h"

#include <chrono>

namespace kvport::store {

SteadyClock* SteadyClock::Get() {
  static SteadyClock clock;
  return &clock;
}

uint64_t SteadyClock::NowMillis() const {
  auto since_epoch = std::chrono::steady_clock::now().time_since_epoch();
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count());
}

}  // namespace kvport::store
