// SPDX-License-Identifier: Apache-2.0
// Connection::Call: one request sent on a connection, from Send to the end of Wait, and the
// states the reader moves it through (waiting, receiving, done).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "client/connection.h"
#include "common/thread_annotations.h"

namespace kvport::client {

struct Connection::Call {
  enum class State { kWaiting, kReceiving, kDone };

  Call(uint64_t request_id, ResponseHandler* h, Deadline d, uint64_t max_descriptor)
      : id(request_id), handler(h), deadline(d), max_descriptor_bytes(max_descriptor) {}

  // Makes a done call, held by nobody else, a new one (Send's `reuse`). Unchecked: nobody else
  // can take io_mu, so `abandoned` is written without it.
  void Restart(uint64_t request_id, ResponseHandler* h, Deadline d,
               uint64_t max_descriptor) NO_THREAD_SAFETY_ANALYSIS {
    id = request_id;
    handler = h;
    deadline = d;
    max_descriptor_bytes = max_descriptor;
    state = State::kWaiting;
    result = Status::Ok();
    abandoned = false;
  }

  // Set by the constructor or Restart, before the call is shared.
  uint64_t id;
  ResponseHandler* handler;
  std::unique_ptr<ResponseHandler> owned_handler;  // Post: the call owns its handler
  Deadline deadline;                               // the caller's; the reader drains past it
  uint64_t max_descriptor_bytes;                   // handler->MaxDescriptorBytes, taken by Send
  // Guarded by Connection::mu_. kWaiting: in pending_, nobody touches the handler;
  // kReceiving: the reader has taken it (see io_mu); kDone: result is final, off pending_.
  State state = State::kWaiting;
  Status result;
  std::condition_variable done;
  // The reader holds io_mu whenever it touches the handler or the caller's buffers, and checks
  // `abandoned` first; Abandon sets `abandoned` under io_mu, so once it has, the reader never
  // touches them again (it discards the rest of the response instead).
  Mutex io_mu;
  bool abandoned GUARDED_BY(io_mu) = false;
};

}  // namespace kvport::client
