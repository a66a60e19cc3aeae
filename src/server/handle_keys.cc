// SPDX-License-Identifier: Apache-2.0
// MEXIST and MDEL: per-key probes and deletes, in one namespace or (the any-namespace flag) in
// every namespace that holds the key.
#include <algorithm>
#include <array>
#include <span>
#include <variant>

#include "server/command_table.h"

namespace kvport::server {

Result<HandlerOutcome> HandleMexist(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& mexist = std::get<protocol::MexistRequest>(request);
  protocol::MexistResponse& reply = ctx.session.scratch.mexist;
  reply.results.assign(mexist.keys.size(), protocol::ExistResult{});
  // A probe, not a use: no pin, no hit or miss counted, no LRU refresh.
  if (!mexist.any_namespace) {
    // The store probes a window of keys at once (store::ObjectStore::ExistsMany): each shard's
    // lock taken once, the keys' index slots fetched from memory together.
    constexpr size_t kWindow = 1024;
    std::array<StatusCode, kWindow> codes;
    std::array<uint64_t, kWindow> value_lengths;
    const std::span<const std::string_view> keys = mexist.keys;
    for (size_t first = 0; first < keys.size(); first += kWindow) {
      const size_t n = std::min(kWindow, keys.size() - first);
      ctx.service.ExistsMany(ctx.grant(), mexist.ns, keys.subspan(first, n),
                             std::span(codes).first(n), std::span(value_lengths).first(n));
      for (size_t i = 0; i < n; ++i)
        reply.results[first + i] = {codes[i], value_lengths[i]};
    }
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
