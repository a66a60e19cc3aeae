// SPDX-License-Identifier: Apache-2.0
#include "client/staging_pool.h"

#include <bit>
#include <utility>

#include "kvport/log.h"

namespace kvport::client {
namespace {

constexpr size_t kMinBlock = size_t{64} << 10;

size_t SizeClass(size_t bytes) {
  return std::bit_ceil(std::max(bytes, kMinBlock));
}

}  // namespace

StagingPool::Lease& StagingPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = std::exchange(other.pool_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void StagingPool::Lease::Release() {
  if (pool_ != nullptr && data_ != nullptr) pool_->Return(data_, size_);
  pool_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

StagingPool::StagingPool(const DeviceRuntime* runtime, uint64_t cache_bytes)
    : runtime_(runtime), cache_bytes_(cache_bytes) {}

StagingPool::~StagingPool() {
  for (auto& [size, blocks] : free_) {
    for (char* block : blocks) {
      Status freed = runtime_->FreePinnedHost(block);
      if (!freed.ok()) log::Warn("staging pool: {}", freed.ToString());
    }
  }
}

Result<StagingPool::Lease> StagingPool::Acquire(size_t bytes) {
  const size_t size = SizeClass(bytes);
  Lease lease;
  {
    std::lock_guard lock(mu_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      lease.data_ = it->second.back();
      it->second.pop_back();
      cached_ -= size;
    }
  }
  if (lease.data_ == nullptr) {
    Result<void*> block = runtime_->AllocPinnedHost(size);
    if (!block.ok()) {
      return block.status().WithContext("staging " + std::to_string(bytes) +
                                        " bytes of device memory through pinned host memory");
    }
    lease.data_ = static_cast<char*>(*block);
  }
  lease.pool_ = this;
  lease.size_ = size;
  return lease;
}

void StagingPool::Return(char* data, size_t size) {
  {
    std::lock_guard lock(mu_);
    if (cached_ + size <= cache_bytes_) {
      free_[size].push_back(data);
      cached_ += size;
      return;
    }
  }
  Status freed = runtime_->FreePinnedHost(data);
  if (!freed.ok()) log::Warn("staging pool: {}", freed.ToString());
}

uint64_t StagingPool::cached_bytes() const {
  std::lock_guard lock(mu_);
  return cached_;
}

}  // namespace kvport::client
