// SPDX-License-Identifier: Apache-2.0
// What request handlers are given and what they give back.
//
// A handler turns one decoded request into a Response: the encoded head (header + descriptor)
// plus payload ranges borrowed from the store's arena, each kept alive (pinned) by its
// keep_alive until the session has written it. A request whose payload is still on the wire
// (MSET) returns a PayloadReceiver instead: the destination ranges the session fills from the
// socket before asking it for the Response. Handlers call the CacheService, never the store
// or a socket. A handler returning an error Status means "this request cannot be served": the
// session answers with an ERROR frame carrying that status, for that request alone (for HELLO,
// and for Corruption or NotSupported, it then closes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvport/status.h"
#include "net/listener.h"
#include "net/read_buffer.h"
#include "protocol/frame.h"
#include "protocol/limits.h"
#include "protocol/messages.h"
#include "server/access_policy.h"
#include "server/arena_holdings.h"
#include "server/cache_service.h"

namespace kvport::server {

struct Response {
  struct Span {
    const void* data = nullptr;
    size_t size = 0;
    std::shared_ptr<const void> keep_alive;
  };
  std::string head;  // empty: the request has no answer (ARENA_RELEASE from version 7)
  std::vector<Span> payloads;
  // Descriptors sent with the head's first byte (SHM_ATTACH's memfds), or none. Borrowed: they
  // stay open while the node runs.
  std::vector<int> pass_fds;
};

// What a session's handlers reuse from one request to the next (cleared, capacity kept), so
// that a warm session answers a get, a probe or a delete without allocating. The session gives
// each list back after it has queued the answer, and puts the head string its output queue has
// written into `frame` before the next request.
struct ReplyScratch {
  // The most items a kept list may hold between requests: a session that answered a larger
  // batch lets the list go (Trim), so what an idle session holds stays small (docs/store.md,
  // "Bounds on node memory"); calls of up to this many keys allocate nothing once warm.
  static constexpr size_t kKeptItems = 256;

  // The pins of one MGET answer's hits, which its payload ranges keep alive.
  struct PinBlock {
    std::vector<store::ReadHandle> handles;
  };

  protocol::EncodedFrame frame;  // answers are encoded here; its head becomes the Response's
  std::vector<Response::Span> payloads;  // a Response's payload list
  protocol::MgetResponse mget;
  protocol::MexistResponse mexist;
  // A MEXIST's probe answers as the store gives them (store::ObjectStore::ExistsMany).
  std::vector<StatusCode> exist_codes;
  std::vector<uint64_t> exist_lengths;
  protocol::MdelResponse mdel;
  // The last MGET's pin block. Once its ranges are written (nothing else holds it) the session
  // unpins them (ReleasePins) and the next MGET fills it again; while they are still queued, the
  // next MGET takes a new block and this one ends with its last range.
  std::shared_ptr<PinBlock> pins;

  // Unpins the last MGET's hits if its answer is written (the session calls it when its output
  // has drained).
  void ReleasePins() {
    if (pins != nullptr && pins.use_count() == 1) pins->handles.clear();
  }

  // After an answer is queued: takes back its payload list and `spare_head`, a head string the
  // output queue has written (kept when it is larger than the one `frame` has), then trims.
  void Recycle(std::vector<Response::Span> answer_payloads, std::string spare_head) {
    answer_payloads.clear();
    payloads = std::move(answer_payloads);
    if (spare_head.capacity() > frame.head.capacity()) frame.head.swap(spare_head);
    Trim();
  }

  // Lets every list that grew past kKeptItems go.
  void Trim() {
    TrimList(frame.payloads);
    TrimList(payloads);
    TrimList(mget.results);
    TrimList(mexist.results);
    TrimList(exist_codes);
    TrimList(exist_lengths);
    TrimList(mdel.statuses);
    // A large block is dropped here, or, still held by queued ranges, ends with the last one.
    if (pins != nullptr && pins->handles.capacity() > kKeptItems) pins = nullptr;
  }

 private:
  template <typename List>
  static void TrimList(List& list) {
    if (list.capacity() > kKeptItems) List().swap(list);
  }
};

// State of one session that handlers may read or change.
struct SessionState {
  uint64_t id = 0;       // CacheService::NewSessionId(): owns its LIST cursors
  uint8_t version = 0;   // negotiated protocol version; 0 until HELLO succeeded
  SessionAccess access;  // the session's grant, from HELLO on
  net::StreamKind kind = net::StreamKind::kTcp;
  int fd = -1;            // the session's socket (for checks of its peer)
  int64_t peer_uid = -1;  // Unix sessions: the peer's uid (SO_PEERCRED); -1 when unknown
  // TLS sessions: the names of the client certificate the handshake verified (mutual TLS).
  std::vector<std::string> peer_certificate_names;
  bool shm_attached = false;  // SHM_ATTACH was granted: ARENA_* requests are served
  bool ucx_attached = false;  // UCX_ATTACH was granted: ARENA_* requests are served too
  ArenaHoldings arena;
  ReplyScratch scratch;
  // Hears of the session's changes that wait for the disk tier, holding their answers until
  // they are durable (the connection's mailbox: server/connection_mailbox.h); null: a change
  // waits on the I/O thread.
  CacheService::Waiter durability;
};

// A request whose payload is still arriving. Before each read the session calls Prepare() with
// the bytes the socket holds at that moment; the receiver then adds to reader() the destinations
// of the bytes that have started to arrive (an MSET reserves an item, evicting if it must, only
// once its first byte is there: a stalled payload costs the cache nothing). The session reads
// into reader(), calling OnProgress() after every read, until remaining() is 0, then calls
// Finish() once. Destroying a receiver before Finish() abandons the request: nothing it
// reserved becomes visible and the space is returned.
class PayloadReceiver {
 public:
  virtual ~PayloadReceiver() = default;
  virtual void Prepare(uint64_t available) = 0;
  virtual net::ScatterReader& reader() = 0;
  virtual void OnProgress() = 0;
  // Payload bytes not yet read, whether or not their destinations exist yet.
  virtual uint64_t remaining() const = 0;
  virtual Result<Response> Finish() = 0;
};

struct HandlerOutcome {
  Response response;                          // when receiver is null
  std::unique_ptr<PayloadReceiver> receiver;  // when the request has a payload to read
};

struct RequestContext {
  CacheService& service;
  SessionState& session;
  const protocol::FrameHeader& header;

  // What the session may do (valid for every request after HELLO).
  const Grant& grant() const { return session.access.grant(); }
};

// Encodes a response message as a Response without payloads, with the request's id and version
// (the session's; HELLO responses are version 1 whatever it is).
template <typename Message>
Result<Response> EncodeSimpleResponse(const RequestContext& ctx, const Message& message) {
  protocol::EncodedFrame& frame = ctx.session.scratch.frame;
  Status s = protocol::EncodeResponse(ctx.header.request_id, message, ctx.service.limits(), &frame,
                                      ctx.header.version);
  if (!s.ok()) return s.WithContext("encoding the response");
  Response response;
  response.head = std::move(frame.head);
  return response;
}

}  // namespace kvport::server
