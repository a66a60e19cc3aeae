// SPDX-License-Identifier: Apache-2.0
// ExpiryHeap: one index shard's visible objects with a TTL, a min-heap by expiry, so that Sweep
// visits what expired, not the whole index (private to store/).
#pragma once

#include <cstddef>
#include <vector>

#include "store/stored_object.h"

namespace kvport::store {

// A min-heap by StoredObject::expires_at_ms in which each object knows its slot
// (StoredObject::expiry_slot; SIZE_MAX while not in the heap), so that it can be taken out from
// anywhere. Not synchronized: the shard's mutex guards it (Shard::expiry).
class ExpiryHeap {
 public:
  bool empty() const { return heap_.empty(); }
  // The object that expires first. Not empty().
  StoredObject* top() const { return heap_.front(); }
  void Add(StoredObject* o);
  // Takes `o` out; a no-op when it is not in the heap.
  void Remove(StoredObject* o);

 private:
  void Place(size_t slot, StoredObject* o);
  // Moves the object at `slot` up or down to where the heap order wants it.
  void Fix(size_t slot);

  std::vector<StoredObject*> heap_;
};

}  // namespace kvport::store
