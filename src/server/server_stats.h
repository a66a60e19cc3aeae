// SPDX-License-Identifier: Apache-2.0
// ServerCounters: what the network side of a node counts (the store counts the rest).
//
// Relaxed atomics: each counter is exact, but a snapshot taken while requests run is not a
// consistent cut across counters (STATS never needed one).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kvport/server.h"
#include "protocol/frame.h"
#include "store/object_store.h"

namespace kvport::server {

class ServerCounters {
 public:
  // One request of `op` was dispatched (counted before it is handled, so a request that fails
  // is counted too).
  void CountRequest(protocol::Opcode op);
  // Admits one more connection if fewer than `max` are open (counting it open from now on);
  // false, counting a refusal, otherwise. Every admitted connection is closed once.
  bool TryAdmitConnection(uint32_t max);
  void ConnectionClosed();
  void CountErrorResponse() { error_responses_.fetch_add(1, std::memory_order_relaxed); }
  void CountIdleTimeout() { idle_timeouts_.fetch_add(1, std::memory_order_relaxed); }
  void CountAbortedMset() { aborted_msets_.fetch_add(1, std::memory_order_relaxed); }
  void AddBytesReceived(uint64_t n) { bytes_received_.fetch_add(n, std::memory_order_relaxed); }
  void AddBytesSent(uint64_t n) { bytes_sent_.fetch_add(n, std::memory_order_relaxed); }
  void CountShmAttach() { shm_attaches_.fetch_add(1, std::memory_order_relaxed); }
  void LeaseTaken(uint64_t bytes) {
    leases_.fetch_add(1, std::memory_order_relaxed);
    leased_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void LeaseReleased(uint64_t bytes) {
    leases_.fetch_sub(1, std::memory_order_relaxed);
    leased_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  uint64_t connections() const { return connections_.load(std::memory_order_relaxed); }

  // Appends ("name", value) pairs: connections, connections_accepted, connections_refused
  // (over max_connections), error_responses,
  // idle_timeouts, aborted_msets, bytes_received, bytes_sent, shm_attaches, leases (live
  // shared-memory leases), leased_bytes (value bytes they pin), op_<opcode> for every opcode.
  void AppendTo(std::vector<std::pair<std::string, uint64_t>>* counters) const;

 private:
  static constexpr size_t kOpcodeSlots = 16;
  std::array<std::atomic<uint64_t>, kOpcodeSlots> ops_{};
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> connections_accepted_{0};
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<uint64_t> error_responses_{0};
  std::atomic<uint64_t> idle_timeouts_{0};
  std::atomic<uint64_t> aborted_msets_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> shm_attaches_{0};
  std::atomic<uint64_t> leases_{0};
  std::atomic<uint64_t> leased_bytes_{0};
};

// Everything STATS reports: the store's counters and namespaces, then the server's counters.
// Names are snake_case: capacity_bytes, used_bytes, value_bytes, reserved_bytes, retired_bytes,
// objects, hits, misses, evictions, expirations, free_extents, largest_free_bytes, then the
// ServerCounters names.
ServerStats CollectStats(const store::ObjectStore& store, const ServerCounters& counters);

}  // namespace kvport::server
