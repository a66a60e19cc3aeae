// SPDX-License-Identifier: Apache-2.0
// HELLO, PING, STATS and NODE_INFO: the requests that do not touch stored objects.
#include <variant>

#include "server/command_table.h"

namespace kvport::server {

Result<HandlerOutcome> HandleHello(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& hello = std::get<protocol::HelloRequest>(request);
  Result<uint8_t> version = protocol::NegotiateVersion(hello);
  if (!version.ok()) return version.status();
  ctx.session.version = *version;
  protocol::HelloResponse reply;
  reply.version = *version;
  reply.limits = ctx.service.limits();
  reply.server_name = ctx.service.server_name();
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

Result<HandlerOutcome> HandlePing(const RequestContext& ctx, protocol::AnyRequest&) {
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, protocol::PingResponse{}));
  return HandlerOutcome{std::move(response), nullptr};
}

Result<HandlerOutcome> HandleStats(const RequestContext& ctx, protocol::AnyRequest&) {
  ServerStats stats = ctx.service.Stats();
  protocol::StatsResponse reply;  // views into `stats`, which outlives the encoding
  reply.counters.reserve(stats.counters.size());
  for (const auto& [name, value] : stats.counters)
    reply.counters.push_back({name, value});
  reply.namespaces.reserve(stats.namespaces.size());
  for (const auto& ns : stats.namespaces)
    reply.namespaces.push_back({ns.ns, ns.objects, ns.bytes});
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
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

}  // namespace kvport::server
