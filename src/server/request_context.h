// What request handlers are given and what they give back.
//
// A handler turns one decoded request into a Response: the encoded head (header + descriptor)
// plus payload ranges borrowed from the store's arena, each kept alive (pinned) by its
// keep_alive until the connection has written it. A request whose payload is still on the wire
// (MSET) returns a PayloadReceiver instead, which the connection feeds from the socket before
// asking it for the Response. A handler returning an error Status means "this request is
// malformed": the connection answers with an ERROR frame carrying that status and closes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvport/status.h"
#include "net/read_buffer.h"
#include "protocol/frame.h"
#include "protocol/limits.h"
#include "protocol/messages.h"
#include "server/list_cursors.h"
#include "server/server_stats.h"
#include "store/object_store.h"

namespace kvport::server {

// Shared by every connection of a node; members are thread-safe.
struct ServerContext {
  store::ObjectStore* store = nullptr;
  protocol::Limits limits;
  std::string server_name;
  ServerCounters* counters = nullptr;
  ListCursorTable* list_cursors = nullptr;
};

// State of one connection that handlers may read or change.
struct ConnectionState {
  uint8_t version = 0;  // negotiated protocol version; 0 until HELLO succeeded
};

struct Response {
  struct Span {
    const void* data = nullptr;
    size_t size = 0;
    std::shared_ptr<const void> keep_alive;
  };
  std::string head;
  std::vector<Span> payloads;
};

// A request whose payload is still arriving. The connection reads into reader() until it is
// done(), calling OnProgress() after every read, then calls Finish() once. Destroying a receiver
// before Finish() abandons the request: nothing it reserved becomes visible and the space is
// returned.
class PayloadReceiver {
 public:
  virtual ~PayloadReceiver() = default;
  virtual net::ScatterReader& reader() = 0;
  virtual void OnProgress() = 0;
  virtual Result<Response> Finish() = 0;
};

struct HandlerOutcome {
  Response response;                          // when receiver is null
  std::unique_ptr<PayloadReceiver> receiver;  // when the request has a payload to read
};

struct RequestContext {
  const ServerContext& server;
  ConnectionState& connection;
  const protocol::FrameHeader& header;
};

// Encodes a response message as a Response without payloads, with the request's id and version
// (the connection's; HELLO responses are version 1 whatever it is).
template <typename Message>
Result<Response> EncodeSimpleResponse(const RequestContext& ctx, const Message& message) {
  protocol::EncodedFrame frame;
  Status s = protocol::EncodeResponse(ctx.header.request_id, message, ctx.server.limits, &frame,
                                      ctx.header.version);
  if (!s.ok()) return s.WithContext("encoding the response");
  Response response;
  response.head = std::move(frame.head);
  return response;
}

}  // namespace kvport::server
