// SPDX-License-Identifier: Apache-2.0
// UcxArena: the arena of a node offering UCX (kvport serve --ucx, protocol version 8), reached
// one-sided from this process (the ArenaAccess of ArenaTransport's UCX flavour).
//
// Every TCP session of the transport's pool sends UCX_ATTACH as it connects (Attach, the pool's
// PoolOptions::attach): the node answers with its UCX worker's address, the packed remote keys
// and ranges of its arena and of its lease words, and the session's lease word. The first
// answer connects one endpoint to the node's worker and attaches both regions through it; the
// sessions share them (the keys are the node's, not a session's). A value moves by one Peer::Put
// into the extent SHM_RESERVE gave, or one Peer::Get out of the extent SHM_GET leased; after a
// get's reads, one 8-byte read of the session's lease word says whether the node still held the
// leases. A frame's values are posted together and waited for together (ucx::Peer::PutAll,
// GetAll: one flush for all of a frame's puts). Every range is checked against the attached
// region first (ucx::Peer), so a reply naming bytes outside the arena is Corruption and never
// reaches UCX.
//
// Multi-rail (config ucx_devices): one worker per lane, each limited to its devices, with its
// own endpoint to the node's worker; a call's values, cut into pieces of at most kStripeBytes,
// are spread over the lanes round robin and moved on all of them at once.
//
// An operation that fails (the transfer was lost, or ran past its deadline and UCX's endpoint
// was closed) fails that value alone; the next operation connects a fresh endpoint to the same
// worker and attaches the regions again. A node that restarted has another worker: the first
// session attached to it replaces the endpoint and the regions.
//
// Thread-safe. A frame's transfers hold the worker until they are done (ucx::Worker): calls from
// several threads queue on it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/arena_transport.h"
#include "common/thread_annotations.h"
#include "device/ucx_rma.h"
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

  // PoolOptions::attach: UCX_ATTACH on `conn`, then every lane's endpoint to the node's worker
  // connected and its regions attached unless they already are. NotSupported when the node
  // speaks a protocol before version 8, or declines (its reason: no UCX offered, a token that
  // does not grant every namespace); Corruption for an answer that does not hold together;
  // UCX's errors as Unavailable.
  Status Attach(Connection& conn, Deadline deadline);

  std::string_view name() const override { return "UCX"; }
  bool lends() const override { return false; }
  void Write(Connection& conn, std::span<ArenaMove> moves, Deadline deadline) override;
  void Read(Connection& conn, std::span<ArenaMove> moves, Deadline deadline) override;
  Result<const uint8_t*> Lend(Connection& conn, uint64_t offset, uint64_t bytes) override;
  Result<bool> LeasesHeld(Connection& conn, Deadline deadline) override;

  size_t lanes() const { return workers_.size(); }
  // Value bytes each lane moved so far (tests: a large call was striped over every lane).
  std::vector<uint64_t> lane_bytes() const;
  // Endpoints connected to nodes' workers so far, every lane's, the first ones included (tests
  // check a failed transfer was followed by a fresh one).
  uint64_t endpoints_connected() const;

 private:
  struct NodeWorker;  // one node worker's address, keys and ranges, and an endpoint to it
  struct LaneShare;   // one lane's transfers of a call

  explicit UcxArena(std::vector<std::unique_ptr<ucx::Worker>> workers);
  // Lane `lane`'s endpoint and regions to use now: the attached ones, reconnected first if a
  // transfer broke them. Unavailable when no session attached yet or reconnecting fails.
  Result<std::shared_ptr<NodeWorker>> Current(size_t lane);
  // After a failed transfer through `node`: its endpoint is not used again.
  void Broken(const std::shared_ptr<NodeWorker>& node);
  // Maps ucx::Peer's verdicts to ArenaAccess's: an out-of-range offset is the node's fault; any
  // other failure breaks the endpoint.
  Status Transferred(const std::shared_ptr<NodeWorker>& node, Status s);
  // One lane's transfers, all at once (Peer::PutAll / GetAll); each one's outcome in its status.
  void MoveOnLane(size_t lane, LaneShare& share, Deadline deadline, bool put);
  // Every move at once, its pieces spread over the lanes (one thread per extra lane).
  void Move(std::span<ArenaMove> moves, Deadline deadline, bool put);

  const std::vector<std::unique_ptr<ucx::Worker>> workers_;  // one per lane
  mutable Mutex mu_;
  std::vector<std::shared_ptr<NodeWorker>> nodes_ GUARDED_BY(mu_);  // per lane; null: none yet
  std::vector<uint64_t> lane_bytes_ GUARDED_BY(mu_);
  uint64_t endpoints_connected_ GUARDED_BY(mu_) = 0;
};

}  // namespace kvport::client
