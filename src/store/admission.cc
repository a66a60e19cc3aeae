// SPDX-License-Identifier: Apache-2.0
#include "store/admission.h"

#include <algorithm>
#include <string>

namespace kvport::store {

uint64_t Admission::IndexCap() const {
  uint64_t cap = max_index_bytes;
  if (cap != 0 && index_bytes_elsewhere != nullptr) {
    cap -= std::min(index_bytes_elsewhere->load(std::memory_order_relaxed), cap / 2);
  }
  return cap;
}

Status PinCapStatus(uint64_t cap) {
  return Status::NoSpace("readers already pin " + std::to_string(cap) +
                         " bytes of values, the node's max_pinned_bytes; retry once some "
                         "reads finish");
}

}  // namespace kvport::store
