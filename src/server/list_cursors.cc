// SPDX-License-Identifier: Apache-2.0
#include "server/list_cursors.h"

namespace kvport::server {

uint64_t ListCursorTable::Issue(std::string_view ns, std::string store_cursor) {
  MutexLock lock(mu_);
  uint64_t id = next_++;
  entries_.emplace(id, Entry{std::string(ns), std::move(store_cursor)});
  order_.push_back(id);
  while (order_.size() > max_entries_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
  return id;
}

std::optional<std::string> ListCursorTable::Find(uint64_t cursor, std::string_view ns) const {
  MutexLock lock(mu_);
  auto it = entries_.find(cursor);
  if (it == entries_.end() || it->second.ns != ns) return std::nullopt;
  return it->second.store_cursor;
}

}  // namespace kvport::server
