// SPDX-License-Identifier: Apache-2.0
// An object's identity as one string: (namespace, key) joined so that no two pairs meet. The
// memory index, the disk tier's index and the disk tier's write queue all key objects by it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kvport::store {

// The bytes of (ns, key)'s id: a 4-byte little-endian length of ns, ns, then key. The length
// prefix keeps ("a", "bc") and ("ab", "c") apart without forbidding any byte in either name (a
// namespace may hold a NUL: a separator byte would not do).
inline size_t ObjectIdBytes(std::string_view ns, std::string_view key) {
  return 4 + ns.size() + key.size();
}

// Writes (ns, key)'s id, ObjectIdBytes(ns, key) bytes, at `out`.
inline void WriteObjectId(std::string_view ns, std::string_view key, char* out) {
  const auto n = static_cast<uint32_t>(ns.size());
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  if (!ns.empty()) std::memcpy(out + 4, ns.data(), ns.size());
  if (!key.empty()) std::memcpy(out + 4 + ns.size(), key.data(), key.size());
}

// (ns, key)'s id into *id.
inline void SetObjectId(std::string_view ns, std::string_view key, std::string* id) {
  id->resize(ObjectIdBytes(ns, key));
  WriteObjectId(ns, key, id->data());
}

// The namespace and the key of an id SetObjectId made.
inline std::string_view ObjectIdNamespace(std::string_view id) {
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i)
    n |= uint32_t{static_cast<uint8_t>(id[i])} << (8 * i);
  return id.substr(4, n);
}
inline std::string_view ObjectIdKey(std::string_view id) {
  return id.substr(4 + ObjectIdNamespace(id).size());
}

inline std::string ObjectId(std::string_view ns, std::string_view key) {
  std::string id;
  SetObjectId(ns, key, &id);
  return id;
}

}  // namespace kvport::store
