// SPDX-License-Identifier: Apache-2.0
// Admission: the node-wide caps beside the arena (StoreOptions' max_index_bytes,
// max_reserved_bytes, max_pinned_bytes) and the gauges they bound, kept exact under any
// concurrency by compare-and-swap (private to store/).
#pragma once

#include <atomic>
#include <cstdint>

#include "kvport/status.h"
#include "store/stored_object.h"

namespace kvport::store {

struct Admission {
  uint64_t max_index_bytes = 0;  // StoreOptions' caps; 0: none
  uint64_t max_reserved_bytes = 0;
  uint64_t max_pinned_bytes = 0;
  // StoreOptions::index_bytes_elsewhere: heap charged against max_index_bytes outside the store.
  const std::atomic<uint64_t>* index_bytes_elsewhere = nullptr;

  // Node-wide gauges the caps apply to, each changed by atomic read-modify-writes only (see
  // TryAdmit), on their own cache line: objects' heap charges, reservations' extents not yet
  // written (max_reserved_bytes), and the extents of pinned objects. reserved_bytes (all of
  // reservations' extents) is reported, not capped.
  alignas(64) std::atomic<uint64_t> index_bytes{0};
  std::atomic<uint64_t> unwritten_bytes{0};
  std::atomic<uint64_t> reserved_bytes{0};
  std::atomic<uint64_t> pinned_bytes{0};
  std::atomic<uint64_t> reserve_cap_refusals{0};
  std::atomic<uint64_t> pin_cap_refusals{0};
  std::atomic<uint64_t> reservation_moves{0};
  std::atomic<uint64_t> reservation_moved_bytes{0};

  // Adds `n` to `gauge` unless that takes it above `cap` (0: no cap) while it already holds
  // something: one item larger than the cap is admitted alone, so it is not refused forever.
  static bool TryAdmit(std::atomic<uint64_t>& gauge, uint64_t n, uint64_t cap) {
    uint64_t current = gauge.load(std::memory_order_relaxed);
    do {
      if (cap != 0 && current != 0 && (current > cap || n > cap - current)) return false;
    } while (!gauge.compare_exchange_weak(current, current + n, std::memory_order_relaxed));
    return true;
  }

  // max_index_bytes less what is charged elsewhere (index_bytes_elsewhere).
  uint64_t IndexCap() const;

  // A pin more on `o`: its first pin adds its extent to pinned_bytes. `admitted`: the caller
  // already added it (the 0 -> 1 case it saw under the shard mutex).
  void AddPin(StoredObject* o, bool admitted) {
    const uint32_t before = o->pins.fetch_add(1, std::memory_order_relaxed);
    if (before == 0 && !admitted) {
      pinned_bytes.fetch_add(o->extent.length, std::memory_order_relaxed);
    } else if (before != 0 && admitted) {
      pinned_bytes.fetch_sub(o->extent.length, std::memory_order_relaxed);
    }
  }
  void DropPin(StoredObject* o) {
    if (o->pins.fetch_sub(1, std::memory_order_relaxed) == 1) {
      pinned_bytes.fetch_sub(o->extent.length, std::memory_order_relaxed);
    }
  }

  // A reservation stops counting (committed, or freed unwritten).
  void EndReservation(const StoredObject& o) {
    reserved_bytes.fetch_sub(o.extent.length, std::memory_order_relaxed);
    unwritten_bytes.fetch_sub(o.extent.length - o.written, std::memory_order_relaxed);
  }
};

// What a Lookup refused by max_pinned_bytes (`cap`) answers.
Status PinCapStatus(uint64_t cap);

}  // namespace kvport::store
