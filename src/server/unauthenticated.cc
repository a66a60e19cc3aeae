// SPDX-License-Identifier: Apache-2.0
#include "server/unauthenticated.h"

namespace kvport::server {

bool UnauthenticatedConnections::Add(uint64_t id, size_t worker, const std::string& address) {
  MutexLock lock(mu_);
  uint32_t& count = per_address_[address];
  if (count >= max_per_address_) {
    if (count == 0) per_address_.erase(address);
    return false;
  }
  ++count;
  by_id_.emplace(id, Entry{id, worker, address});
  return true;
}

bool UnauthenticatedConnections::Remove(uint64_t id) {
  MutexLock lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  ForgetLocked(it);
  return true;
}

std::optional<UnauthenticatedConnections::Entry> UnauthenticatedConnections::TakeOldest() {
  MutexLock lock(mu_);
  if (by_id_.empty()) return std::nullopt;
  auto oldest = by_id_.begin();
  Entry entry = oldest->second;
  ForgetLocked(oldest);
  return entry;
}

std::optional<std::string> UnauthenticatedConnections::AddressOf(uint64_t id) const {
  MutexLock lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second.address;
}

void UnauthenticatedConnections::ChargeHelloTimeout(uint64_t id) {
  if (throttle_ == nullptr) return;
  std::optional<std::string> address = AddressOf(id);
  if (address) throttle_->Charge(*address);
}

size_t UnauthenticatedConnections::size() const {
  MutexLock lock(mu_);
  return by_id_.size();
}

void UnauthenticatedConnections::ForgetLocked(std::map<uint64_t, Entry>::iterator it) {
  auto count = per_address_.find(it->second.address);
  if (count != per_address_.end() && --count->second == 0) per_address_.erase(count);
  by_id_.erase(it);
}

}  // namespace kvport::server
