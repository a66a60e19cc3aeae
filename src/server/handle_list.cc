// LIST: one page of a namespace's keys.
#include <string>
#include <variant>

#include "server/command_table.h"

namespace kvport::server {

Result<HandlerOutcome> HandleList(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& list = std::get<protocol::ListRequest>(request);
  std::string store_cursor;
  if (list.cursor != 0) {
    std::optional<std::string> found = ctx.server.list_cursors->Find(list.cursor, list.ns);
    if (!found) {
      return Status::InvalidArgument("LIST cursor " + std::to_string(list.cursor) +
                                     " is unknown for this namespace or was forgotten; "
                                     "restart the listing with cursor 0");
    }
    store_cursor = std::move(*found);
  }
  KVPORT_ASSIGN_OR_RETURN(store::KeyPage page,
                          ctx.server.store->ListKeys(list.ns, store_cursor, list.max_keys));
  protocol::ListResponse reply;
  reply.keys.assign(page.keys.begin(), page.keys.end());
  if (!page.next_cursor.empty()) {
    reply.next_cursor = ctx.server.list_cursors->Issue(list.ns, std::move(page.next_cursor));
  }
  KVPORT_ASSIGN_OR_RETURN(Response response, EncodeSimpleResponse(ctx, reply));
  return HandlerOutcome{std::move(response), nullptr};
}

}  // namespace kvport::server
