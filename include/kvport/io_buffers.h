// SPDX-License-Identifier: Apache-2.0
// Caller-owned memory handed to the client: one buffer per key, EIC-style.
//
// The client never owns, copies into its own storage, or frees these buffers. A value is written
// to the node straight from the caller's buffer and read from the node straight into it; the only
// exception is device memory (see MemoryInfo), which TCP cannot reach and which the client stages
// through a pinned host bounce pool. Buffers must stay valid until the call that uses them
// returns; no call touches a buffer after it returns, even when it returns a timeout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvport/device.h"
#include "kvport/export.h"

namespace kvport {

// Describes registered memory (Client::RegisterMemory): host, CUDA device or Ascend device
// memory, and for device memory the device it lives on.
struct KVPORT_API MemoryInfo {
  RuntimeKind kind = RuntimeKind::kHost;
  int device_id = 0;  // ignored for kHost
};

// One contiguous region of caller memory.
struct KVPORT_API IOBuffer {
  void* data = nullptr;
  size_t size = 0;
  // The caller says this region lies inside memory passed to Client::RegisterMemory. It is a
  // hint kept for EIC compatibility: the client looks every buffer up in its registry anyway,
  // and memory that was never registered is treated as host memory.
  bool registered = false;
};

// An ordered list of buffers; buffer i belongs to key i of the call it is passed to.
class KVPORT_API IOBuffers {
 public:
  IOBuffers() = default;

  // Appends a region. `size` is the bytes to write (MSet) or the capacity to read into (MGet).
  void Append(void* data, size_t size, bool registered = false) {
    buffers_.push_back(IOBuffer{data, size, registered});
  }
  void Append(const void* data, size_t size, bool registered = false) {
    // MSet only reads from its buffers; this overload spares callers a const_cast.
    Append(const_cast<void*>(data), size, registered);
  }

  size_t size() const { return buffers_.size(); }
  bool empty() const { return buffers_.empty(); }
  const IOBuffer& operator[](size_t i) const { return buffers_[i]; }
  std::vector<IOBuffer>::const_iterator begin() const { return buffers_.begin(); }
  std::vector<IOBuffer>::const_iterator end() const { return buffers_.end(); }
  void clear() { buffers_.clear(); }
  void reserve(size_t n) { buffers_.reserve(n); }

 private:
  std::vector<IOBuffer> buffers_;
};

}  // namespace kvport
