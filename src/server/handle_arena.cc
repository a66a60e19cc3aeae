// SPDX-License-Identifier: Apache-2.0
// The shared-memory requests (protocol version 3, Unix-socket sessions): SHM_ATTACH hands the
// peer the arena's memfd (UCX_ATTACH, version 9, a TCP session a key for node-checked UCX
// transfers); ARENA_RESERVE /
// ARENA_COMMIT are an MSET whose bytes the client copies into the arena itself; ARENA_GET /
// ARENA_RELEASE are an MGET whose bytes the client reads from its mapping, under a lease. No value
// byte crosses the socket.
#include <variant>
#include <vector>

#include <unistd.h>

#include "kvport/log.h"
#include "net/peer_uid.h"
#include "server/command_table.h"
#include "server/ucx_service.h"

namespace kvport::server {

namespace {

// ARENA_* requests need a granted attach (SHM_ATTACH, or UCX_ATTACH on a TCP
// session): without one the peer cannot reach the arena, so the request can only be a client
// bug (malformed: ERROR).
Status RequireAttached(const RequestContext& ctx) {
  if (ctx.session.shm_attached || ctx.session.ucx_attached) return Status::Ok();
  return Status::InvalidArgument(std::string(protocol::OpcodeName(ctx.header.opcode)) +
                                 " on a session without a granted SHM_ATTACH or UCX_ATTACH");
}

// Puts the session's lease word in an SHM_ATTACH answer; NotSupported,
// with the reason, when no word is left.
Status TakeLeaseWord(const RequestContext& ctx, protocol::ShmAttachResponse* reply) {
  Result<LeaseWords::Word> word = ctx.session.arena.TakeLeaseWord(ctx.service.lease_words());
  if (!word.ok()) return Status::NotSupported(word.status().message());
  reply->lease_word_offset = word->offset;
  reply->lease_generation = word->generation;
  return Status::Ok();
}

}  // namespace

Result<HandlerOutcome> HandleShmAttach(const RequestContext& ctx, protocol::AnyRequest&) {
  protocol::ShmAttachResponse reply;
  Status may = Status::Ok();
  if (ctx.session.kind != net::StreamKind::kUnix) {
    may = Status::NotSupported("shared memory is offered on the node's Unix socket only");
  } else if (ctx.session.peer_uid < 0) {
    may = Status::NotSupported("the peer's credentials (SO_PEERCRED) are unknown");
  } else if (!ctx.grant().grants_every_namespace()) {
    // The mapping shows every namespace's bytes: only a token that may read and write them all
    // may have it (docs/security.md). The client uses the Unix socket as a stream instead.
    may = Status::NotSupported("token '" + ctx.grant().name() +
                               "' does not grant every namespace, and the arena holds them all");
  } else {
    may = ctx.service.MayMapArena(static_cast<uid_t>(ctx.session.peer_uid));
  }
  // Version 6: the session's lease word, which moves on before the node frees any of its leased
  // bytes (server/lease_words.h). An older client cannot check one, and gets none.
  const bool lease_word = ctx.session.version >= protocol::kLeaseWordVersion;
  if (may.ok() && lease_word) may = TakeLeaseWord(ctx, &reply);
  std::string reason;  // outlives the encoding
  if (may.ok()) {
    reply.status = StatusCode::kOk;
    reply.arena_bytes = ctx.service.arena_bytes();
    ctx.session.shm_attached = true;
    ctx.service.counters().CountShmAttach();
  } else {
    reason = may.message();
    reply.status = may.code();
    reply.reason = reason;
    log::Info("SHM_ATTACH refused: {}", reason);
  }
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  if (may.ok()) {
    response.pass_fds.push_back(ctx.service.arena_fd());
    if (lease_word) response.pass_fds.push_back(ctx.service.lease_words()->fd());
  }
  return HandlerOutcome{std::move(response), nullptr};
}

// Who may reach the arena over UCX. Every value moves through the node's checks (ArenaWindow),
// but the window covers whatever the session reserves and leases, in any namespace: a token
// that grants every namespace, as for a mapping of the arena; and on an open node (no tokens,
// so loopback only), a peer of the node's own uid, as SO_PEERCRED decides for shared memory.
Status MayAttachUcx(const RequestContext& ctx) {
  if (ctx.service.ucx() == nullptr) {
    return Status::NotSupported("this node offers no UCX (kvport serve --ucx)");
  }
  if (!ctx.grant().grants_every_namespace()) {
    return Status::NotSupported("token '" + ctx.grant().name() +
                                "' does not grant every namespace, and the arena holds them all");
  }
  if (ctx.service.options().access_required) return Status::Ok();
  Result<uid_t> peer = net::LoopbackPeerUid(ctx.session.fd);
  if (!peer.ok()) {
    return Status::NotSupported("an open node offers UCX to local peers of its own uid only: " +
                                peer.status().message());
  }
  if (*peer != ::geteuid()) {
    return Status::NotSupported(
        "an open node offers UCX to peers of its own uid only; this peer runs as uid " +
        std::to_string(*peer) + " (give the node tokens to grant other users access)");
  }
  return Status::Ok();
}

Result<HandlerOutcome> HandleUcxAttach(const RequestContext& ctx, protocol::AnyRequest&) {
  protocol::UcxAttachResponse reply;
  const Status may = MayAttachUcx(ctx);
  std::string key;  // outlive the encoding
  std::string reason;
  if (may.ok()) {
    UcxService* ucx = ctx.service.ucx();
    key = ctx.session.arena.OpenUcxWindow(ucx, ctx.service.arena_base(), ctx.service.arena_bytes(),
                                          &ctx.service.access(), ctx.session.access);
    reply.ucx_port = ucx->port();
    reply.session_key = key;
    reply.arena_bytes = ctx.service.arena_bytes();
    ctx.session.ucx_attached = true;
  } else {
    reason = may.message();
    reply.status = may.code();
    reply.reason = reason;
    log::Info("UCX_ATTACH refused: {}", reason);
  }
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

Result<HandlerOutcome> HandleArenaReserve(const RequestContext& ctx,
                                          protocol::AnyRequest& request) {
  KVPORT_RETURN_IF_ERROR(RequireAttached(ctx));
  auto& reserve = std::get<protocol::ArenaReserveRequest>(request);
  protocol::ArenaReserveResponse reply;
  reply.items.resize(reserve.items.size());
  if (ctx.session.arena.reservations() >= ctx.service.options().max_reservations_per_session) {
    // Over the session's cap: nothing is reserved; the client commits or aborts some first.
    for (protocol::ArenaReservation& item : reply.items)
      item.status = StatusCode::kNoSpace;
  } else {
    WriteBatch batch(&ctx.service, ctx.session.access.shared_grant(), /*stepwise=*/false,
                     ctx.session.durability);
    for (const protocol::MsetItem& item : reserve.items) {
      batch.Reserve(reserve.ns, item.key, item.value_length, item.meta, reserve.ttl_seconds);
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      reply.items[i].status = batch.status(i);
      reply.items[i].offset = batch.offset(i);
    }
    if (batch.any_reserved())
      reply.reservation_id =
          ctx.session.arena.AddReservation(std::move(batch), MonotonicClock::now());
  }
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

Result<HandlerOutcome> HandleArenaCommit(const RequestContext& ctx, protocol::AnyRequest& request) {
  KVPORT_RETURN_IF_ERROR(RequireAttached(ctx));
  auto& commit = std::get<protocol::ArenaCommitRequest>(request);
  protocol::ArenaCommitResponse reply;
  KVPORT_ASSIGN_OR_RETURN(
      reply.statuses,
      ctx.session.arena.Commit(commit.reservation_id, commit.commit, commit.checksums));
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

Result<HandlerOutcome> HandleArenaGet(const RequestContext& ctx, protocol::AnyRequest& request) {
  KVPORT_RETURN_IF_ERROR(RequireAttached(ctx));
  auto& get = std::get<protocol::ArenaGetRequest>(request);
  const size_t n = get.keys.size();
  protocol::ArenaGetResponse reply;
  reply.results.resize(n);
  const bool over_cap = ctx.session.arena.leases() >= ctx.service.options().max_leases_per_session;
  std::vector<store::ReadHandle> pins;   // the lease: one pin per hit
  std::vector<store::ReadHandle> metas;  // pins of TooLarge items, held while encoding only
  pins.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    protocol::ArenaGetResult& result = reply.results[i];
    store::ReadHandle found;
    result.status = ctx.service.PinToRead(ctx.grant(), get.ns, get.keys[i].key, get.any_namespace,
                                          get.keys[i].buffer_capacity, &found);
    if (!found.valid()) continue;
    result.meta = found.meta();
    result.value_length = found.size();
    result.checksum = found.checksum();
    if (result.status == StatusCode::kTooLarge) {
      metas.push_back(std::move(found));
    } else if (over_cap) {
      // The session holds as many leases as it may: release some first.
      result.status = StatusCode::kNoSpace;
      result.meta = {};
      result.value_length = 0;
      result.checksum = 0;
    } else {
      result.offset = ctx.service.OffsetOf(found.data());
      pins.push_back(std::move(found));
    }
  }
  // The metas in `reply` are views into the stored objects, which the lease (for hits) and
  // `metas` (for TooLarge items) keep pinned while the response is encoded.
  if (!pins.empty()) reply.lease_id = ctx.session.arena.AddLease(std::move(pins));
  protocol::EncodedFrame frame;
  Status encoded = protocol::EncodeResponse(ctx.header.request_id, reply, ctx.service.limits(),
                                            &frame, ctx.header.version);
  if (!encoded.ok()) {
    if (reply.lease_id != 0) ctx.session.arena.ReleaseLease(reply.lease_id);
    return encoded.WithContext("encoding the ARENA_GET response");
  }
  Response response;
  response.head = std::move(frame.head);
  return HandlerOutcome{std::move(response), nullptr};
}

Result<HandlerOutcome> HandleArenaRelease(const RequestContext& ctx,
                                          protocol::AnyRequest& request) {
  KVPORT_RETURN_IF_ERROR(RequireAttached(ctx));
  auto& release = std::get<protocol::ArenaReleaseRequest>(request);
  protocol::ArenaReleaseResponse reply;
  for (uint64_t id : release.lease_ids) {
    if (ctx.session.arena.ReleaseLease(id)) ++reply.released;
  }
  // From version 7 nobody waits for the count: answering would cost both ends a system call
  // per shared-memory get.
  if (ctx.header.version >= protocol::kUnansweredReleaseVersion) return HandlerOutcome{};
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

}  // namespace kvport::server
