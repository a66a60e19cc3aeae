// MEXIST and MDEL: per-key probes and deletes.
#include <variant>

#include "server/command_table.h"

namespace kvport::server {

Result<HandlerOutcome> HandleMexist(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& mexist = std::get<protocol::MexistRequest>(request);
  protocol::MexistResponse reply;
  reply.results.resize(mexist.keys.size());
  for (size_t i = 0; i < mexist.keys.size(); ++i) {
    protocol::ExistResult& result = reply.results[i];
    Status exists = ctx.server.store->Exists(mexist.ns, mexist.keys[i]);
    if (!exists.ok()) {
      result.status = exists.code();
      continue;
    }
    // The response carries the value length, which ObjectStore::Exists does not report; a
    // Lookup pin is the only way to read it (it counts a hit and refreshes the LRU position:
    // see /work/notes/requests.md). The object may vanish between the two calls: NotFound.
    Result<store::ReadHandle> found = ctx.server.store->Lookup(mexist.ns, mexist.keys[i]);
    if (!found.ok()) {
      result.status = found.status().code();
      continue;
    }
    result.status = StatusCode::kOk;
    result.value_length = found->size();
  }
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

Result<HandlerOutcome> HandleMdel(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& mdel = std::get<protocol::MdelRequest>(request);
  protocol::MdelResponse reply;
  reply.statuses.reserve(mdel.keys.size());
  for (std::string_view key : mdel.keys) {
    reply.statuses.push_back(ctx.server.store->Delete(mdel.ns, key).code());
  }
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

}  // namespace kvport::server
