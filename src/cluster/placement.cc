// SPDX-License-Identifier: Apache-2.0
#include "cluster/placement.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvport::cluster {
namespace {

// (0, 1) from the top 53 bits of a hash: never 0 or 1, so the log is finite and negative.
double Unit(uint64_t hash) {
  return (static_cast<double>(hash >> 11) + 0.5) * 0x1.0p-53;
}

// The score hash of a (key, node) pair: a bijective 64-bit finalizer (the constants of
// SplitMix64's) over both hashes, so every output bit depends on every bit of each.
uint64_t Mix(uint64_t key_hash, uint64_t id_hash) {
  uint64_t z = key_hash ^ (id_hash * 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

Placement::Placement(std::span<const Member> members) {
  const bool weighted = std::all_of(members.begin(), members.end(),
                                    [](const Member& m) { return m.capacity_bytes > 0; });
  weighted_ = weighted;
  nodes_.reserve(members.size());
  for (const Member& member : members) {
    nodes_.push_back(Node{XXH3_64bits(member.id.data(), member.id.size()),
                          weighted ? static_cast<double>(member.capacity_bytes) : 1.0});
  }
}

uint64_t Placement::KeyHash(std::string_view key) {
  return XXH3_64bits(key.data(), key.size());
}

double Placement::Score(uint64_t key_hash, size_t i) const {
  const double u = Unit(Mix(key_hash, nodes_[i].id_hash));
  // Equal weights: w / -ln(u) orders the nodes as u does, so the log can be skipped.
  return weighted_ ? nodes_[i].weight / -std::log(u) : u;
}

void Placement::Rank(std::string_view key, std::span<uint32_t> order) const {
  RankHashed(KeyHash(key), order);
}

// Every member's score for a key, on the stack up to 32 members (clusters are small), in a
// thread's own heap buffer beyond: computed in one loop, so the logarithms overlap.
class Placement::Scores {
 public:
  Scores(const Placement& placement, uint64_t key_hash) {
    const size_t n = placement.nodes_.size();
    if (n > kOnStack) {
      thread_local std::vector<double> heap;
      heap.resize(n);
      scores_ = heap.data();
    }
    for (size_t i = 0; i < n; ++i)
      scores_[i] = placement.Score(key_hash, i);
  }
  Scores(const Scores&) = delete;  // scores_ may point into this object
  Scores& operator=(const Scores&) = delete;
  double operator[](size_t i) const { return scores_[i]; }
  // Ties (equal scores: practically never) break by index, i.e. by member id.
  bool Before(uint32_t a, uint32_t b) const {
    return scores_[a] != scores_[b] ? scores_[a] > scores_[b] : a < b;
  }

 private:
  static constexpr size_t kOnStack = 32;
  double stack_[kOnStack];
  double* scores_ = stack_;
};

void Placement::RankHashed(uint64_t key_hash, std::span<uint32_t> order) const {
  const Scores scores(*this, key_hash);
  auto before = [&](uint32_t a, uint32_t b) { return scores.Before(a, b); };
  std::iota(order.begin(), order.end(), 0u);
  if (order.size() <= 32) {  // insertion sort: no calls, a handful of compares for a few nodes
    for (size_t i = 1; i < order.size(); ++i) {
      const uint32_t node = order[i];
      size_t j = i;
      for (; j > 0 && before(node, order[j - 1]); --j)
        order[j] = order[j - 1];
      order[j] = node;
    }
  } else {
    std::sort(order.begin(), order.end(), before);
  }
}

void Placement::RankFirst(uint64_t key_hash, std::span<const uint8_t> eligible,
                          std::span<uint32_t> first) const {
  const Scores scores(*this, key_hash);
  // The best first.size() so far, best first: an insertion into a short sorted list per
  // eligible member. Members come in index order, so a tie keeps the earlier one first.
  size_t kept = 0;
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    if (eligible[i] == 0) continue;
    size_t at = kept;
    while (at > 0 && scores[i] > scores[first[at - 1]])
      --at;
    if (at == first.size()) continue;
    for (size_t j = std::min(kept, first.size() - 1); j > at; --j)
      first[j] = first[j - 1];
    first[at] = i;
    kept = std::min(kept + 1, first.size());
  }
}

}  // namespace kvport::cluster
