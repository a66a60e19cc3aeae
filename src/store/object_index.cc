// SPDX-License-Identifier: Apache-2.0
#include "store/object_index.h"

#include <utility>

#include "store/object_id.h"

namespace kvport::store {

const std::string& LookupKey(std::string_view ns, std::string_view key) {
  thread_local std::string k;
  SetObjectId(ns, key, &k);
  return k;
}

void IndexShard::ChainAddLocked(StoredObject* o) {
  auto [it, inserted] = by_key.try_emplace(o->key(), o);
  o->same_key_next = inserted ? nullptr : std::exchange(it->second, o);
}

void IndexShard::ChainRemoveLocked(StoredObject* o) {
  auto it = by_key.find(o->key());
  if (it == by_key.end()) return;
  StoredObject** link = &it->second;
  while (*link != nullptr && *link != o)
    link = &(*link)->same_key_next;
  if (*link == nullptr) return;
  *link = o->same_key_next;
  o->same_key_next = nullptr;
  if (it->second == nullptr) {
    by_key.erase(it);
  } else if (it->first.data() == o->key().data()) {
    // The map's key viewed o's key: view the new head's instead (no allocation).
    auto node = by_key.extract(it);
    node.key() = node.mapped()->key();
    by_key.insert(std::move(node));
  }
}

}  // namespace kvport::store
