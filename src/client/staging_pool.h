// SPDX-License-Identifier: Apache-2.0
// StagingPool: pinned host memory for staging device buffers through TCP.
//
// TCP cannot read from or write into CUDA or Ascend device memory, so an MSet of a device
// buffer copies it to pinned host memory first (D2H) and sends from there, and an MGet receives
// into pinned host memory and copies it to the device afterwards (H2D). Pinned allocations are
// slow, so released blocks are cached (by power-of-two size class) up to `cache_bytes`; blocks
// beyond that are freed on release. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "kvport/device.h"
#include "kvport/status.h"

namespace kvport::client {

class StagingPool {
 public:
  // `runtime` allocates and frees the pinned memory; it must outlive the pool.
  StagingPool(const DeviceRuntime* runtime, uint64_t cache_bytes);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // Pinned host memory of at least `bytes` bytes, returned to the pool when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { Release(); }
    char* data() const { return data_; }
    size_t size() const { return size_; }

   private:
    friend class StagingPool;
    void Release();
    StagingPool* pool_ = nullptr;
    char* data_ = nullptr;
    size_t size_ = 0;
  };

  // DeviceError/NotSupported from the runtime when it cannot allocate.
  Result<Lease> Acquire(size_t bytes);

  const DeviceRuntime& runtime() const { return *runtime_; }
  // Bytes held in the cache now (tests).
  uint64_t cached_bytes() const;

 private:
  void Return(char* data, size_t size);

  const DeviceRuntime* runtime_;
  const uint64_t cache_bytes_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<char*>> free_;  // size class -> cached blocks
  uint64_t cached_ = 0;
};

}  // namespace kvport::client
