// Connection: one TCP connection to a node, with pipelined requests.
//
// Any number of threads send requests on one Connection; each request carries a fresh request
// id and the node's responses are matched to their callers by that id, so a slow MGET does not
// hold up the calls behind it. Writing is serialised (one frame at a time, by the calling
// thread, from the caller's buffers); reading is done by one reader thread per connection,
// which hands each response to the ResponseHandler of the call it answers. A handler reads the
// payload straight into the caller's buffers: the reader thread places the payload where the
// handler says, and no call touches those buffers after it returns.
//
// A Connection never reconnects: once closed (the node went away, a write timed out mid-frame,
// the node broke the protocol) every pending and later call fails with the close reason,
// Unavailable, and the ConnectionPool replaces it.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/socket_io.h"
#include "kvport/status.h"
#include "net/host_port.h"
#include "net/socket.h"
#include "protocol/frame.h"
#include "protocol/limits.h"

namespace kvport::client {

// Decodes the response to one request. Runs on the connection's reader thread.
class ResponseHandler {
 public:
  virtual ~ResponseHandler() = default;

  // Called once the response's header and descriptor have arrived (`descriptor` holds the
  // descriptor bytes and stays valid for as long as this handler does). Decodes them and, when
  // the response has a payload, appends to `payload` where its bytes go, in order; the sizes
  // must add up to header.payload_length (a null iov_base discards that many bytes). A non-OK
  // return fails the call with that status (the payload is then discarded); Corruption also
  // closes the connection, since the node broke the protocol.
  virtual Status OnResponse(const protocol::FrameHeader& header, std::vector<iovec>* payload) = 0;

  // Bytes of the response's descriptor; filled by the connection before OnResponse.
  std::string descriptor;
};

class Connection {
 public:
  // Connects, sends HELLO (offering protocol versions kMinProtocolVersion..kMaxProtocolVersion)
  // and waits for the node's answer (version and limits), all before `deadline`. Errors:
  // Unavailable (refused, reset, no such host), Timeout, NotSupported (no common protocol version),
  // Corruption (the peer is not a kvport node).
  static Result<std::shared_ptr<Connection>> Open(const net::HostPort& address,
                                                  std::string_view client_name, Deadline deadline);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The limits the node announced: requests must fit them.
  const protocol::Limits& limits() const { return limits_; }
  // The protocol version negotiated in HELLO: requests are encoded with it, and every response
  // but ERROR must carry it.
  uint8_t version() const { return version_; }
  const std::string& server_name() const { return server_name_; }
  const std::string& peer() const { return peer_; }

  // A pending call: returned by Send, consumed by Wait.
  struct Call;
  using Ticket = std::shared_ptr<Call>;

  // A request id unique on this connection, for the encoder.
  uint64_t NextRequestId() { return next_request_id_.fetch_add(1, std::memory_order_relaxed); }

  // Writes `frame` (encoded with `request_id`) and registers `handler` for its response.
  // `handler` and the frame's payload buffers must stay valid until Wait returns (or Send
  // fails). Errors: Unavailable (closed or lost), Timeout (the deadline passed before the frame
  // was written; a partly written frame closes the connection).
  Result<Ticket> Send(uint64_t request_id, const protocol::EncodedFrame& frame,
                      ResponseHandler* handler, Deadline deadline);

  // Waits for the response to a sent request. OK when the handler accepted it; otherwise the
  // handler's error, the node's ERROR response, Unavailable when the connection was lost, or
  // Timeout when `deadline` passed first. When Wait returns, the reader thread is done with the
  // handler and with every buffer it named (a response still arriving at the deadline closes
  // the connection to guarantee that).
  Status Wait(const Ticket& ticket, Deadline deadline);

  // True until the connection is closed.
  bool alive() const { return alive_.load(std::memory_order_acquire); }
  // Closes the connection (idempotent): pending calls fail with `reason` (made Unavailable),
  // the reader thread stops. The descriptor is closed by the destructor only.
  void Close(const Status& reason);
  // Why the connection closed; OK while alive.
  Status close_reason() const;

 private:
  Connection(net::Socket socket, std::string peer);
  Status Handshake(std::string_view client_name, Deadline deadline);
  void ReadLoop();
  // Reads one response; a non-OK status ends the connection.
  Status ReadOneResponse();
  void FailAllPending(const Status& reason);
  // Settles a call whose response will never come (Send failure, Wait timeout); see Wait.
  void Abandon(const Ticket& ticket);

  net::Socket socket_;
  const std::string peer_;
  protocol::Limits limits_;
  uint8_t version_ = protocol::kMinProtocolVersion;
  std::string server_name_;
  std::atomic<uint64_t> next_request_id_{1};
  std::atomic<bool> alive_{true};

  std::timed_mutex write_mu_;  // one frame at a time

  mutable std::mutex mu_;  // guards pending_, close_reason_ and every Call's state
  std::unordered_map<uint64_t, Ticket> pending_;
  Status close_reason_;

  std::thread reader_;
};

}  // namespace kvport::client
