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

void Placement::RankHashed(uint64_t key_hash, std::span<uint32_t> order) const {
  const size_t n = nodes_.size();
  // Clusters are small: scores live on the stack up to 32 nodes.
  constexpr size_t kOnStack = 32;
  double stack_scores[kOnStack];
  thread_local std::vector<double> heap_scores;
  double* scores = stack_scores;
  if (n > kOnStack) {
    heap_scores.resize(n);
    scores = heap_scores.data();
  }
  for (size_t i = 0; i < n; ++i)
    scores[i] = Score(key_hash, i);
  // Ties (equal scores: practically never) break by index, i.e. by member id.
  auto before = [&](uint32_t a, uint32_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
  };
  std::iota(order.begin(), order.end(), 0u);
  if (n <= kOnStack) {  // insertion sort: no calls, a handful of compares for a few nodes
    for (size_t i = 1; i < n; ++i) {
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
  // The best first.size() so far, best first, with their scores: an insertion into a short
  // sorted list per eligible member.
  constexpr size_t kOnStack = 8;
  double stack_scores[kOnStack];
  std::vector<double> heap_scores;
  double* kept_scores = stack_scores;
  if (first.size() > kOnStack) {
    heap_scores.resize(first.size());
    kept_scores = heap_scores.data();
  }
  size_t kept = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (eligible[i] == 0) continue;
    const double score = Score(key_hash, i);
    // Members come in index order, so a tie keeps the earlier one first (as Rank does).
    size_t at = kept;
    while (at > 0 && score > kept_scores[at - 1])
      --at;
    if (at == first.size()) continue;
    const size_t last = std::min(kept, first.size() - 1);
    for (size_t j = last; j > at; --j) {
      first[j] = first[j - 1];
      kept_scores[j] = kept_scores[j - 1];
    }
    first[at] = static_cast<uint32_t>(i);
    kept_scores[at] = score;
    kept = std::min(kept + 1, first.size());
  }
}

}  // namespace kvport::cluster
