// SPDX-License-Identifier: Apache-2.0
#include "store/key_order.h"

#include <utility>

namespace kvport::store {

void ShardNamespaces::Add(StoredObject* o) {
  auto it = parts_.find(o->ns());
  if (it == parts_.end()) {
    it = parts_.emplace(o->ns(), ShardNamespace{}).first;
  }
  ShardNamespace& part = it->second;
  part.objects += 1;
  part.value_bytes += o->value_len;
  part.meta_bytes += o->Meta().size();
  // A replacement is shown before its predecessor is hidden: it takes the predecessor's place.
  auto [place, inserted] = part.in_key_order.insert(o);
  if (!inserted) {
    place = part.in_key_order.erase(place);
    part.in_key_order.insert(place, o);
  }
}

void ShardNamespaces::Remove(const StoredObject* o) {
  auto it = parts_.find(o->ns());
  if (it == parts_.end()) return;
  ShardNamespace& part = it->second;
  part.objects -= 1;
  part.value_bytes -= o->value_len;
  part.meta_bytes -= o->Meta().size();
  auto place = part.in_key_order.find(o->key());
  if (place != part.in_key_order.end() && *place == o) part.in_key_order.erase(place);
  if (part.objects == 0) {
    parts_.erase(it);
  }
}

}  // namespace kvport::store
