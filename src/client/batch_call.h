// SPDX-License-Identifier: Apache-2.0
// Batched calls over the pool: planning frames, sending them pipelined, collecting outcomes.
//
// A batched call (MSET, MGET, MEXIST, MDEL) is cut into frames that fit the node's limits
// (FramePlanner). Every frame is sent before any response is awaited, each on the next
// connection of the pool, so a large batch keeps several connections busy. KeyOutcomes collects
// one code per key: local rejections (a key over the limits, a buffer in unregistered device
// memory, a failed device copy), the node's per-key statuses, and for the keys of a frame whose
// call failed (connection lost, deadline) that failure.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/connection.h"
#include "client/connection_pool.h"
#include "client/frame_planner.h"
#include "kvport/client.h"
#include "kvport/status.h"
#include "protocol/messages.h"

namespace kvport::client {

// The per-key code for a node's per-key status. `mget` maps kTooLarge to kBufferTooSmall (an
// MGET answers kTooLarge when the value exceeds the caller's buffer).
KeyCode KeyCodeFromWire(StatusCode code, bool mget);

class KeyOutcomes {
 public:
  // `op` ("MSET") and `ns` name the call in messages; `any_namespace` says the call matched its
  // keys in any namespace (ns is then empty).
  KeyOutcomes(std::span<const std::string> keys, std::string_view op, std::string_view ns,
              bool any_namespace = false);
  KeyOutcomes() = default;
  // Starts over for another call, as the constructor would (keeping the lists' capacity).
  void Restart(std::span<const std::string> keys, std::string_view op, std::string_view ns,
               bool any_namespace = false);

  // Records a failure of key i; the first one becomes the BatchResult's error.
  void Fail(size_t i, KeyCode code, const Status& reason);
  // Records the node's status for key i (kOk is success).
  void FromWire(size_t i, StatusCode code, bool mget, std::string_view peer);
  bool failed(size_t i) const { return codes_[i] != KeyCode::kSuccess; }

  // Fills `out` (codes, overall status, error).
  void Finish(BatchResult* out);

 private:
  std::span<const std::string> keys_;
  std::string op_;
  std::string where_;  // "namespace 'NS'" or "any namespace"

  std::vector<KeyCode> codes_;
  Status first_error_;
};

// One frame of a batched call in flight. Destroyed before its response was waited for, it
// gives the call up (Wait with a deadline already passed): the connection never touches its
// handler or buffers afterwards. Sent again (SendFrames on a finished one), it reuses its
// handler's lists and its last ticket, so a warm call allocates nothing.
template <typename Handler>
struct FrameCall {
  FrameCall() = default;
  FrameCall(const FrameCall&) = delete;
  FrameCall& operator=(const FrameCall&) = delete;
  ~FrameCall() {
    if (ticket != nullptr) (void)conn->Wait(ticket, MonotonicClock::now());
  }

  FrameSlice slice;
  Handler handler;
  std::shared_ptr<Connection> conn;  // kept while `ticket` is (the destructor waits on it)
  Connection::Ticket ticket;
  Connection::Ticket spare;  // the ticket WaitFrames last finished: the next Send's storage
  Status status;             // of the whole frame: OK when its response was accepted
};

// Sends one frame per slice (slice 0 on `first`, the others on connections from `pool`) as
// *calls, reusing the finished FrameCalls already there, and encoding each into `frame` (its
// capacity reused too); WaitFrames then waits for their responses. `encode(call, request_id,
// limits, frame)` builds the frame for call.slice (with call.conn->version()) and may set up
// call.handler; a non-OK return fails that frame without sending it. The frames' buffers must
// stay valid until WaitFrames returns.
template <typename Handler, typename Encode>
void SendFrames(std::span<const FrameSlice> slices, std::shared_ptr<Connection> first,
                ConnectionPool& pool, Deadline deadline, Encode encode,
                std::vector<std::unique_ptr<FrameCall<Handler>>>* calls,
                protocol::EncodedFrame* frame) {
  calls->resize(slices.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    std::unique_ptr<FrameCall<Handler>>& slot = (*calls)[i];
    if (slot == nullptr) slot = std::make_unique<FrameCall<Handler>>();
    FrameCall<Handler>& call = *slot;
    call.slice = slices[i];
    call.status = Status::Ok();
    call.conn = nullptr;
    if (i == 0 && first != nullptr) {
      call.conn = std::move(first);
    } else {
      Result<std::shared_ptr<Connection>> conn = pool.Acquire(deadline);
      if (conn.ok()) {
        call.conn = std::move(conn).value();
      } else {
        call.status = conn.status();
      }
    }
    if (call.conn == nullptr) continue;
    const uint64_t id = call.conn->NextRequestId();
    call.status = encode(call, id, call.conn->limits(), frame);
    if (!call.status.ok()) continue;
    Result<Connection::Ticket> ticket =
        call.conn->Send(id, *frame, &call.handler, deadline, std::move(call.spare));
    if (ticket.ok()) {
      call.ticket = std::move(ticket).value();
    } else {
      call.status = ticket.status();
    }
  }
}

// Waits for the response of every call SendFrames sent (each call's status set); once it
// returns, no connection touches their handlers or buffers. Calls waited for before are left
// as they are.
template <typename Handler>
void WaitFrames(std::vector<std::unique_ptr<FrameCall<Handler>>>& calls, Deadline deadline) {
  for (auto& call : calls) {
    if (call->ticket == nullptr) continue;
    call->status = call->conn->Wait(call->ticket, deadline);
    call->spare = std::move(call->ticket);
  }
}

// Drops the calls' connections once WaitFrames has returned (and their answers are read): a
// finished call, kept for reuse or not, holds no connection (nor its descriptor) open.
template <typename Handler>
void ReleaseConnections(std::vector<std::unique_ptr<FrameCall<Handler>>>& calls) {
  for (auto& call : calls)
    call->conn = nullptr;
}

// Whether every sent call's response is in (WaitFrames would not wait), without waiting.
template <typename Handler>
bool FramesReady(const std::vector<std::unique_ptr<FrameCall<Handler>>>& calls) {
  for (const auto& call : calls) {
    if (call->ticket != nullptr && !call->conn->Poll(call->ticket)) return false;
  }
  return true;
}

// A node answer that does not decode (or answers another request) as Corruption, so that the
// connection closes: the node broke the protocol.
Status MalformedAnswer(const protocol::FrameHeader& header, const Status& why);

// Checks a decoded answer has one entry per requested key (Corruption otherwise).
Status CheckAnswer(const protocol::MsetRequest& request, const protocol::MsetResponse& response);
Status CheckAnswer(const protocol::MexistRequest& request,
                   const protocol::MexistResponse& response);
Status CheckAnswer(const protocol::MdelRequest& request, const protocol::MdelResponse& response);
Status CheckAnswer(const protocol::MgetRequest& request, const protocol::MgetResponse& response);
Status CheckAnswer(const protocol::ArenaReserveRequest& request,
                   const protocol::ArenaReserveResponse& response);
Status CheckAnswer(const protocol::ArenaCommitRequest& request,
                   const protocol::ArenaCommitResponse& response);
Status CheckAnswer(const protocol::ArenaGetRequest& request,
                   const protocol::ArenaGetResponse& response);
inline Status CheckAnswer(const protocol::NodeInfoRequest&, const protocol::NodeInfoResponse&) {
  return Status::Ok();
}
inline Status CheckAnswer(const protocol::ArenaReleaseRequest&,
                          const protocol::ArenaReleaseResponse&) {
  return Status::Ok();
}
inline Status CheckAnswer(const protocol::UcxAttachRequest&, const protocol::UcxAttachResponse&) {
  return Status::Ok();  // the decoder checks a grant holds together
}
inline Status CheckAnswer(const protocol::PingRequest&, const protocol::PingResponse&) {
  return Status::Ok();
}
inline Status CheckAnswer(const protocol::StatsRequest&, const protocol::StatsResponse&) {
  return Status::Ok();
}
inline Status CheckAnswer(const protocol::ListRequest&, const protocol::ListResponse&) {
  return Status::Ok();
}

// The largest descriptor a well-formed answer to `request` can have under `limits` (the wire
// layouts of docs/protocol.md): what a response header may announce before the client
// allocates anything for it.
uint64_t MaxAnswerDescriptorBytes(const protocol::MsetRequest& request,
                                  const protocol::Limits& limits);
uint64_t MaxAnswerDescriptorBytes(const protocol::MgetRequest& request,
                                  const protocol::Limits& limits);
uint64_t MaxAnswerDescriptorBytes(const protocol::MexistRequest& request,
                                  const protocol::Limits& limits);
uint64_t MaxAnswerDescriptorBytes(const protocol::MdelRequest& request,
                                  const protocol::Limits& limits);
uint64_t MaxAnswerDescriptorBytes(const protocol::ListRequest& request,
                                  const protocol::Limits& limits);
uint64_t MaxAnswerDescriptorBytes(const protocol::PingRequest& request,
                                  const protocol::Limits& limits);
uint64_t MaxAnswerDescriptorBytes(const protocol::NodeInfoRequest& request,
                                  const protocol::Limits& limits);
uint64_t MaxAnswerDescriptorBytes(const protocol::ArenaReserveRequest& request,
                                  const protocol::Limits& limits);
uint64_t MaxAnswerDescriptorBytes(const protocol::ArenaCommitRequest& request,
                                  const protocol::Limits& limits);
uint64_t MaxAnswerDescriptorBytes(const protocol::ArenaGetRequest& request,
                                  const protocol::Limits& limits);
uint64_t MaxAnswerDescriptorBytes(const protocol::ArenaReleaseRequest& request,
                                  const protocol::Limits& limits);
uint64_t MaxAnswerDescriptorBytes(const protocol::UcxAttachRequest& request,
                                  const protocol::Limits& limits);
// STATS answers are bounded by the protocol's response frame limit alone.
uint64_t MaxAnswerDescriptorBytes(const protocol::StatsRequest& request,
                                  const protocol::Limits& limits);

// Decodes a response without payload into `response` (views into `descriptor`).
template <typename Request, typename Response>
class DecodingHandler : public ResponseHandler {
 public:
  Request request;
  Response response;
  protocol::Limits limits;  // the connection's, set when the request is encoded

  Status OnResponse(const protocol::FrameHeader& header, std::vector<iovec>*) override {
    Status decoded = protocol::DecodeResponse(header, descriptor_view(), limits, &response);
    if (!decoded.ok()) return MalformedAnswer(header, decoded);
    return CheckAnswer(request, response);
  }
  uint64_t MaxDescriptorBytes(const protocol::Limits& conn_limits) const override {
    return MaxAnswerDescriptorBytes(request, conn_limits);
  }
};

// One request without keys or values (PING, STATS, LIST, NODE_INFO) on `conn`: handler->request,
// encoded with the connection's limits and version, and its answer in handler->response.
template <typename Request, typename Response>
Status RoundTripOn(Connection& conn, DecodingHandler<Request, Response>* handler,
                   Deadline deadline) {
  handler->limits = conn.limits();
  protocol::EncodedFrame frame;
  const uint64_t id = conn.NextRequestId();
  KVPORT_RETURN_IF_ERROR(
      protocol::EncodeRequest(id, handler->request, conn.limits(), &frame, conn.version()));
  KVPORT_ASSIGN_OR_RETURN(Connection::Ticket ticket, conn.Send(id, frame, handler, deadline));
  return conn.Wait(ticket, deadline);
}

// Decodes an MGET response and places each value it carries at destinations[i] (the caller's
// buffer, or its staging area in pinned host memory).
class MgetHandler : public ResponseHandler {
 public:
  MgetHandler();
  ~MgetHandler() override;

  protocol::MgetRequest request;
  protocol::MgetResponse response;
  protocol::Limits limits;
  std::vector<char*> destinations;  // one per request key
  // Hash each value as its bytes arrive (client/value_checksums.h: the check then costs no
  // pass over the value of its own): ReceivedChecksum answers for every result with a payload.
  bool hash_values = false;

  Status OnResponse(const protocol::FrameHeader& header, std::vector<iovec>* payload) override;
  void OnPayloadBytes(size_t index, const void* data, size_t bytes) override;
  uint64_t MaxDescriptorBytes(const protocol::Limits& conn_limits) const override {
    return MaxAnswerDescriptorBytes(request, conn_limits);
  }
  // With hash_values, the checksum of result i's value as it arrived (once the response is in).
  uint64_t ReceivedChecksum(size_t i) const;

 private:
  struct ValueHashes;  // xxh3 streaming states, per payload iov
  std::unique_ptr<ValueHashes> hashes_;
};

}  // namespace kvport::client
