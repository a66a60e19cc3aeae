// SPDX-License-Identifier: Apache-2.0
// ArenaTransport: values moved straight into and out of the node's arena, the socket carrying
// only control frames. How this process reaches the arena is an ArenaAccess:
//
//   MappedArena  a node on this host: its arena is mapped here (SHM_ATTACH on every Unix-socket
//                session), and a value moves by one memcpy, or none when lent in place.
//   UcxArena     any node offering UCX (protocol version 9): UCX_ATTACH on every TCP session,
//                and a value moves as one UCX message that the node copies into or out of the
//                arena after checking it against the session's holdings (client/ucx_arena.h).
//
// The protocol is the same for both. A put reserves (ARENA_RESERVE), writes each value into its
// reserved extent and commits (ARENA_COMMIT) on the same session; a get pins (ARENA_GET), reads
// each hit out of the arena and releases the lease (with the connection's next request); after the
// reads the access says whether the node still held the leases while they ran (a mapped arena
// asks the session's lease word; otherwise the bytes may have been reused: the frame fails). A
// value whose write or read fails on its own (a transfer the network lost) fails that key alone: a
// put aborts its extent, a get reports it Unavailable. Meta-only gets are ordinary MGETs (no value
// moves). A put of at most kMaxInlinePutBytes of values is an ordinary MSET: one exchange, its
// values through the socket, costs less than a reservation's second exchange (docs/performance.md).
//
// A session the node closes takes its leases and reservations with it; a connection is closed
// by this process only once no thread writes into its reservations (Connection::BeginArenaWrite).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "client/arena_mapping.h"
#include "client/stream_transport.h"
#include "client/transport.h"

namespace kvport::client {

// One value moved between the caller's memory and [offset, offset + bytes) of the arena.
struct ArenaMove {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  void* local = nullptr;  // a write's source (only read), a read's destination
  size_t item = 0;        // which item of its frame (for the caller)
  Status status;          // the outcome, set by the access
  // Hash the bytes moved (xxh3-64: a write's source, a read's destination), where the access
  // can fuse it with its copy: it then sets `hashed` and `checksum`. An access that cannot
  // leaves them, and the transport hashes the bytes itself.
  bool hash = false;
  bool hashed = false;
  uint64_t checksum = 0;
};

// How values reach the arena of the node a session (a Connection of the transport's pool) is
// attached to. Offsets and lengths come from the node's answers: each is checked against the
// arena before anything moves.
class ArenaAccess {
 public:
  virtual ~ArenaAccess() = default;
  virtual std::string_view name() const = 0;
  // Whether Lend works (the arena is mapped in this process).
  virtual bool lends() const = 0;
  // What bounds this process's reach into the node (TransportCapabilities::memory_protection).
  virtual MemoryProtection protection() const = 0;

  // Copies each move's bytes into the arena (extents `conn`'s session reserved), or out of it
  // (values it leased), all of a frame's at once so that their transfers may overlap; returns
  // when every one is done, its outcome in its status: Corruption when the range is not inside
  // the arena (the node broke the protocol: the caller closes the connection); any other error
  // fails that value alone (Unavailable: the transfer was lost; Timeout: `deadline` passed).
  virtual void Write(Connection& conn, std::span<ArenaMove> moves, Deadline deadline) = 0;
  virtual void Read(Connection& conn, std::span<ArenaMove> moves, Deadline deadline) = 0;
  // The value at [offset, offset + bytes) in place, valid while `conn`'s lease on it stands.
  virtual Result<const uint8_t*> Lend(Connection& conn, uint64_t offset, uint64_t bytes) = 0;
  // Called after reading leased values on `conn`: whether the node still held its session's
  // leases (false: it ended them, the bytes may have been reused). An error when that cannot be
  // told (then nothing read is trusted either).
  virtual Result<bool> LeasesHeld(Connection& conn, Deadline deadline) = 0;
};

// The access for a node on this host: the arena mapped through the pool's ArenaMapper.
class MappedArena final : public ArenaAccess {
 public:
  std::string_view name() const override { return "shared memory"; }
  bool lends() const override { return true; }
  MemoryProtection protection() const override { return MemoryProtection::kTrustedPeer; }
  // PoolOptions::arena_mapper of the pool this access is used with.
  ArenaMapper* mapper() { return &mapper_; }

  void Write(Connection& conn, std::span<ArenaMove> moves, Deadline deadline) override;
  void Read(Connection& conn, std::span<ArenaMove> moves, Deadline deadline) override;
  Result<const uint8_t*> Lend(Connection& conn, uint64_t offset, uint64_t bytes) override;
  Result<bool> LeasesHeld(Connection& conn, Deadline deadline) override;

 private:
  ArenaMapper mapper_;
};

class ArenaTransport final : public Transport {
 public:
  // The most value bytes a put sends in its request instead of through the arena. Measured
  // (kvport bench --matrix, both ends busy-polling): a 4-12 KiB value put inline takes 1.3-1.7x
  // less time than a reserve-copy-commit; 16 KiB and more, or several values, take longer.
  static constexpr uint64_t kMaxInlinePutBytes = 8 << 10;

  // Every connection of `pool` must have been attached through `access` (SHM_ATTACH with its
  // mapper, or UCX_ATTACH by its PoolOptions::attach).
  ArenaTransport(std::unique_ptr<ArenaAccess> access, std::unique_ptr<ConnectionPool> pool);

  std::string_view name() const override { return access_->name(); }
  TransportCapabilities capabilities() const override {
    TransportCapabilities c;
    c.zero_copy_reads = access_->lends();
    c.memory_protection = access_->protection();
    return c;
  }
  ConnectionPool& pool() override { return stream_.pool(); }
  void StartPut(const PutBatch& batch, Deadline deadline,
                std::unique_ptr<TransportCall>* call) override;
  void StartGet(const GetBatch& batch, Deadline deadline, Loan* loan,
                std::unique_ptr<TransportCall>* call) override;

 private:
  std::unique_ptr<ArenaAccess> access_;  // outlives the pool (declared first)
  StreamTransport stream_;               // the pool, small puts and meta-only gets
};

}  // namespace kvport::client
