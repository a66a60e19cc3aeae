// SPDX-License-Identifier: Apache-2.0
#include "client/ucx_arena.h"

#include <fmt/core.h>

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

Result<std::unique_ptr<UcxArena>> UcxArena::Open(const UcxRuntime& runtime) {
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<ucx::Worker> worker, ucx::Worker::Open(runtime));
  return std::unique_ptr<UcxArena>(new UcxArena(std::move(worker)));
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
  NodeWorker::Grant grant = NodeWorker::GrantOf(granted);
  MutexLock lock(mu_);
  if (node_ == nullptr || node_->grant != grant) {
    // The first session, or a node that restarted (another worker, another arena): sessions
    // attached to the old one are gone with it.
    Result<std::shared_ptr<NodeWorker>> node = NodeWorker::Connect(*worker_, std::move(grant));
    if (!node.ok()) return node.status().WithContext("UCX to the node at " + conn.peer());
    ++endpoints_connected_;
    node_ = std::move(node).value();
  }
  conn.SetRemoteLeaseWord({granted.lease_word_offset, granted.lease_generation});
  return Status::Ok();
}

Result<std::shared_ptr<UcxArena::NodeWorker>> UcxArena::Current() {
  MutexLock lock(mu_);
  if (node_ == nullptr) return Status::Unavailable("no session attached to the node's UCX yet");
  if (node_->broken) {
    Result<std::shared_ptr<NodeWorker>> fresh = NodeWorker::Connect(*worker_, node_->grant);
    if (!fresh.ok()) return fresh.status().WithContext("reconnecting UCX");
    ++endpoints_connected_;
    node_ = std::move(fresh).value();
    log::Info("UCX: reconnected to the node's worker after a failed transfer");
  }
  return node_;
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

void UcxArena::Move(std::span<ArenaMove> moves, Deadline deadline, bool put) {
  Result<std::shared_ptr<NodeWorker>> node = Current();
  if (!node.ok()) {
    for (ArenaMove& move : moves)
      move.status = node.status();
    return;
  }
  std::vector<ucx::Peer::Transfer> transfers;
  transfers.reserve(moves.size());
  for (const ArenaMove& move : moves)
    transfers.push_back({move.local, move.bytes, move.offset, Status::Ok()});
  ucx::Peer& peer = *(*node)->peer;
  if (put) {
    peer.PutAll(transfers, *(*node)->arena, deadline);
  } else {
    peer.GetAll(transfers, *(*node)->arena, deadline);
  }
  for (size_t i = 0; i < moves.size(); ++i)
    moves[i].status = Transferred(*node, std::move(transfers[i].status));
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
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<NodeWorker> node, Current());
  const Connection::RemoteLeaseWord& lease = conn.remote_lease_word();
  uint64_t word = 0;
  KVPORT_RETURN_IF_ERROR(Transferred(
      node, node->peer->Get(&word, sizeof(word), *node->words, lease.offset, deadline)));
  return word == lease.generation;
}

uint64_t UcxArena::endpoints_connected() const {
  MutexLock lock(mu_);
  return endpoints_connected_;
}

}  // namespace kvport::client
