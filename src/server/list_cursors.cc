// SPDX-License-Identifier: Apache-2.0
#include "server/list_cursors.h"

namespace kvport::server {

uint64_t ListCursorTable::Issue(uint64_t owner, std::string_view ns, std::string store_cursor) {
  MutexLock lock(mu_);
  uint64_t id = 0;
  while (id == 0 || entries_.contains(id))
    id = random_();
  entries_.emplace(id, Entry{std::string(ns), std::move(store_cursor), owner});
  std::deque<uint64_t>& owned = by_owner_[owner];
  owned.push_back(id);
  if (owned.size() > kCursorsPerSession) {
    entries_.erase(owned.front());
    owned.pop_front();
  }
  return id;
}

std::optional<std::string> ListCursorTable::Find(uint64_t cursor, std::string_view ns) const {
  MutexLock lock(mu_);
  auto it = entries_.find(cursor);
  if (it == entries_.end() || it->second.ns != ns) return std::nullopt;
  return it->second.store_cursor;
}

void ListCursorTable::ForgetOwner(uint64_t owner) {
  MutexLock lock(mu_);
  auto it = by_owner_.find(owner);
  if (it == by_owner_.end()) return;
  for (uint64_t id : it->second)
    entries_.erase(id);
  by_owner_.erase(it);
}

size_t ListCursorTable::size() const {
  MutexLock lock(mu_);
  return entries_.size();
}

}  // namespace kvport::server
