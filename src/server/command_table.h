// SPDX-License-Identifier: Apache-2.0
// The command table: every request the node serves, what it does, and who handles it.
//
// The kvport protocol's handler (server/kvport_protocol.h) decodes a frame into a
// protocol::AnyRequest and looks its opcode up here; the table is the one place that says which
// opcodes exist for a server and what each one means.
#pragma once

#include <string_view>

#include "protocol/frame.h"
#include "protocol/messages.h"
#include "server/request_context.h"

namespace kvport::server {

using CommandHandler = Result<HandlerOutcome> (*)(const RequestContext& ctx,
                                                  protocol::AnyRequest& request);

struct Command {
  protocol::Opcode opcode;
  // HELLO is the only command accepted before a version has been negotiated.
  bool requires_hello;
  CommandHandler handler;
  std::string_view summary;
};

// The entry for `opcode`, or nullptr for an opcode the server does not serve (ERROR).
const Command* FindCommand(protocol::Opcode opcode);

// Handlers, one file each (handle_*.cc). `request` holds the alternative matching the opcode.
Result<HandlerOutcome> HandleHello(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandlePing(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleStats(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleMset(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleMget(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleMexist(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleMdel(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleList(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleNodeInfo(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleShmAttach(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleUcxAttach(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleArenaReserve(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleArenaCommit(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleArenaGet(const RequestContext& ctx, protocol::AnyRequest& request);
Result<HandlerOutcome> HandleArenaRelease(const RequestContext& ctx, protocol::AnyRequest& request);

}  // namespace kvport::server
