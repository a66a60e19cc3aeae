// SPDX-License-Identifier: Apache-2.0
#include "store/expiry_heap.h"

namespace kvport::store {

namespace {

bool ExpiresBefore(const StoredObject* a, const StoredObject* b) {
  return a->expires_at_ms < b->expires_at_ms;
}

}  // namespace

void ExpiryHeap::Place(size_t slot, StoredObject* o) {
  heap_[slot] = o;
  o->expiry_slot = slot;
}

void ExpiryHeap::Fix(size_t slot) {
  std::vector<StoredObject*>& heap = heap_;
  StoredObject* o = heap[slot];
  while (slot > 0 && ExpiresBefore(o, heap[(slot - 1) / 2])) {
    Place(slot, heap[(slot - 1) / 2]);
    slot = (slot - 1) / 2;
  }
  while (true) {
    size_t child = 2 * slot + 1;
    if (child >= heap.size()) break;
    if (child + 1 < heap.size() && ExpiresBefore(heap[child + 1], heap[child])) ++child;
    if (!ExpiresBefore(heap[child], o)) break;
    Place(slot, heap[child]);
    slot = child;
  }
  Place(slot, o);
}

void ExpiryHeap::Add(StoredObject* o) {
  heap_.push_back(o);
  o->expiry_slot = heap_.size() - 1;
  Fix(o->expiry_slot);
}

void ExpiryHeap::Remove(StoredObject* o) {
  const size_t slot = o->expiry_slot;
  if (slot == SIZE_MAX) return;
  o->expiry_slot = SIZE_MAX;
  StoredObject* last = heap_.back();
  heap_.pop_back();
  if (last == o) return;
  Place(slot, last);
  Fix(slot);
}

}  // namespace kvport::store
