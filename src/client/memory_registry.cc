// SPDX-License-Identifier: Apache-2.0
#include "client/memory_registry.h"

#include <fmt/core.h>

#include <iterator>
#include <mutex>
#include <string>

namespace kvport::client {
namespace {

std::string Describe(uintptr_t start, uintptr_t end) {
  return fmt::format("[{:#x}, {:#x})", start, end);
}

}  // namespace

Status MemoryRegistry::Register(const void* data, size_t size, const MemoryInfo& info) {
  if (data == nullptr || size == 0) {
    return Status::InvalidArgument("register memory: a buffer is null or empty");
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(data);
  if (start + size < start) return Status::InvalidArgument("register memory: range wraps around");
  const uintptr_t end = start + size;
  std::unique_lock lock(mu_);
  auto next = ranges_.lower_bound(start);
  if (next != ranges_.end() && next->first == start && next->second.end == end &&
      next->second.info.kind == info.kind && next->second.info.device_id == info.device_id) {
    return Status::Ok();
  }
  if (next != ranges_.end() && next->first < end) {
    return Status::InvalidArgument("register memory: " + Describe(start, end) + " overlaps " +
                                   Describe(next->first, next->second.end) + ", registered before");
  }
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->second.end > start) {
      return Status::InvalidArgument("register memory: " + Describe(start, end) + " overlaps " +
                                     Describe(prev->first, prev->second.end) +
                                     ", registered before");
    }
  }
  ranges_.emplace(start, Range{end, info});
  return Status::Ok();
}

Status MemoryRegistry::Unregister(const void* data, size_t size) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(data);
  std::unique_lock lock(mu_);
  auto it = ranges_.find(start);
  if (it == ranges_.end() || it->second.end != start + size) {
    return Status::NotFound("unregister memory: " + Describe(start, start + size) +
                            " was not registered");
  }
  ranges_.erase(it);
  return Status::Ok();
}

Result<MemoryInfo> MemoryRegistry::Lookup(const void* data, size_t size) const {
  const uintptr_t start = reinterpret_cast<uintptr_t>(data);
  const uintptr_t end = start + size;
  std::shared_lock lock(mu_);
  if (ranges_.empty()) return MemoryInfo{};
  auto next = ranges_.upper_bound(start);
  if (next != ranges_.begin()) {
    auto holder = std::prev(next);
    if (holder->second.end > start) {
      if (end > holder->second.end) {
        return Status::InvalidArgument("buffer " + Describe(start, end) +
                                       " runs past the end of registered memory " +
                                       Describe(holder->first, holder->second.end));
      }
      return holder->second.info;
    }
  }
  if (next != ranges_.end() && next->first < end) {
    return Status::InvalidArgument("buffer " + Describe(start, end) +
                                   " runs into registered memory " +
                                   Describe(next->first, next->second.end));
  }
  return MemoryInfo{};
}

size_t MemoryRegistry::size() const {
  std::shared_lock lock(mu_);
  return ranges_.size();
}

}  // namespace kvport::client
