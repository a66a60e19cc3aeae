// SPDX-License-Identifier: Apache-2.0
// ClusterClient's routing: each key's candidate nodes (live first, in rendezvous order) and the
// keys of one round grouped by node.
#include <algorithm>
#include <span>
#include <vector>

#include "client/cluster_client.h"

namespace kvport::client {

ClusterClient::Routing ClusterClient::Route(std::span<const std::string> keys) {
  Routing routing;
  routing.view = CurrentView();
  const auto& slots = routing.view->slots;
  routing.stride = slots.size();
  const int64_t now = NowNs();
  routing.is_live.resize(slots.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    routing.is_live[s] = slots[s]->down_until_ns.load(std::memory_order_relaxed) <= now ? 1 : 0;
    routing.live += routing.is_live[s];
  }
  if (routing.live == 0) {  // everyone is down: try them all rather than none
    routing.is_live.assign(slots.size(), 1);
    routing.live = slots.size();
  }
  // The replicas and one node more for a failover: all a call without failures looks at.
  routing.depth = std::min<size_t>(routing.live, options_.replicas + 1);
  routing.key_hashes.resize(keys.size());
  routing.candidates.resize(keys.size() * routing.depth);
  for (size_t i = 0; i < keys.size(); ++i) {
    routing.key_hashes[i] = cluster::Placement::KeyHash(keys[i]);
    routing.view->placement.RankFirst(
        routing.key_hashes[i], routing.is_live,
        std::span<uint32_t>(routing.candidates.data() + i * routing.depth, routing.depth));
  }
  return routing;
}

uint32_t ClusterClient::Routing::RankInFull(size_t key, size_t rank) const {
  std::vector<uint32_t> order(stride);
  view->placement.RankHashed(key_hashes[key], order);
  // Live ones first, each part in rendezvous order.
  std::stable_partition(order.begin(), order.end(), [&](uint32_t s) { return is_live[s] != 0; });
  return order[rank];
}

void ClusterClient::Routing::FirstReplicas(size_t replicas, std::vector<uint32_t>* keys,
                                           std::vector<uint32_t>* slots) const {
  const size_t n = key_hashes.size();
  for (size_t i = 0; i < n; ++i) {
    for (size_t r = 0; r < replicas; ++r) {
      keys->push_back(static_cast<uint32_t>(i));
      slots->push_back(candidate(i, r));
    }
  }
}

std::vector<ClusterClient::Group> ClusterClient::GroupBy(std::span<const uint32_t> keys,
                                                         std::span<const uint32_t> slot_of_key) {
  // Slot indexes are small (one per member), so groups are found by index, in slot order.
  uint32_t slots = 0;
  for (uint32_t slot : slot_of_key)
    slots = std::max(slots, slot + 1);
  std::vector<size_t> sizes(slots);
  for (uint32_t slot : slot_of_key)
    ++sizes[slot];
  std::vector<Group> groups;
  std::vector<size_t> group_of(slots);
  for (uint32_t slot = 0; slot < slots; ++slot) {
    if (sizes[slot] == 0) continue;
    group_of[slot] = groups.size();
    groups.push_back(Group{slot, {}});
    groups.back().keys.reserve(sizes[slot]);
  }
  for (size_t k = 0; k < keys.size(); ++k)
    groups[group_of[slot_of_key[k]]].keys.push_back(keys[k]);
  // Ascending, so a group of all n keys is the call's own order (what the callers rely on to
  // pass the call's arrays as they are).
  for (Group& group : groups) {
    if (!std::is_sorted(group.keys.begin(), group.keys.end()))
      std::sort(group.keys.begin(), group.keys.end());
  }
  return groups;
}

}  // namespace kvport::client
