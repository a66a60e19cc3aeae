// SPDX-License-Identifier: Apache-2.0
// The connection's pending-call table: sending a call, finding it by request id, finishing or
// abandoning it, failing them all.
#include <memory>
#include <mutex>
#include <utility>

#include "client/connection.h"
#include "client/connection_call.h"

namespace kvport::client {

Result<Connection::Ticket> Connection::Send(uint64_t request_id,
                                            const protocol::EncodedFrame& frame,
                                            ResponseHandler* handler, Deadline deadline,
                                            Ticket reuse) {
  const uint64_t max_descriptor = handler->MaxDescriptorBytes(limits_);
  // A done call nobody else holds (the reader dropped it under mu_ before its Wait returned,
  // or is only dropping its reference now) is this call's storage: no allocation.
  if (reuse != nullptr && reuse.use_count() == 1 && reuse->owned_handler == nullptr) {
    reuse->Restart(request_id, handler, deadline, max_descriptor);
    return SendCall(std::move(reuse), frame, deadline);
  }
  return SendCall(std::make_shared<Call>(request_id, handler, deadline, max_descriptor), frame,
                  deadline);
}

Result<Connection::Ticket> Connection::SendCall(Ticket call, const protocol::EncodedFrame& frame,
                                                Deadline deadline) {
  {
    WaitableLock lock(mu_);
    if (!alive_.load(std::memory_order_relaxed)) return close_reason_;
    pending_.push_back(call);
  }
  Status written = WriteFrame(&frame, deadline);
  if (!written.ok()) {
    Abandon(call);
    return written;
  }
  return call;
}

Status Connection::Post(uint64_t request_id, const protocol::EncodedFrame& frame,
                        std::unique_ptr<ResponseHandler> handler, Deadline deadline) {
  auto call = std::make_shared<Call>(request_id, handler.get(), deadline,
                                     handler->MaxDescriptorBytes(limits_));
  call->owned_handler = std::move(handler);
  return SendCall(std::move(call), frame, deadline).status();
}

Connection::Abandoned Connection::Abandon(const Ticket& call) {
  {
    WaitableLock lock(mu_);
    switch (call->state) {
      case Call::State::kDone:
        return Abandoned::kCompleted;
      case Call::State::kWaiting:
        // The reader has not started on it: a late response will find no call and be drained.
        ErasePending(call->id);
        call->state = Call::State::kDone;
        call->result = Status::Timeout("abandoned before its response began");
        return Abandoned::kBeforeResponse;
      case Call::State::kReceiving:
        break;
    }
  }
  // The reader is on this call's response. Taking io_mu waits out a read into the caller's
  // buffers in progress (one readv of what the socket holds, never a wait for the node);
  // afterwards the reader sees `abandoned` and discards the rest.
  MutexLock io(call->io_mu);
  call->abandoned = true;
  return Abandoned::kMidResponse;
}

void Connection::Finish(Call& call, Status result) {
  WaitableLock lock(mu_);
  ErasePending(call.id);
  call.result = std::move(result);
  call.state = Call::State::kDone;
  call.done.notify_all();
}

Connection::Ticket* Connection::FindPending(uint64_t id) {
  for (Ticket& call : pending_) {
    if (call->id == id) return &call;
  }
  return nullptr;
}

void Connection::ErasePending(uint64_t id) {
  if (Ticket* call = FindPending(id)) {
    *call = std::move(pending_.back());
    pending_.pop_back();
  }
}

void Connection::FailAllPending(const Status& reason) {
  for (const Ticket& call : pending_) {
    call->state = Call::State::kDone;
    call->result = reason;
    call->done.notify_all();
  }
  pending_.clear();
}

}  // namespace kvport::client
