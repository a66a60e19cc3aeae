// SPDX-License-Identifier: Apache-2.0
#include "client/ucx_arena.h"

#include <fmt/core.h>

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "client/batch_call.h"
#include "kvport/log.h"

namespace kvport::client {

// What UCX_ATTACH said about the node's worker (copied out of the answer), and this process's
// endpoint to it with both regions attached. Immutable once published in node_ (but `broken`):
// a reconnect publishes a new one, so a transfer still running on the old endpoint keeps it.
struct UcxArena::NodeWorker {
  struct Grant {
    std::string worker_address;
    std::string arena_key;
    uint64_t arena_base = 0;
    uint64_t arena_bytes = 0;
    std::string words_key;
    uint64_t words_base = 0;
    uint64_t words_bytes = 0;

    bool operator==(const Grant&) const = default;
  };

  static Grant GrantOf(const protocol::UcxAttachResponse& r) {
    return Grant{
        std::string(r.worker_address),  std::string(r.arena_key), r.arena_base,       r.arena_bytes,
        std::string(r.lease_words_key), r.lease_words_base,       r.lease_words_bytes};
  }

  // The endpoint to the grant's worker, both regions attached through it.
  static Result<std::shared_ptr<NodeWorker>> Connect(ucx::Worker& worker, Grant grant) {
    auto node = std::make_shared<NodeWorker>();
    node->grant = std::move(grant);
    const Grant& g = node->grant;
    KVPORT_ASSIGN_OR_RETURN(node->peer, worker.Connect(g.worker_address));
    KVPORT_ASSIGN_OR_RETURN(node->arena,
                            node->peer->Attach(g.arena_key, g.arena_base, g.arena_bytes));
    KVPORT_ASSIGN_OR_RETURN(node->words,
                            node->peer->Attach(g.words_key, g.words_base, g.words_bytes));
    return node;
  }

  Grant grant;
  std::unique_ptr<ucx::Peer> peer;
  std::unique_ptr<ucx::RemoteRegion> arena;
  std::unique_ptr<ucx::RemoteRegion> words;
  bool broken = false;  // a transfer failed: the next one connects afresh (UcxArena::mu_)
};

// One lane's share of a call: transfers[i] is moves[move[i]], or a stripe of it.
struct UcxArena::LaneShare {
  std::vector<ucx::Peer::Transfer> transfers;
  std::vector<size_t> move;
};

UcxArena::UcxArena(std::vector<std::unique_ptr<ucx::Worker>> workers)
    : workers_(std::move(workers)), nodes_(workers_.size()), lane_bytes_(workers_.size(), 0) {}

Result<std::unique_ptr<UcxArena>> UcxArena::Open(const UcxRuntime& runtime,
                                                 const std::vector<std::string>& devices) {
  std::vector<std::unique_ptr<ucx::Worker>> workers;
  for (size_t lane = 0; lane < std::max<size_t>(devices.size(), 1); ++lane) {
    const std::string lane_devices = devices.empty() ? std::string() : devices[lane];
    Result<std::unique_ptr<ucx::Worker>> worker = ucx::Worker::Open(runtime, lane_devices);
    if (!worker.ok()) {
      return devices.empty() ? worker.status()
                             : worker.status().WithContext(fmt::format(
                                   "UCX lane {} (ucx_devices '{}')", lane, lane_devices));
    }
    workers.push_back(std::move(worker).value());
  }
  return std::unique_ptr<UcxArena>(new UcxArena(std::move(workers)));
}

Status UcxArena::Attach(Connection& conn, Deadline deadline) {
  if (conn.version() < protocol::kUcxVersion) {
    return Status::NotSupported(
        fmt::format("UCX needs protocol version {}; the node at {} speaks version {}",
                    protocol::kUcxVersion, conn.peer(), conn.version()));
  }
  DecodingHandler<protocol::UcxAttachRequest, protocol::UcxAttachResponse> handler;
  KVPORT_RETURN_IF_ERROR(RoundTripOn(conn, &handler, deadline));
  const protocol::UcxAttachResponse& granted = handler.response;
  if (granted.status != StatusCode::kOk) {
    return Status(granted.status,
                  "the node at " + conn.peer() + " declined UCX: " + std::string(granted.reason));
  }
  const NodeWorker::Grant grant = NodeWorker::GrantOf(granted);
  MutexLock lock(mu_);
  for (size_t lane = 0; lane < workers_.size(); ++lane) {
    if (nodes_[lane] != nullptr && nodes_[lane]->grant == grant) continue;
    // The first session, or a node that restarted (another worker, another arena): sessions
    // attached to the old one are gone with it.
    Result<std::shared_ptr<NodeWorker>> node = NodeWorker::Connect(*workers_[lane], grant);
    if (!node.ok()) {
      return node.status().WithContext(
          fmt::format("UCX to the node at {} (lane {})", conn.peer(), lane));
    }
    ++endpoints_connected_;
    nodes_[lane] = std::move(node).value();
  }
  conn.SetRemoteLeaseWord({granted.lease_word_offset, granted.lease_generation});
  return Status::Ok();
}

Result<std::shared_ptr<UcxArena::NodeWorker>> UcxArena::Current(size_t lane) {
  MutexLock lock(mu_);
  std::shared_ptr<NodeWorker>& node = nodes_[lane];
  if (node == nullptr) return Status::Unavailable("no session attached to the node's UCX yet");
  if (node->broken) {
    Result<std::shared_ptr<NodeWorker>> fresh = NodeWorker::Connect(*workers_[lane], node->grant);
    if (!fresh.ok()) return fresh.status().WithContext("reconnecting UCX");
    ++endpoints_connected_;
    node = std::move(fresh).value();
    log::Info("UCX: reconnected lane {} to the node's worker after a failed transfer", lane);
  }
  return node;
}

void UcxArena::Broken(const std::shared_ptr<NodeWorker>& node) {
  MutexLock lock(mu_);
  node->broken = true;
}

Status UcxArena::Transferred(const std::shared_ptr<NodeWorker>& node, Status s) {
  if (s.ok()) return s;
  if (s.code() == StatusCode::kInvalidArgument) {
    return Status::Corruption("the node named bytes outside its registered memory: " + s.message());
  }
  Broken(node);
  return s;
}

void UcxArena::MoveOnLane(size_t lane, LaneShare& share, Deadline deadline, bool put) {
  std::vector<ucx::Peer::Transfer>& transfers = share.transfers;
  Result<std::shared_ptr<NodeWorker>> node = Current(lane);
  if (!node.ok()) {
    for (ucx::Peer::Transfer& t : transfers)
      t.status = node.status();
    return;
  }
  ucx::Peer& peer = *(*node)->peer;
  if (put) {
    peer.PutAll(transfers, *(*node)->arena, deadline);
  } else {
    peer.GetAll(transfers, *(*node)->arena, deadline);
  }
  uint64_t moved = 0;
  for (ucx::Peer::Transfer& t : transfers) {
    t.status = Transferred(*node, std::move(t.status));
    if (t.status.ok()) moved += t.bytes;
  }
  MutexLock lock(mu_);
  lane_bytes_[lane] += moved;
}

void UcxArena::Move(std::span<ArenaMove> moves, Deadline deadline, bool put) {
  // Each lane's share, in order: with one lane, a transfer is a whole value.
  const size_t lanes = workers_.size();
  std::vector<LaneShare> shares(lanes);
  size_t next = 0;
  for (size_t m = 0; m < moves.size(); ++m) {
    const ArenaMove& move = moves[m];
    uint64_t done = 0;
    do {
      const uint64_t bytes = lanes == 1 ? move.bytes : std::min(kStripeBytes, move.bytes - done);
      LaneShare& share = shares[next++ % lanes];
      share.transfers.push_back(
          {static_cast<char*>(move.local) + done, bytes, move.offset + done, Status::Ok()});
      share.move.push_back(m);
      done += bytes;
    } while (done < move.bytes);
  }
  std::vector<std::thread> helpers;
  for (size_t lane = 1; lane < lanes; ++lane) {
    if (shares[lane].transfers.empty()) continue;
    helpers.emplace_back(
        [this, lane, &shares, deadline, put] { MoveOnLane(lane, shares[lane], deadline, put); });
  }
  MoveOnLane(0, shares[0], deadline, put);
  for (std::thread& helper : helpers)
    helper.join();
  for (ArenaMove& move : moves)
    move.status = Status::Ok();
  for (const LaneShare& share : shares) {
    for (size_t i = 0; i < share.transfers.size(); ++i) {
      const Status& piece = share.transfers[i].status;
      Status& status = moves[share.move[i]].status;
      // A value fails with its first failed stripe; the node's fault (Corruption) wins.
      if (!piece.ok() && (status.ok() || piece.code() == StatusCode::kCorruption)) {
        status = piece;
      }
    }
  }
}

void UcxArena::Write(Connection&, std::span<ArenaMove> moves, Deadline deadline) {
  Move(moves, deadline, /*put=*/true);
}

void UcxArena::Read(Connection&, std::span<ArenaMove> moves, Deadline deadline) {
  Move(moves, deadline, /*put=*/false);
}

Result<const uint8_t*> UcxArena::Lend(Connection&, uint64_t, uint64_t) {
  return Status::NotSupported("values cannot be lent in place over UCX: the arena is not mapped");
}

Result<bool> UcxArena::LeasesHeld(Connection& conn, Deadline deadline) {
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<NodeWorker> node, Current(0));
  const Connection::RemoteLeaseWord& lease = conn.remote_lease_word();
  uint64_t word = 0;
  KVPORT_RETURN_IF_ERROR(Transferred(
      node, node->peer->Get(&word, sizeof(word), *node->words, lease.offset, deadline)));
  return word == lease.generation;
}

std::vector<uint64_t> UcxArena::lane_bytes() const {
  MutexLock lock(mu_);
  return lane_bytes_;
}

uint64_t UcxArena::endpoints_connected() const {
  MutexLock lock(mu_);
  return endpoints_connected_;
}

}  // namespace kvport::client
