// SPDX-License-Identifier: Apache-2.0
// ConnectionBudget's rule for changes waiting for the disk: a connection stops being read at
// its own cap of them, and one with any stops while the node has its cap; one with none is never
// held back by the others' (their node-wide figure, changes_waiting_for_disk, is kept by each).
#include "server/connection_budget.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "net/output_queue.h"
#include "server/server_stats.h"
#include "server/stream_connection.h"

namespace kvport::server {
namespace {

using Throttle = ConnectionBudget::Throttle;

TEST(ConnectionBudgetTest, AConnectionAtItsCapOfChangesWaitingForTheDiskIsNotRead) {
  ServerCounters counters;
  ConnectionOptions options;
  ConnectionBudget budget(counters, options);
  net::OutputQueue out;
  for (int i = 0; i < ConnectionBudget::kMaxHeldChanges - 1; ++i)
    budget.HoldChange();
  EXPECT_EQ(budget.QueueThrottle(out), Throttle::kNone);
  budget.HoldChange();
  EXPECT_EQ(budget.QueueThrottle(out), Throttle::kOwnQueue);
  EXPECT_EQ(counters.changes_waiting_for_disk(),
            static_cast<uint64_t>(ConnectionBudget::kMaxHeldChanges));
  budget.ReleaseChange();
  EXPECT_EQ(budget.QueueThrottle(out), Throttle::kNone);
  budget.Release();  // the connection closes with changes still waiting
  EXPECT_EQ(counters.changes_waiting_for_disk(), 0u);
  budget.ReleaseChange();  // their ends come after the close: nothing is counted twice
  EXPECT_EQ(counters.changes_waiting_for_disk(), 0u);
}

TEST(ConnectionBudgetTest, TheNodesCapHoldsBackOnlyConnectionsWithChangesWaiting) {
  ServerCounters counters;
  ConnectionOptions options;
  net::OutputQueue out;
  // Connections each below their own cap, together at the node's.
  std::vector<std::unique_ptr<ConnectionBudget>> others;
  uint64_t held = 0;
  while (held < ConnectionBudget::kMaxNodeHeldChanges) {
    others.push_back(std::make_unique<ConnectionBudget>(counters, options));
    for (int i = 0; i < ConnectionBudget::kMaxHeldChanges - 1; ++i, ++held)
      others.back()->HoldChange();
  }
  EXPECT_EQ(others.front()->QueueThrottle(out), Throttle::kNode);
  ConnectionBudget idle(counters, options);
  EXPECT_EQ(idle.QueueThrottle(out), Throttle::kNone);
  idle.HoldChange();
  EXPECT_EQ(idle.QueueThrottle(out), Throttle::kNode);
  for (auto& other : others)
    other->Release();
  EXPECT_EQ(idle.QueueThrottle(out), Throttle::kNone);
  EXPECT_EQ(counters.changes_waiting_for_disk(), 1u);
}

}  // namespace
}  // namespace kvport::server
