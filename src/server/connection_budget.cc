// SPDX-License-Identifier: Apache-2.0
#include "server/connection_budget.h"

#include "server/stream_connection.h"

namespace kvport::server {

ConnectionBudget::Throttle ConnectionBudget::QueueThrottle(const net::OutputQueue& out) const {
  if (out.memory_bytes() > options_.max_outstanding_bytes) return Throttle::kOwnQueue;
  if (held_changes_ >= kMaxHeldChanges) return Throttle::kOwnQueue;
  if (held_changes_ > 0 && counters_.changes_waiting_for_disk() >= kMaxNodeHeldChanges)
    return Throttle::kNode;
  const uint64_t cap = options_.max_node_queued_bytes;
  if (cap == 0) return Throttle::kNone;
  const uint64_t own = out.heap_bytes();
  if (own > cap / kShareOfNodeQueue) return Throttle::kOwnQueue;
  if (own > 0 && counters_.queued_response_bytes() >= cap / 2) return Throttle::kNode;
  return Throttle::kNone;
}

size_t ConnectionBudget::InputAllowance(size_t own) const {
  const uint64_t cap = options_.max_node_input_bytes;
  if (cap == 0) return SIZE_MAX;
  const uint64_t node = counters_.input_buffer_bytes();
  return node >= cap ? own : own + static_cast<size_t>(cap - node);
}

void ConnectionBudget::Sync(uint64_t queued, uint64_t input) {
  const auto q = static_cast<int64_t>(queued);
  const auto i = static_cast<int64_t>(input);
  if (q != accounted_queued_) {
    counters_.AddQueuedResponseBytes(q - accounted_queued_);
    accounted_queued_ = q;
  }
  if (i != accounted_input_) {
    counters_.AddInputBufferBytes(i - accounted_input_);
    accounted_input_ = i;
  }
}

void ConnectionBudget::HoldChange() {
  ++held_changes_;
  counters_.AddChangesWaitingForDisk(1);
}

void ConnectionBudget::ReleaseChange() {
  if (held_changes_ == 0) return;  // released at close already
  --held_changes_;
  counters_.AddChangesWaitingForDisk(-1);
}

void ConnectionBudget::Release() {
  Sync(0, 0);
  SetPaused(false);
  counters_.AddChangesWaitingForDisk(-held_changes_);
  held_changes_ = 0;
}

void ConnectionBudget::SetPaused(bool paused) {
  if (paused == paused_) return;
  if (paused) counters_.CountBackpressurePause();
  counters_.AddPausedConnections(paused ? 1 : -1);
  paused_ = paused;
}

}  // namespace kvport::server
