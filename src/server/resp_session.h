// SPDX-License-Identifier: Apache-2.0
// RespSession: one client of a node speaking the Redis protocol (RESP2, RESP3 after HELLO 3;
// docs/resp.md) over TCP, served by one event loop like a binary Session and under the same
// rules (server/session.h): the same SessionOptions, the idle timeout and deadline sweeps of
// its worker, the node-wide gauges of queued responses and input buffers.
//
// Reading: bytes go into the session's input buffer, which grows (doubling, from 16 KiB) only
// with bytes that arrived, never with a length a client announced; a command may be at most
// max_frame_bytes + max_value_bytes long (one value and its key), and before AUTH on a node
// with tokens at most kMaxUnauthenticatedCommandBytes. The buffer counts against the node's
// max_input_buffer_bytes: one that would grow past it waits, unread, until others shrink or
// the command's deadline passes. Every complete command in the buffer is run in order
// (pipelining), its reply gathered with the others of the same readiness event and queued
// once; a GET's value larger than a few KiB is sent straight from the arena (pinned until
// written), as a binary MGET's is, and a SET's value of 64 KiB or more is read straight into
// its reservation, as a binary MSET's is (server/resp_value_capture.h).
//
// Backpressure: between commands, the session runs and reads nothing more while its queued
// replies cost more than max_outstanding_bytes, or the node's queued heap is at its cap (the
// Session's rule), so a client that never reads its replies holds a bounded amount.
//
// Deadline: an incomplete command must arrive whole within request_timeout plus 1 s per
// min_request_bytes_per_sec bytes of it, from its first byte: past it the session answers
// "-ERR ... timeout" and closes. A protocol error gets one "-ERR Protocol error: ..." and the
// session half-closes (the stream cannot be resynchronised), as Redis does.
//
// All members are called on the loop thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/event_loop.h"
#include "net/output_queue.h"
#include "net/socket.h"
#include "net/stream.h"
#include "server/cache_service.h"
#include "server/connection.h"
#include "server/connection_budget.h"
#include "server/resp_commands.h"
#include "server/resp_value_capture.h"
#include "server/session.h"

namespace kvport::server {

class RespSession final : public Connection {
 public:
  // Before AUTH on a node with tokens: the largest command read (an AUTH or a HELLO with one).
  static constexpr size_t kMaxUnauthenticatedCommandBytes = 4096;

  RespSession(net::EventLoop* loop, net::Socket socket, uint64_t id, CacheService& service,
              const SessionOptions& options, std::function<void(Connection*)> on_closed);
  ~RespSession() override;

  Status Start() override;
  void OnEvents(uint32_t events) override;
  void BeginShutdown() override;
  void Close(std::string_view reason) override;
  bool closed() const override { return phase_ == Phase::kClosed; }
  uint64_t id() const override { return client_.id; }
  bool authenticated() const override { return client_.access.authenticated(); }
  bool HelloOverdue(MonotonicClock::time_point now) const override;
  void CloseWithError(const Status& status) override;
  MonotonicClock::time_point last_activity() const override { return last_activity_; }
  const std::string& peer() const override { return peer_; }
  bool RequestOverdue(MonotonicClock::time_point now) const override;
  void AbortOverdueRequest() override;

 private:
  enum class Phase {
    kServing,  // reading and running commands
    kClosing,  // writing the last replies (QUIT, a protocol error, the peer's EOF); then close
    kLinger,   // half-closed: discarding input until the peer closes
    kClosed,
  };
  using Throttle = ConnectionBudget::Throttle;

  void OnReadable();
  // Runs the complete commands buffered (at most a bounded number: see the .cc); false when it
  // stopped with complete commands left (throttled or out of budget).
  bool ServeBuffered();
  // Reads once into the buffer (and a captured value's reservation); false when nothing was
  // read or the session closed.
  bool ReadSome();
  // Room at the input buffer's end (moving what is buffered to its front, growing it within the
  // node's input cap); false when there is none.
  bool MakeInputRoom();
  // Runs the command in args_ (`captured`: its value read into a reservation); true when it
  // authenticated the session.
  bool RunCommand(RespValueCapture* captured);
  // After a command's bytes were consumed: the deadline of what follows.
  void AfterCommand();
  // From a command parsed up to `partial` (args_ holds the arguments before it): its large value
  // goes straight to a reservation from now on (server/resp_value_capture.h), when it may.
  void BeginCapture(const protocol::RespPartialBulk& partial);
  // Once the captured value is whole: its CRLF and last arguments, then the command. False when
  // they have not arrived, or the session stops (a protocol error, QUIT).
  bool FinishCapture(const protocol::RespLimits& limits);
  // Part of a command has arrived: in the buffer, or as a captured value.
  bool CommandUnderWay() const { return buffered() > 0 || capture_ != nullptr; }
  void Fail(std::string_view error_line);
  void Flush();
  void AfterOutputDrained();
  void HalfCloseAndLinger();
  void DiscardInput();
  Throttle QueueThrottle() const { return budget_.QueueThrottle(out_); }
  size_t InputAllowance() const { return budget_.InputAllowance(in_capacity_); }
  bool InputThrottled() const;
  bool WantsToRead() const;
  void UpdateInterest();
  void WatchThrottle();
  void SyncMemory();
  void LeaveUnauthenticated();
  // Runs ServeBuffered from the loop soon: commands already buffered wake no epoll event.
  void ScheduleServe();
  protocol::RespLimits Limits() const;
  size_t buffered() const { return in_end_ - in_begin_; }
  // Gives a large input buffer back once the session has had no command under way for
  // kShrinkAfter (a client sending large values keeps it, and does not pay for growing it again
  // with every command).
  void ShrinkInputLater();
  void Touch() { last_activity_ = loop_->Now(); }

  net::EventLoop* const loop_;
  net::Stream stream_;
  CacheService& service_;
  const SessionOptions options_;
  std::function<void(Connection*)> on_closed_;
  std::string peer_;
  Phase phase_ = Phase::kServing;
  bool shutting_down_ = false;
  bool peer_closed_ = false;  // EOF read: run what is buffered, write the replies, close
  bool incomplete_ = false;   // the buffer ends with part of a command
  size_t needed_ = 1;         // buffer size at which parsing can progress
  uint32_t interest_ = 0;
  net::TimerId linger_timer_ = 0;
  net::TimerId resume_timer_ = 0;
  net::TimerId serve_timer_ = 0;
  net::TimerId shrink_timer_ = 0;
  ConnectionBudget budget_;  // this session's share of the node's gauges
  MonotonicClock::time_point request_arrival_;
  uint64_t request_bytes_ = 0;
  size_t event_read_bytes_ = 0;  // read in the current readiness event
  bool socket_drained_ = false;  // the last read came back short (the socket is empty)
  MonotonicClock::time_point last_activity_;
  const MonotonicClock::time_point accepted_at_;

  RespClient client_;
  // The value of the command under way, read into its reservation (null: none). Declined: the
  // store refused this command's value once; it is read into the input buffer.
  std::unique_ptr<RespValueCapture> capture_;
  bool capture_declined_ = false;
  // [in_begin_, in_end_) of in_ is unread input; not zero-filled when it grows (a large value's
  // bytes are about to be read into it).
  std::unique_ptr<char[]> in_;
  size_t in_capacity_ = 0;
  size_t in_begin_ = 0;
  size_t in_end_ = 0;
  std::vector<std::string_view> args_;
  std::string parse_error_;
  net::OutputQueue out_;
  RespOutput reply_;
};

}  // namespace kvport::server
