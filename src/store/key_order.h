// SPDX-License-Identifier: Apache-2.0
// Per-namespace key order: each index shard's visible objects of each namespace, counted and
// sorted by key, so that LIST resumes from its cursor instead of scanning the shard (private to
// store/).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

// Before abseil, whose legacy thread_annotations.h defines GUARDED_BY and a few more of the same
// names (as the same clang attributes): from a system header its redefinitions are silent.
#include "common/thread_annotations.h"

#include <absl/container/btree_set.h>
#include "store/stored_object.h"

namespace kvport::store {

// Orders objects by key; transparent, so that a set of them is searched by a key.
struct KeyOrder {
  using is_transparent = void;
  bool operator()(const StoredObject* a, const StoredObject* b) const {
    return a->key() < b->key();
  }
  bool operator()(const StoredObject* a, std::string_view key) const { return a->key() < key; }
  bool operator()(std::string_view key, const StoredObject* b) const { return key < b->key(); }
};

// A namespace's visible objects within one shard: their counts, and the objects in key order,
// so that LIST resumes from its cursor instead of scanning the shard.
struct ShardNamespace {
  uint64_t objects = 0;
  uint64_t value_bytes = 0;
  uint64_t meta_bytes = 0;
  // A B-tree of pointers (absl's): about 10 bytes an object where a red-black tree's node costs
  // 48.
  absl::btree_set<StoredObject*, KeyOrder> in_key_order;
};

// One shard's namespaces, by name: a namespace is here while the shard holds at least one of
// its visible objects. Not synchronized: the shard's mutex guards it (Shard::namespaces).
class ShardNamespaces {
 public:
  using Map = std::map<std::string, ShardNamespace, std::less<>>;

  // A visible object joins its namespace.
  void Add(StoredObject* o);
  // A visible object leaves its namespace; the namespace goes with its last object.
  void Remove(const StoredObject* o);

  // The shard's part of namespace `ns`, or null when it holds none of its objects.
  ShardNamespace* Find(std::string_view ns) {
    auto it = parts_.find(ns);
    return it == parts_.end() ? nullptr : &it->second;
  }
  const Map& all() const { return parts_; }

 private:
  Map parts_;
};

}  // namespace kvport::store
