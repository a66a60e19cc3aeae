// SPDX-License-Identifier: Apache-2.0
// An object's identity as one string: (namespace, key) joined so that no two pairs meet. The
// memory index, the disk tier's index and the disk tier's write queue all key objects by it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvport::store {

// (ns, key) into *id: a 4-byte little-endian length of ns, ns, then key. The length prefix keeps
// ("a", "bc") and ("ab", "c") apart without forbidding any byte in either name (a namespace may
// hold a NUL: a separator byte would not do).
inline void SetObjectId(std::string_view ns, std::string_view key, std::string* id) {
  id->clear();
  const auto n = static_cast<uint32_t>(ns.size());
  for (int i = 0; i < 4; ++i)
    id->push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  id->append(ns);
  id->append(key);
}

inline std::string ObjectId(std::string_view ns, std::string_view key) {
  std::string id;
  id.reserve(4 + ns.size() + key.size());
  SetObjectId(ns, key, &id);
  return id;
}

}  // namespace kvport::store
