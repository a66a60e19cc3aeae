// SPDX-License-Identifier: Apache-2.0
// HELLO, PING, STATS and NODE_INFO: the requests that do not touch stored objects.
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <variant>

#include "net/socket.h"
#include "server/command_table.h"
#include "server/unauthenticated.h"

namespace kvport::server {

Result<HandlerOutcome> HandleHello(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& hello = std::get<protocol::HelloRequest>(request);
  Result<uint8_t> version = protocol::NegotiateVersion(hello);
  if (!version.ok()) return version.status();
  const AccessPolicy& access = ctx.service.access();
  if (access.required() && *version < protocol::kAccessVersion) {
    ctx.service.counters().CountAuthFailure();
    return Status::NotSupported(fmt::format(
        "this node requires a token, which needs protocol version {}; the client speaks up to {} "
        "(upgrade it)",
        protocol::kAccessVersion, hello.max_version));
  }
  // On a node with tokens a peer that failed too often is refused before its secret is looked
  // at; each refused secret is charged to it (server/auth_throttle.h). Either error closes the
  // connection.
  UnauthenticatedConnections* table = ctx.service.unauthenticated();
  AuthThrottle* throttle = table != nullptr ? table->throttle() : nullptr;
  std::string peer;
  if (throttle != nullptr) {
    peer = net::PeerAddress(ctx.session.fd);
    Status admitted = throttle->Admit(peer);
    if (!admitted.ok()) {
      ctx.service.counters().CountAuthThrottled();
      return admitted;
    }
  }
  // A verified client certificate (mutual TLS) stands for the token it is mapped to when the
  // client presents none (AccessToken::cert_names).
  Status authenticated =
      ctx.session.access.Authenticate(access, hello.token, ctx.session.peer_certificate_names);
  if (!authenticated.ok()) {
    ctx.service.counters().CountAuthFailure();
    if (throttle != nullptr && !hello.token.empty()) throttle->Charge(peer);
    return authenticated;
  }
  ctx.session.version = *version;
  protocol::HelloResponse reply;
  reply.version = *version;
  reply.limits = ctx.service.limits();
  reply.server_name = ctx.service.server_name();
  if (*version >= protocol::kDefaultNamespaceVersion)
    reply.default_namespace = ctx.session.access.grant().default_namespace();
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

Result<HandlerOutcome> HandlePing(const RequestContext& ctx, protocol::AnyRequest&) {
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, protocol::PingResponse{}));
  return HandlerOutcome{std::move(response), nullptr};
}

namespace {

// Wire bytes of a STATS counter and of a namespace row (docs/protocol.md).
size_t CounterBytes(std::string_view name) {
  return 1 + name.size() + 8;
}
size_t NamespaceBytes(std::string_view ns) {
  return 1 + ns.size() + 8 + 8;
}

}  // namespace

// The counters, then one page of the namespaces the token may see: those after the request's
// `after`, as many as asked for and as fit in a frame. A version 4 client is told whether more
// follow; an older one, which cannot page, gets the first page and the count left out.
Result<HandlerOutcome> HandleStats(const RequestContext& ctx, protocol::AnyRequest& request) {
  const auto& page = std::get<protocol::StatsRequest>(request);
  ServerStats stats = ctx.service.Stats(ctx.grant());
  std::sort(stats.namespaces.begin(), stats.namespaces.end(),
            [](const auto& a, const auto& b) { return a.ns < b.ns; });
  auto first = stats.namespaces.begin();
  if (!page.from_start) {
    first = std::upper_bound(stats.namespaces.begin(), stats.namespaces.end(), page.after,
                             [](std::string_view after, const auto& u) { return after < u.ns; });
  }
  const bool can_page = ctx.header.version >= protocol::kAccessVersion;
  // Room for the namespaces: the frame limit less the header, the counters (and one more
  // counter, namespaces_omitted), the two counts and `more`.
  size_t used = protocol::kFrameHeaderSize + 4 + 4 + 1 + CounterBytes("namespaces_omitted");
  for (const auto& [name, value] : stats.counters)
    used += CounterBytes(name);
  const uint64_t frame_limit = ctx.service.limits().max_frame_bytes;
  const uint64_t wanted = page.max_namespaces == 0 ? UINT64_MAX : page.max_namespaces;
  protocol::StatsResponse reply;  // views into `stats`, which outlives the encoding
  for (auto it = first; it != stats.namespaces.end(); ++it) {
    used += NamespaceBytes(it->ns);
    if (reply.namespaces.size() >= wanted || used > frame_limit) {
      reply.more = can_page;
      break;
    }
    reply.namespaces.push_back({it->ns, it->objects, it->bytes});
  }
  const uint64_t omitted =
      static_cast<uint64_t>(stats.namespaces.end() - first) - reply.namespaces.size();
  if (!can_page && omitted > 0) stats.counters.emplace_back("namespaces_omitted", omitted);
  reply.counters.reserve(stats.counters.size());
  for (const auto& [name, value] : stats.counters)
    reply.counters.push_back({name, value});
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

Result<HandlerOutcome> HandleNodeInfo(const RequestContext& ctx, protocol::AnyRequest&) {
  const NodeIdentity& identity = ctx.service.identity();
  protocol::NodeInfoResponse reply;
  reply.node_id = identity.node_id;
  reply.host_id = identity.host_id;
  if (ctx.service.offers_shared_memory()) {
    reply.offers |= protocol::kOfferSharedMemory;
    reply.unix_path = identity.unix_path;
  }
  // UCX_ATTACH as it is now needs version 9: an older session is not told of it (its own
  // UCX_ATTACH would be refused, and the error end its session).
  if (ctx.service.ucx() != nullptr && ctx.session.version >= protocol::kUcxVersion)
    reply.offers |= protocol::kOfferUcx;
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

}  // namespace kvport::server
