// SPDX-License-Identifier: Apache-2.0
// UcxArena: the arena of a node offering UCX (kvport serve --ucx, protocol version 9), reached
// through the node's UCX service from this process (the ArenaAccess of ArenaTransport's UCX
// flavour).
//
// Every TCP session of the transport's pool sends UCX_ATTACH as it connects (Attach, the pool's
// PoolOptions::attach): the node answers with its UCX listener's port and a key for this
// session. The session then has an endpoint of its own to the node's UCX listener on every lane
// (at the address its TCP connection reached), kept with the connection (Connection::
// ArenaSession) and closed with it, and the attach waits until the node answered one message
// on each. A value moves as one UCX message: a put carries the bytes for the extent ARENA_RESERVE
// gave and the node answers once they are in the arena; a get names the extent ARENA_GET leased
// and the node answers with the bytes. The node copies only inside what the session holds, so a
// get's bytes are the leased value's (LeasesHeld is always true). A frame's values are sent
// together and their answers waited for together. A range outside the arena the node named is
// Corruption and never sent.
//
// Multi-rail (config ucx_devices): one worker per lane, each limited to its devices, with its
// own endpoint per session; a call's values, cut into pieces of at most kStripeBytes, are
// spread over the lanes round robin and moved on all of them at once.
//
// A value that fails (its message was lost, or its call ran past its deadline and the lane's
// endpoint was closed) fails alone; the session's next value on that lane connects a fresh
// endpoint, which the node admits under the same key.
//
// Thread-safe. A lane's transfers hold its worker until they are done (ucx::Worker::Guard):
// calls from several threads queue on it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/arena_transport.h"
#include "common/thread_annotations.h"
#include "device/ucx_worker.h"
#include "kvport/ucx.h"

namespace kvport::client {

class UcxArena final : public ArenaAccess {
 public:
  // Values larger than this are cut into pieces of it, spread over the lanes (multi-rail).
  static constexpr uint64_t kStripeBytes = uint64_t{1} << 20;

  // A lane per entry of `devices` (config ucx_devices: each its own UCX worker limited to those
  // devices, UCX_NET_DEVICES' syntax, "mlx5_0:1"), or one lane with the process's UCX_*
  // configuration when it is empty; `runtime` must outlive the arena. NotSupported naming why
  // when UCX is not usable here; InvalidArgument or Unavailable when UCX refuses a lane.
  static Result<std::unique_ptr<UcxArena>> Open(const UcxRuntime& runtime,
                                                const std::vector<std::string>& devices = {});
  ~UcxArena() override;

  // PoolOptions::attach: UCX_ATTACH on `conn`, then an endpoint per lane to the node's UCX
  // listener, each answered once. NotSupported when the node speaks a protocol before version 9,
  // or declines (its reason: no UCX offered, a token that does not grant every namespace, a
  // peer of another uid on an open node); Corruption for an answer that does not hold together;
  // Unavailable naming the node's UCX address when it cannot be reached.
  Status Attach(Connection& conn, Deadline deadline);

  std::string_view name() const override { return "UCX"; }
  bool lends() const override { return false; }
  MemoryProtection protection() const override { return MemoryProtection::kNodeChecked; }
  void Write(Connection& conn, std::span<ArenaMove> moves, Deadline deadline) override;
  void Read(Connection& conn, std::span<ArenaMove> moves, Deadline deadline) override;
  Result<const uint8_t*> Lend(Connection& conn, uint64_t offset, uint64_t bytes) override;
  Result<bool> LeasesHeld(Connection& conn, Deadline deadline) override;

  size_t lanes() const { return lanes_.size(); }
  // Value bytes each lane moved so far (tests: a large call was striped over every lane).
  std::vector<uint64_t> lane_bytes() const;
  // Endpoints connected to nodes' UCX listeners so far, every lane's, the first ones included
  // (tests check a failed transfer was followed by a fresh one).
  uint64_t endpoints_connected() const;

 private:
  struct Lane;       // one worker and the calls waiting on it
  struct Session;    // one connection's key and endpoints (its Connection::ArenaSession)
  struct Pending;    // one transfer waiting for its answer
  struct LaneShare;  // one lane's transfers of a call

  explicit UcxArena(std::vector<std::shared_ptr<Lane>> lanes);
  // The transfers of `share` on lane `lane` of `session`, all at once; each one's outcome in
  // its status.
  void MoveOnLane(Session& session, size_t lane, LaneShare& share, Deadline deadline, bool put);
  // Every move at once, its pieces spread over the lanes (one thread per extra lane).
  void Move(Connection& conn, std::span<ArenaMove> moves, Deadline deadline, bool put);

  const std::vector<std::shared_ptr<Lane>> lanes_;
  mutable Mutex mu_;
  std::vector<uint64_t> lane_bytes_ GUARDED_BY(mu_);
  uint64_t endpoints_connected_ GUARDED_BY(mu_) = 0;
};

}  // namespace kvport::client
