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

// A set's elements are constant (their hash is of the object they point to): an object takes
// another's place by an erase and an insert, which reuses the erased slot or one as near.
StoredObject* IndexShard::IndexReplaceLocked(StoredObject* o) {
  auto [it, inserted] = index.insert(o);
  if (inserted) return nullptr;
  StoredObject* old = *it;
  index.erase(it);
  index.insert(o);
  return old;
}

void IndexShard::ChainAddLocked(StoredObject* o) {
  auto [it, inserted] = by_key.insert(o);
  if (inserted) {
    o->same_key_next = nullptr;
    return;
  }
  o->same_key_next = *it;  // o heads the chain
  by_key.erase(it);
  by_key.insert(o);
}

void IndexShard::ChainRemoveLocked(StoredObject* o) {
  auto it = by_key.find(o->key());
  if (it == by_key.end()) return;
  StoredObject* const head = *it;
  if (head == o) {
    by_key.erase(it);
    if (o->same_key_next != nullptr) by_key.insert(o->same_key_next);
  } else {
    StoredObject* prev = head;
    while (prev->same_key_next != nullptr && prev->same_key_next != o)
      prev = prev->same_key_next;
    if (prev->same_key_next == nullptr) return;
    prev->same_key_next = o->same_key_next;
  }
  o->same_key_next = nullptr;
}

}  // namespace kvport::store
