// SPDX-License-Identifier: Apache-2.0
// DeviceStaging: where each key's bytes are on the host side of a call.
//
// A transport moves host memory, and device memory only of the kinds it says it moves
// (TransportCapabilities::memory_kinds). A buffer in any other CUDA or Ascend memory (declared
// with Client::RegisterMemory) is given a slot in pinned host memory for the call: a put copies
// the device buffer there first, a get copies the slot back after the value arrived. The runtimes
// are opened on first use (the process-wide ones, or this client's own from a library path: how
// tests load the fakes), never at construction. Thread-safe.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "client/batch_call.h"
#include "client/memory_registry.h"
#include "client/staging_pool.h"
#include "client/transport.h"
#include "kvport/device.h"
#include "kvport/io_buffers.h"
#include "kvport/status.h"

namespace kvport::client {

// Per key of a call: the address the transport reads from / writes to (the caller's buffer, or
// a pinned slot standing in for a device buffer) and what memory that is, and what memory the
// caller's buffer is.
struct WireBuffers {
  std::vector<char*> address;
  std::vector<MemoryInfo> memory;  // of `address`: host for a staged key
  std::vector<MemoryInfo> caller;  // of the caller's buffer
  std::vector<StagingPool::Lease> leases;
  bool staged(size_t i) const { return caller[i].kind != memory[i].kind; }
};

class DeviceStaging {
 public:
  // Runtime libraries to open for device memory ("" = the process-wide runtime) and the pinned
  // memory to keep cached per kind. Forgets runtimes opened from other paths before.
  void UseLibraries(std::string cuda_library, std::string ascend_library,
                    uint64_t staging_cache_bytes);

  // The runtime for memory of `kind`, opened now if it was not yet (not checked for use).
  const DeviceRuntime* Runtime(RuntimeKind kind);
  // The same, NotSupported (with the runtime's reason) when it is not usable here.
  Result<const DeviceRuntime*> RuntimeFor(RuntimeKind kind, std::string_view purpose);

  MemoryRegistry& registry() { return registry_; }

  // Looks up where each buffer lives and gives the device buffers of every kind `transport`
  // does not move itself pinned host slots, in *wire (replacing what was there; its lists keep
  // their capacity). Keys whose buffer is unusable (null, unregistered device memory, no
  // staging) fail in `outcomes`.
  void MapBuffers(const IOBuffers& buffers, const TransportCapabilities& transport,
                  KeyOutcomes& outcomes, WireBuffers* wire);
  // Copies a staged key between its device buffer and its pinned host slot.
  Status CopyStaged(const IOBuffer& buffer, const MemoryInfo& memory, char* host, bool to_host);

 private:
  const DeviceRuntime* LockedRuntime(RuntimeKind kind);  // with mu_ held
  Result<StagingPool*> StagingFor(RuntimeKind kind);

  MemoryRegistry registry_;
  std::mutex mu_;  // guards everything below (created on demand)
  std::string cuda_library_;
  std::string ascend_library_;
  uint64_t staging_cache_bytes_ = 0;
  std::unique_ptr<DeviceRuntime> own_cuda_;
  std::unique_ptr<DeviceRuntime> own_ascend_;
  std::array<std::unique_ptr<StagingPool>, 3> staging_;
};

}  // namespace kvport::client
