// HELLO, PING and STATS: the requests that do not touch stored objects.
#include <variant>

#include "server/command_table.h"

namespace kvport::server {

Result<HandlerOutcome> HandleHello(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& hello = std::get<protocol::HelloRequest>(request);
  Result<uint8_t> version = protocol::NegotiateVersion(hello);
  if (!version.ok()) return version.status();
  ctx.connection.version = *version;
  protocol::HelloResponse reply;
  reply.version = *version;
  reply.limits = ctx.server.limits;
  reply.server_name = ctx.server.server_name;
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

Result<HandlerOutcome> HandlePing(const RequestContext& ctx, protocol::AnyRequest&) {
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, protocol::PingResponse{}));
  return HandlerOutcome{std::move(response), nullptr};
}

Result<HandlerOutcome> HandleStats(const RequestContext& ctx, protocol::AnyRequest&) {
  ServerStats stats = CollectStats(*ctx.server.store, *ctx.server.counters);
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

}  // namespace kvport::server
