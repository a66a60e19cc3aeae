// SPDX-License-Identifier: Apache-2.0
// LruList: one index shard's visible objects from the most to the least recently used, linked
// through their StoredObject::lru_prev and lru_next (private to store/).
#pragma once

#include "store/stored_object.h"

namespace kvport::store {

// The list runs from the most (head) to the least (tail) recently used. Not synchronized: the
// shard's mutex guards it (Shard::lru), as it guards the links of the objects on it.
class LruList {
 public:
  StoredObject* tail() const { return tail_; }

  // Puts `o` at the head. `o` is not on the list.
  void PushFront(StoredObject* o) {
    o->lru_prev = nullptr;
    o->lru_next = head_;
    if (head_) head_->lru_prev = o;
    head_ = o;
    if (!tail_) tail_ = o;
  }
  void Unlink(StoredObject* o) {
    (o->lru_prev ? o->lru_prev->lru_next : head_) = o->lru_next;
    (o->lru_next ? o->lru_next->lru_prev : tail_) = o->lru_prev;
    o->lru_prev = o->lru_next = nullptr;
  }

 private:
  StoredObject* head_ = nullptr;
  StoredObject* tail_ = nullptr;
};

}  // namespace kvport::store
