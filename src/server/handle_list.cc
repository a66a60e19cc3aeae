// SPDX-License-Identifier: Apache-2.0
// LIST: one page of a namespace's keys.
#include <string>
#include <variant>

#include "server/command_table.h"

namespace kvport::server {

Result<HandlerOutcome> HandleList(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& list = std::get<protocol::ListRequest>(request);
  KVPORT_ASSIGN_OR_RETURN(
      CacheService::ListPage page,
      ctx.service.List(ctx.grant(), ctx.session.id, list.ns, list.cursor, list.max_keys));
  protocol::ListResponse reply;  // views into `page`
  reply.keys.assign(page.keys.begin(), page.keys.end());
  reply.next_cursor = page.next_cursor;
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

}  // namespace kvport::server
