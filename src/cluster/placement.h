// SPDX-License-Identifier: Apache-2.0
// Placement: which nodes hold a key, by weighted rendezvous (highest-random-weight) hashing.
//
// Every (node, key) pair gets a score from a hash of the node's id and the key; a key's nodes in
// preference order are the nodes by descending score. With weight w and a hash u uniform in
// (0, 1), the score w / -ln(u) makes node i the first choice of a share w_i / sum(w) of the keys,
// exactly in expectation. What that buys a cache:
//   - every client computes the same order from the same member list, with no coordination;
//   - a node that leaves moves only its own keys (each to its next node), and a node that joins
//     takes only the keys it now scores highest for: a share of about w_new / sum(w);
//   - the second, third... choices are spread the same way, so replicas of a dead node's keys
//     are spread over the survivors.
// Scores depend on ids and keys alone, never on addresses or list order: the key is hashed once
// (xxHash's XXH3, the same on every architecture) and that hash is mixed with each node's (the
// XXH3 of its id) by a 64-bit finalizer, so ranking a key costs one hash of its bytes whatever
// the number of nodes.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cluster/member.h"

namespace kvport::cluster {

class Placement {
 public:
  // Weights are the members' capacities; when any member's is 0 (a static list: unknown), every
  // member weighs the same.
  explicit Placement(std::span<const Member> members);

  size_t size() const { return nodes_.size(); }

  // The indexes (into the members given) of every member, first choice first, for `key`, in
  // `order`, which must hold size() entries. The namespace plays no part: a key is on the same
  // nodes in every namespace, so a call that matches a key in any namespace
  // (GetOptions::any_namespace) knows where to look.
  void Rank(std::string_view key, std::span<uint32_t> order) const;
  // The same, with `order` resized to size().
  void Rank(std::string_view key, std::vector<uint32_t>* order) const {
    order->resize(size());
    Rank(key, std::span<uint32_t>(*order));
  }

  // What ranking a key starts from: the key's hash (XXH3), computed once per key.
  static uint64_t KeyHash(std::string_view key);
  // Rank, from the key's hash.
  void RankHashed(uint64_t key_hash, std::span<uint32_t> order) const;
  // The first `first.size()` members in Rank's order among those `eligible` admits (indexed
  // like the members; at least first.size() of them true), without ordering the rest: a call
  // needs a key's first one or two nodes, not all of them (O(size() * first.size())).
  void RankFirst(uint64_t key_hash, std::span<const uint8_t> eligible,
                 std::span<uint32_t> first) const;

 private:
  struct Node {
    uint64_t id_hash;  // XXH3 of the member's id
    double weight;
  };
  class Scores;
  // The score of member i for a key with hash `key_hash`: higher ranks first.
  double Score(uint64_t key_hash, size_t i) const;

  std::vector<Node> nodes_;
  bool weighted_ = false;  // false: every weight is 1
};

}  // namespace kvport::cluster
