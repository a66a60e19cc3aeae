// SPDX-License-Identifier: Apache-2.0
// MEXIST and MDEL: per-key probes and deletes, in one namespace or (the any-namespace flag) in
// every namespace that holds the key.
#include <variant>
#include <vector>

#include "server/command_table.h"

namespace kvport::server {

Result<HandlerOutcome> HandleMexist(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& mexist = std::get<protocol::MexistRequest>(request);
  protocol::MexistResponse& reply = ctx.session.scratch.mexist;
  reply.results.assign(mexist.keys.size(), protocol::ExistResult{});
  // A probe, not a use: no pin, no hit or miss counted, no LRU refresh.
  if (!mexist.any_namespace) {
    // The store probes the keys together (each shard's lock once, their index slots fetched
    // from memory at once) into the session's kept lists.
    std::vector<StatusCode>& codes = ctx.session.scratch.exist_codes;
    std::vector<uint64_t>& value_lengths = ctx.session.scratch.exist_lengths;
    codes.resize(mexist.keys.size());
    value_lengths.resize(mexist.keys.size());
    ctx.service.ExistsMany(ctx.grant(), mexist.ns, mexist.keys, codes, value_lengths);
    for (size_t i = 0; i < mexist.keys.size(); ++i)
      reply.results[i] = {codes[i], value_lengths[i]};
  } else {
    for (size_t i = 0; i < mexist.keys.size(); ++i) {
      protocol::ExistResult& result = reply.results[i];
      uint64_t value_length = 0;
      result.status =
          ctx.service.Exists(ctx.grant(), mexist.ns, mexist.keys[i], true, &value_length).code();
      if (result.status == StatusCode::kOk) result.value_length = value_length;
    }
  }
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

Result<HandlerOutcome> HandleMdel(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& mdel = std::get<protocol::MdelRequest>(request);
  protocol::MdelResponse& reply = ctx.session.scratch.mdel;
  reply.statuses.clear();
  for (std::string_view key : mdel.keys) {
    // Any-namespace: every namespace's copy goes; OK if there was at least one.
    reply.statuses.push_back(
        ctx.service.Delete(ctx.grant(), mdel.ns, key, mdel.any_namespace, ctx.session.durability)
            .code());
  }
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

}  // namespace kvport::server
