// SPDX-License-Identifier: Apache-2.0
#include "store/stored_object.h"

#include <cstring>
#include <new>

namespace kvport::store {

StoredObject* StoredObject::New(std::string_view ns, std::string_view key, std::string_view meta) {
  const size_t id_bytes = ObjectIdBytes(ns, key);
  void* block = ::operator new(sizeof(StoredObject) + id_bytes + meta.size());
  auto* o = new (block) StoredObject;
  char* names = reinterpret_cast<char*>(o + 1);
  WriteObjectId(ns, key, names);
  if (!meta.empty()) std::memcpy(names + id_bytes, meta.data(), meta.size());
  o->index_key_bytes_ = static_cast<uint32_t>(id_bytes);
  o->meta_bytes_ = static_cast<uint32_t>(meta.size());
  return o;
}

void StoredObject::Delete(StoredObject* o) {
  o->~StoredObject();
  ::operator delete(o);
}

}  // namespace kvport::store
