// SPDX-License-Identifier: Apache-2.0
// ListCursorTable: maps the protocol's opaque u64 LIST cursors to the store's cursors.
//
// The store pages keys by "the last key returned" (a string); the wire cursor is a u64. The
// table remembers, server-wide (so a client may continue a listing on another pooled
// connection), the store cursor behind each wire cursor it handed out. It is bounded: the
// oldest entries are forgotten first, and a forgotten or never-issued cursor is reported as
// such. Wire cursors are never 0 (0 starts a listing) and never reused.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/thread_annotations.h"

namespace kvport::server {

class ListCursorTable {
 public:
  explicit ListCursorTable(size_t max_entries = 4096) : max_entries_(max_entries) {}

  // Remembers where a listing of `ns` continues; returns the wire cursor to send.
  uint64_t Issue(std::string_view ns, std::string store_cursor) EXCLUDES(mu_);
  // The store cursor behind `cursor` if it was issued for `ns` and is still remembered. A
  // cursor may be used more than once (a client retrying a page).
  std::optional<std::string> Find(uint64_t cursor, std::string_view ns) const EXCLUDES(mu_);

 private:
  struct Entry {
    std::string ns;
    std::string store_cursor;
  };
  const size_t max_entries_;
  mutable Mutex mu_;
  uint64_t next_ GUARDED_BY(mu_) = 1;
  std::unordered_map<uint64_t, Entry> entries_ GUARDED_BY(mu_);
  std::deque<uint64_t> order_ GUARDED_BY(mu_);  // oldest first
};

}  // namespace kvport::server
