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

void Placement::Rank(std::string_view key, std::vector<uint32_t>* order) const {
  thread_local std::vector<double> scores;
  scores.resize(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const uint64_t h = XXH3_64bits_withSeed(key.data(), key.size(), nodes_[i].seed);
    // Equal weights: w / -ln(u) orders the nodes as u does, so the log can be skipped.
    scores[i] = weighted_ ? nodes_[i].weight / -std::log(Unit(h)) : Unit(h);
  }
  order->resize(nodes_.size());
  std::iota(order->begin(), order->end(), 0u);
  // Ties (equal scores: practically never) break by index, i.e. by member id.
  std::sort(order->begin(), order->end(), [&](uint32_t a, uint32_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
  });
}

}  // namespace kvport::cluster
