// SPDX-License-Identifier: Apache-2.0
// MemoryRegistry: which caller memory ranges are device memory (Client::RegisterMemory).
//
// TCP can only send from and receive into host memory, so for each buffer of a call the client
// asks the registry where its bytes live. Ranges never registered are host memory.
// Thread-safe: lookups take a shared lock, registration an exclusive one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>

#include "kvport/io_buffers.h"
#include "kvport/status.h"

namespace kvport::client {

class MemoryRegistry {
 public:
  // Records [data, data+size) as `info` memory. Registering the same range again with the same
  // info is OK (EIC callers re-register); a range overlapping another one is InvalidArgument.
  Status Register(const void* data, size_t size, const MemoryInfo& info);
  // Forgets the range that starts at `data` with `size`; NotFound if there is none.
  Status Unregister(const void* data, size_t size);

  // Where [data, data+size) lives: the registered range containing it, or host memory when no
  // registered range touches it. A buffer that straddles the end of a registered range is
  // InvalidArgument (it would be half device, half host memory).
  Result<MemoryInfo> Lookup(const void* data, size_t size) const;

  size_t size() const;

 private:
  struct Range {
    uintptr_t end;  // one past the last byte
    MemoryInfo info;
  };
  mutable std::shared_mutex mu_;
  std::map<uintptr_t, Range> ranges_;  // by start address; ranges never overlap
};

}  // namespace kvport::client
