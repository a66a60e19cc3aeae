// SPDX-License-Identifier: Apache-2.0
// ShmTransport: values through a same-host node's arena, mapped into this process.
//
// Every connection of its pool is a Unix-socket session that attached the arena (SHM_ATTACH).
// A put reserves (SHM_RESERVE), copies each value into its reserved extent through the
// read-write mapping (one memcpy) and commits (SHM_COMMIT) on the same session; a get pins
// (SHM_GET), copies each hit out of the read-only mapping (one memcpy) and releases the lease
// (SHM_RELEASE) without waiting for the answer. A loan skips the copy: the caller reads the
// values in place until it drops the loan. Meta-only gets are ordinary MGETs (no value moves).
// A put of at most kMaxInlinePutBytes of values is an ordinary MSET: one exchange, its values
// through the socket, costs less than a reservation's second exchange (docs/performance.md).
//
// A session the node closes takes its leases and reservations with it; a connection is closed
// by this process only once no thread writes into its reservations (Connection::BeginArenaWrite).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "client/arena_mapping.h"
#include "client/stream_transport.h"
#include "client/transport.h"

namespace kvport::client {

class ShmTransport final : public Transport {
 public:
  // The most value bytes a put sends in its request instead of through the arena. Measured
  // (kvport bench --matrix, both ends busy-polling): a 4-12 KiB value put inline takes 1.3-1.7x
  // less time than a reserve-copy-commit; 16 KiB and more, or several values, take longer.
  static constexpr uint64_t kMaxInlinePutBytes = 8 << 10;

  // `pool` must have been built with `mapper` as its PoolOptions::arena_mapper.
  ShmTransport(std::unique_ptr<ArenaMapper> mapper, std::unique_ptr<ConnectionPool> pool);

  std::string_view name() const override { return "shared memory"; }
  TransportCapabilities capabilities() const override {
    TransportCapabilities c;
    c.zero_copy_reads = true;
    return c;
  }
  ConnectionPool& pool() override { return stream_.pool(); }
  void StartPut(const PutBatch& batch, Deadline deadline,
                std::unique_ptr<TransportCall>* call) override;
  void StartGet(const GetBatch& batch, Deadline deadline, Loan* loan,
                std::unique_ptr<TransportCall>* call) override;

 private:
  std::unique_ptr<ArenaMapper> mapper_;  // outlives the pool (declared first)
  StreamTransport stream_;               // the pool, and meta-only gets
};

}  // namespace kvport::client
