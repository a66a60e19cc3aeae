// SPDX-License-Identifier: Apache-2.0
// ConnectionBudget: one connection's share of the node-wide memory gauges and the backpressure
// rule every connection follows, whatever its protocol (server/stream_connection.h).
//
// The rule: between requests a connection reads nothing more while its queued responses cost
// more than max_outstanding_bytes (net::OutputQueue::memory_bytes: heads, bookkeeping and the
// values they pin), or their heap more than an eighth of max_node_queued_bytes, or while it has
// responses queued and the heap of the node's queued responses is at half of
// max_node_queued_bytes or more. A connection with nothing queued is never held back by the
// others' answers: a client that reads its answers keeps being served while one that does not
// pauses itself alone (and is closed past the request deadline). The node's queued heap is then
// at most max_node_queued_bytes plus one answer per connection. Pinned values are not the
// node-wide cap's business: they live in the arena, bounded by the store's max_pinned_bytes.
//
// Changes waiting for the disk (a replaced or deleted version the disk held: its answer is
// written once its tombstone is durable, store::DurabilityWaiter) cost the disk tier's queue a
// tombstone each, and a client that never waits for its answers could queue them without end
// while the disk is slow. So between requests a connection also reads nothing more while it has
// kMaxHeldChanges of them, or has any while the node has kMaxNodeHeldChanges: the node's
// tombstones are then at most kMaxNodeHeldChanges plus one request's per connection.
//
// Called on the connection's loop thread only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "net/output_queue.h"
#include "server/server_stats.h"

namespace kvport::server {

struct ConnectionOptions;

class ConnectionBudget {
 public:
  // `counters` and `options` must outlive the budget.
  ConnectionBudget(ServerCounters& counters, const ConnectionOptions& options)
      : counters_(counters), options_(options) {}
  ~ConnectionBudget() = default;
  ConnectionBudget(const ConnectionBudget&) = delete;
  ConnectionBudget& operator=(const ConnectionBudget&) = delete;

  enum class Throttle { kNone, kOwnQueue, kNode };
  // Whether the responses queued in `out` (this connection's) and its changes waiting for the
  // disk, and the node's, hold its next request back, and whose: kOwnQueue clears as `out`
  // drains (its EPOLLOUT says when) or as its changes become durable (ReleaseChange), kNode as
  // other connections drain (no event of this one says when).
  Throttle QueueThrottle(const net::OutputQueue& out) const;

  // A change of this connection's waits for the disk (HoldChange), or no longer does
  // (ReleaseChange); the node's changes_waiting_for_disk follows.
  void HoldChange();
  void ReleaseChange();
  int held_changes() const { return held_changes_; }
  // The allocation an input buffer of `own` bytes may grow to now under max_node_input_bytes.
  size_t InputAllowance(size_t own) const;

  // Brings the node's gauges (queued_response_bytes, input_buffer_bytes) to this connection's
  // `queued` response heap and `input` buffer bytes.
  void Sync(uint64_t queued, uint64_t input);
  // Counts the connection as paused by backpressure (paused_connections; a new pause also
  // backpressure_pauses) or not.
  void SetPaused(bool paused);
  // At close: the connection's share leaves every gauge.
  void Release();

  // A connection with this many changes waiting for the disk reads no more requests; nor does
  // one with any while the node has kMaxNodeHeldChanges (a queued tombstone is ~150 bytes).
  static constexpr int kMaxHeldChanges = 256;
  static constexpr uint64_t kMaxNodeHeldChanges = 1 << 16;

 private:
  // A connection's queued heap may take at most 1/this of max_node_queued_bytes.
  static constexpr uint64_t kShareOfNodeQueue = 8;

  ServerCounters& counters_;
  const ConnectionOptions& options_;
  int64_t accounted_queued_ = 0;
  int64_t accounted_input_ = 0;
  int held_changes_ = 0;
  bool paused_ = false;
};

}  // namespace kvport::server
