// SPDX-License-Identifier: Apache-2.0
// Reading responses off a connection's socket: header, descriptor and payload step by step,
// into the caller's buffers or discarded (the drain), resumable by the next reader.
#include "client/connection_frame.h"

#include <fmt/core.h>
#include <sys/uio.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "client/connection.h"
#include "client/connection_call.h"
#include "client/socket_io.h"
#include "kvport/log.h"
#include "protocol/messages.h"

namespace kvport::client {
namespace {

// A descriptor buffer starts at most this large and doubles as its bytes arrive.
constexpr size_t kDescriptorFirstBytes = 64 * 1024;

// `base + d`, saturating at kNoDeadline.
Deadline After(Deadline base, std::chrono::milliseconds d) {
  if (base >= kNoDeadline - d) return kNoDeadline;
  return base + d;
}

// A Timeout of the reader's own bound as what it is: a node that stopped sending mid-response.
Status Stalled(const Status& s, std::chrono::milliseconds drain_timeout) {
  if (s.code() != StatusCode::kTimeout) return s;
  return Status::Timeout(fmt::format(
      "the node stalled in the middle of a response (not complete {} ms after its call's "
      "deadline, drain_timeout)",
      drain_timeout.count()));
}

// Whether a node's ERROR ends the connection: one not tied to a request (id 0), or one that
// says the stream itself is broken (malformed bytes, a version the node does not speak), after
// which the node closes. Any other ERROR answers its request alone.
bool ErrorEndsConnection(const protocol::FrameHeader& header, const Status& error) {
  return header.request_id == 0 || error.code() == StatusCode::kCorruption ||
         error.code() == StatusCode::kNotSupported;
}

}  // namespace

Status NodeError(const protocol::FrameHeader& header, std::string_view descriptor,
                 const protocol::Limits& limits, std::string_view peer) {
  protocol::ErrorResponse error;
  Status decoded = protocol::DecodeResponse(header, descriptor, limits, &error);
  if (!decoded.ok()) {
    return Status::Corruption("node " + std::string(peer) +
                              " sent an undecodable ERROR frame: " + decoded.message());
  }
  return Status(error.code, "node " + std::string(peer) +
                                " rejected the request: " + std::string(error.message));
}

Status Connection::Advance(Deadline give_up, bool* paused, bool spin) {
  *paused = false;
  while (true) {
    Status status = Fill(give_up, paused, spin);
    if (status.ok() && *paused) return status;
    bool complete = false;
    if (status.ok()) status = Step(&complete);
    if (!status.ok()) {
      // The call this response answers fails with the cause; the others with the close.
      Ticket call = std::move(frame_->call);
      if (call != nullptr) {
        WaitableLock lock(mu_);
        if (call->state == Call::State::kReceiving) {
          ErasePending(call->id);
          call->result = status;
          call->state = Call::State::kDone;
          call->done.notify_all();
        }
      }
      frame_->Reset();
      return status;
    }
    if (complete) {
      frame_->Reset();
      return Status::Ok();
    }
  }
}

Status Connection::Fill(Deadline give_up, bool* paused, bool spin) {
  struct CountReads {
    Connection* conn;
    ~CountReads() {
      conn->socket_reads_.fetch_add(conn->stream_.TakeSocketReads(), std::memory_order_relaxed);
    }
  } count_reads{this};
  Frame& f = *frame_;
  while (f.left > 0) {
    while (f.iov[f.next].iov_len == 0)
      ++f.next;
    Result<net::IoProgress> read = net::IoProgress{};
    const size_t first = f.next;
    size_t end = first;
    if (f.iov[first].iov_base == nullptr) {
      iovec sink{f.sink, std::min(f.iov[first].iov_len, sizeof(f.sink))};
      read = stream_.ReadV(&sink, 1);
      end = first + 1;
    } else {
      // A run of real destinations: one readv per run (per wake-up), not one read per value.
      while (end < f.iov.size() && f.iov[end].iov_base != nullptr && end - first < IOV_MAX)
        ++end;
      if (f.to_caller) {
        MutexLock io(f.call->io_mu);
        if (f.call->abandoned) {
          f.abandoned = true;
        } else {
          read = stream_.ReadV(&f.iov[first], static_cast<int>(end - first));
          // Shown to the handler before the iovs move past them, under io_mu: the buffers are
          // the call's until it gives up.
          if (read.ok()) {
            size_t landed = read->bytes;
            for (size_t i = first; landed > 0 && i < end; ++i) {
              const size_t step = std::min(landed, f.iov[i].iov_len);
              if (step > 0) f.call->handler->OnPayloadBytes(i, f.iov[i].iov_base, step);
              landed -= step;
            }
          }
        }
      } else {
        read = stream_.ReadV(&f.iov[first], static_cast<int>(end - first));
      }
      if (f.abandoned && f.to_caller) {
        // Its call gave up: the caller's buffers are off limits, the rest is discarded.
        f.to_caller = false;
        KVPORT_RETURN_IF_ERROR(DiscardRest(f.left, "the rest of a response whose call timed out"));
        continue;
      }
    }
    if (!read.ok()) {
      return Status::Unavailable("connection lost while reading a response: " +
                                 read.status().message());
    }
    size_t moved = read->bytes;
    f.left -= moved;
    for (size_t i = first; moved > 0 && i < end; ++i) {
      const size_t step = std::min(moved, f.iov[i].iov_len);
      if (f.iov[i].iov_base != nullptr) {
        f.iov[i].iov_base = static_cast<char*>(f.iov[i].iov_base) + step;
      }
      f.iov[i].iov_len -= step;
      moved -= step;
    }
    if (f.left == 0) break;
    if (read->eof) return Status::Unavailable("the node closed the connection");
    if (!read->would_block) continue;
    if (f.phase == Frame::Phase::kHeader && f.until == kNoDeadline && f.open()) {
      // An idle connection waits as long as it takes for a response's first byte; the rest of
      // its header gets drain_timeout.
      f.until = After(MonotonicClock::now(), options_.drain_timeout);
    }
    // A give-up time already passed (a look at what has arrived: Poll, the watcher) ends at the
    // wait below, which then only asks whether the socket has more (a read-ahead stream that
    // found the socket drained did not ask it).
    const bool stall_first = f.until <= give_up;
    // Busy polling is for the round trip, before a response's first byte: once bytes stream
    // in, the node is sending and a spinning reader would only take CPU from it.
    const bool awaiting = f.phase == Frame::Phase::kHeader && !f.open();
    Status waited =
        WaitReadable(stream_, stall_first ? f.until : give_up,
                     spin && awaiting ? options_.busy_poll : std::chrono::microseconds(0));
    if (waited.code() == StatusCode::kTimeout) {
      if (!stall_first) {
        *paused = true;
        return Status::Ok();
      }
      if (f.phase == Frame::Phase::kHeader) {
        return Status::Timeout(
            fmt::format("the node stalled in the middle of a response header (more than {} ms)",
                        options_.drain_timeout.count()));
      }
      return Stalled(waited, options_.drain_timeout);
    }
    KVPORT_RETURN_IF_ERROR(waited);
  }
  return Status::Ok();
}

Status Connection::DiscardRest(uint64_t n, std::string_view what) {
  if (n > options_.drain_max_bytes) {
    return Status::Aborted(fmt::format(
        "{}: {} bytes to discard, more than drain_max_bytes ({}); closing instead of draining",
        what, n, options_.drain_max_bytes));
  }
  frame_->Expect(nullptr, n);
  frame_->drain = true;
  return Status::Ok();
}

Status Connection::NextDescriptorChunk() {
  Frame& f = *frame_;
  const size_t have = f.descriptor.size();
  // Grown as the bytes arrive: a header's claim alone never costs more than twice what was
  // received (plus the first chunk), and nothing is zero-filled before it is read into.
  const size_t next =
      std::min<size_t>(f.header.descriptor_length, std::max(kDescriptorFirstBytes, 2 * have));
  try {
    f.descriptor.resize(next);
  } catch (const std::bad_alloc&) {
    return Status::NoSpace(
        fmt::format("cannot allocate {} bytes for a response descriptor from {}", next, peer_));
  }
  f.Expect(f.descriptor.data() + have, next - have);
  return Status::Ok();
}

Status Connection::Step(bool* complete) {
  Frame& f = *frame_;
  switch (f.phase) {
    case Frame::Phase::kHeader: {
      protocol::FrameHeader& header = f.header;
      Status decoded =
          protocol::DecodeFrameHeader(std::string_view(f.head, sizeof(f.head)), limits_, &header);
      if (!decoded.ok()) {
        return Status::Corruption("malformed frame from the node: " + decoded.message());
      }
      if (!header.is_response()) {
        return Status::Corruption("the node sent a request frame (" +
                                  std::string(protocol::OpcodeName(header.opcode)) + ")");
      }
      if (header.opcode != protocol::Opcode::kError && header.version != version_) {
        return Status::Corruption(
            "the node sent a " + std::string(protocol::OpcodeName(header.opcode)) +
            " response of protocol version " + std::to_string(header.version) +
            " on a connection that negotiated version " + std::to_string(version_));
      }
      {
        WaitableLock lock(mu_);
        Ticket* pending = FindPending(header.request_id);
        if (pending != nullptr && (*pending)->state == Call::State::kWaiting) {
          f.call = *pending;
          f.call->state = Call::State::kReceiving;
        }
      }
      f.until = After(f.call != nullptr ? f.call->deadline : MonotonicClock::now(),
                      options_.drain_timeout);
      if (header.opcode == protocol::Opcode::kError) {
        if (header.descriptor_length > sizeof(f.error)) {
          return Status::Corruption(
              fmt::format("the node sent an ERROR frame with a descriptor of {} bytes (at most {})",
                          header.descriptor_length, sizeof(f.error)));
        }
        f.phase = Frame::Phase::kErrorDescriptor;
        f.Expect(f.error, header.descriptor_length);
        return Status::Ok();
      }
      if (f.call == nullptr) {
        // Nobody waits for it: its call timed out before the response began.
        f.phase = Frame::Phase::kPayload;
        return DiscardRest(header.descriptor_length + header.payload_length,
                           fmt::format("a late {} response", protocol::OpcodeName(header.opcode)));
      }
      if (header.descriptor_length > f.call->max_descriptor_bytes) {
        return Status::Corruption(
            fmt::format("the node announced a {} response descriptor of {} bytes; an answer to "
                        "this request has at most {}",
                        protocol::OpcodeName(header.opcode), header.descriptor_length,
                        f.call->max_descriptor_bytes));
      }
      f.phase = Frame::Phase::kDescriptor;
      f.descriptor.clear();
      return NextDescriptorChunk();
    }
    case Frame::Phase::kDescriptor: {
      if (f.descriptor.size() < f.header.descriptor_length) return NextDescriptorChunk();
      std::vector<iovec>& payload = f.handler_iov;
      payload.clear();
      {
        MutexLock io(f.call->io_mu);
        if (f.call->abandoned) {
          f.abandoned = true;
        } else {
          // The handler keeps the bytes (its answer's views point into them); the reader takes
          // the handler's previous buffer, so a handler used again brings its capacity back.
          ResponseHandler* handler = f.call->handler;
          std::swap(handler->descriptor, f.descriptor);
          f.result = handler->OnResponse(f.header, &payload);
        }
      }
      if (f.descriptor.capacity() > kDescriptorFirstBytes) f.descriptor = DescriptorBytes();
      if (f.result.ok() && !f.abandoned) {
        uint64_t placed = 0;
        for (const iovec& v : payload)
          placed += v.iov_len;
        if (placed != f.header.payload_length) {
          f.result = Status::Corruption(
              "response payload of " + std::to_string(f.header.payload_length) +
              " bytes does not match its descriptor (" + std::to_string(placed) + " bytes)");
        }
      }
      // The node broke the protocol: the rest of the stream cannot be trusted.
      if (f.result.code() == StatusCode::kCorruption) return f.result;
      f.phase = Frame::Phase::kPayload;
      if (f.abandoned || !f.result.ok()) {
        return DiscardRest(f.header.payload_length, "a response whose call timed out");
      }
      f.iov.swap(payload);  // both keep their capacity for the next responses
      f.next = 0;
      f.left = f.header.payload_length;
      f.to_caller = true;
      return Status::Ok();
    }
    case Frame::Phase::kErrorDescriptor: {
      Status error = NodeError(f.header, std::string_view(f.error, f.header.descriptor_length),
                               limits_, peer_);
      const bool fatal = ErrorEndsConnection(f.header, error);
      if (f.call != nullptr) {
        Finish(*f.call, error);
      } else if (!fatal) {
        log::Debug("dropping the node's ERROR for request {}, which no call waits for: {}",
                   f.header.request_id, error.ToString());
      }
      if (fatal) {
        f.call = nullptr;  // already finished with the node's word
        return error;
      }
      *complete = true;
      return Status::Ok();
    }
    case Frame::Phase::kPayload: {
      if (f.drain) drained_.fetch_add(1, std::memory_order_relaxed);
      if (f.call != nullptr) {
        Finish(*f.call, f.abandoned ? Status::Timeout("abandoned in the middle of its response")
                                    : std::move(f.result));
      }
      *complete = true;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

}  // namespace kvport::client
