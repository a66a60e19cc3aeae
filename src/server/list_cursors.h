// SPDX-License-Identifier: Apache-2.0
// ListCursorTable: maps the protocol's opaque u64 LIST cursors to the store's cursors.
//
// The store pages keys by "the last key returned" (a string); the wire cursor is a u64. The
// table remembers, node-wide (so a client may continue a listing on another of its pooled
// connections), the store cursor behind each wire cursor it handed out, and which session it
// was handed to. Each session owns at most kCursorsPerSession cursors: issuing one more forgets
// that session's oldest, never another session's, so no client can make a node forget the
// cursors of another. A session's cursors are forgotten when it ends. Wire cursors are random
// (a client cannot guess another's), never 0 (0 starts a listing). Memory is bounded by the
// sessions: kCursorsPerSession x (namespace + one key) each.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/thread_annotations.h"

namespace kvport::server {

class ListCursorTable {
 public:
  static constexpr size_t kCursorsPerSession = 8;

  // Remembers where a listing of `ns` continues, owned by session `owner`; returns the wire
  // cursor to send.
  uint64_t Issue(uint64_t owner, std::string_view ns, std::string store_cursor) EXCLUDES(mu_);
  // The store cursor behind `cursor` if it was issued for `ns` and is still remembered. A
  // cursor may be used more than once (a client retrying a page), from any session.
  std::optional<std::string> Find(uint64_t cursor, std::string_view ns) const EXCLUDES(mu_);
  // Forgets every cursor `owner` was given (its session ended).
  void ForgetOwner(uint64_t owner) EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);

 private:
  struct Entry {
    std::string ns;
    std::string store_cursor;
    uint64_t owner = 0;
  };
  mutable Mutex mu_;
  std::mt19937_64 random_ GUARDED_BY(mu_){std::random_device{}()};
  std::unordered_map<uint64_t, Entry> entries_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, std::deque<uint64_t>> by_owner_ GUARDED_BY(mu_);  // oldest first
};

}  // namespace kvport::server
