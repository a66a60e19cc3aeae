// SPDX-License-Identifier: Apache-2.0
// Placement: what routing one key costs a cluster call, by cluster size. A call used to rank
// every node for every key (Rank); it now works out the first two live ones (RankFirst:
// replicas = 1 and one node for a failover) and ranks in full only on a failover past them.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "cluster/placement.h"

namespace kvport {
namespace {

std::vector<cluster::Member> Members(int n) {
  std::vector<cluster::Member> members(n);
  for (int i = 0; i < n; ++i) {
    members[i].id = "node-" + std::to_string(i);
    members[i].address = "10.0.0." + std::to_string(i) + ":7000";
    members[i].capacity_bytes = uint64_t{64} << 30;
  }
  return members;
}

std::vector<std::string> Keys() {
  std::vector<std::string> keys(1024);
  for (size_t i = 0; i < keys.size(); ++i)
    keys[i] = "model@1@0@" + std::to_string(i * 7919) + "@bfloat16";
  return keys;
}

void BM_RankEveryNode(benchmark::State& state) {
  const std::vector<cluster::Member> members = Members(static_cast<int>(state.range(0)));
  const cluster::Placement placement(members);
  const std::vector<std::string> keys = Keys();
  std::vector<uint32_t> order(members.size());
  for (auto _ : state) {
    for (const std::string& key : keys) {
      placement.Rank(key, std::span<uint32_t>(order));
      benchmark::DoNotOptimize(order.data());
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * keys.size()));
}
BENCHMARK(BM_RankEveryNode)->Arg(4)->Arg(32)->Arg(128);

void BM_RankFirstTwo(benchmark::State& state) {
  const std::vector<cluster::Member> members = Members(static_cast<int>(state.range(0)));
  const cluster::Placement placement(members);
  const std::vector<std::string> keys = Keys();
  const std::vector<uint8_t> live(members.size(), 1);
  uint32_t first[2];
  for (auto _ : state) {
    for (const std::string& key : keys) {
      placement.RankFirst(cluster::Placement::KeyHash(key), live, first);
      benchmark::DoNotOptimize(first);
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * keys.size()));
}
BENCHMARK(BM_RankFirstTwo)->Arg(4)->Arg(32)->Arg(128);

}  // namespace
}  // namespace kvport
