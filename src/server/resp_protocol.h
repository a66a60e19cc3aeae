// SPDX-License-Identifier: Apache-2.0
// RespProtocol: the Redis protocol (RESP2, RESP3 after HELLO 3; docs/resp.md) on one
// StreamConnection (server/stream_connection.h, which owns the socket, TLS, the output queue,
// backpressure, deadlines and the close: the same rules as the binary protocol's).
//
// Reading: bytes go into the handler's input buffer, which grows (doubling, from 16 KiB) only
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
// A protocol error gets one "-ERR Protocol error: ..." and the connection ends (the stream
// cannot be resynchronised), as Redis does; so do QUIT and the peer's end of stream, after the
// replies to what was sent before them.
//
// All members are called on the loop thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/event_loop.h"
#include "server/resp_commands.h"
#include "server/resp_value_capture.h"
#include "server/stream_connection.h"

namespace kvport::server {

class RespProtocol final : public ProtocolHandler {
 public:
  // Before AUTH on a node with tokens: the largest command read (an AUTH or a HELLO with one).
  static constexpr size_t kMaxUnauthenticatedCommandBytes = 4096;

  RespProtocol(StreamConnection& connection, net::EventLoop* loop);
  ~RespProtocol() override;

  std::string_view name() const override { return "RESP session"; }
  void Opened() override;
  void OnReadable() override;
  bool WantsToRead() const override;
  bool HasServableInput() const override;
  Throttle Throttled() const override;
  bool RequestUnderWay() const override {
    return (incomplete_ || waiting_for_disk_) && CommandUnderWay();
  }
  std::string RequestName() const override { return "the command"; }
  void FailRequest(const Status& status) override;
  std::string PartingError(const Status& status) const override;
  uint64_t gathered_bytes() const override { return reply_.text().capacity(); }
  uint64_t input_buffer_bytes() const override { return in_capacity_; }
  bool authenticated() const override { return client_.access.authenticated(); }
  void Closed() override;

 private:
  // Whether the parsed command (args_) must wait for its keys to come from disk: they are
  // promoted off the I/O thread, and DiskReady runs it.
  bool WaitForDisk();
  void DiskReady();
  // Runs the complete commands buffered (at most a bounded number: see the .cc); false when it
  // stopped with complete commands left (throttled or out of budget).
  bool ServeBuffered();
  // Whether the replies queued hold the next command back (committing what was gathered).
  bool HeldBack();
  // Replies gathered from pipelined commands before they are queued as one segment.
  static constexpr size_t kGatherBytes = 16 << 10;
  // Reads once into the buffer (and a captured value's reservation); false when nothing was
  // read or the connection closed.
  bool ReadSome();
  // Room at the input buffer's end (moving what is buffered to its front, growing it within the
  // node's input cap); false when there is none.
  bool MakeInputRoom();
  // Runs the command in args_ (`captured`: its value read into a reservation); true when it
  // authenticated the client.
  bool RunCommand(RespValueCapture* captured);
  // After a command's bytes were consumed: the deadline of what follows.
  void AfterCommand();
  // From a command parsed up to `partial` (args_ holds the arguments before it): its large value
  // goes straight to a reservation from now on (server/resp_value_capture.h), when it may.
  void BeginCapture(const protocol::RespPartialBulk& partial);
  // Once the captured value is whole: its CRLF and last arguments, then the command. False when
  // they have not arrived, or the connection ends (a protocol error, QUIT).
  bool FinishCapture(const protocol::RespLimits& limits);
  // Part of a command has arrived: in the buffer, or as a captured value.
  bool CommandUnderWay() const { return buffered() > 0 || capture_ != nullptr; }
  // Answers with `error_line` and ends the connection.
  void Fail(std::string_view error_line);
  bool InputThrottled() const;
  size_t InputAllowance() const { return conn_.InputAllowance(in_capacity_); }
  protocol::RespLimits Limits() const;
  size_t buffered() const { return in_end_ - in_begin_; }
  // Gives a large input buffer back once the client has had no command under way for
  // kShrinkAfter (a client sending large values keeps it, and does not pay for growing it again
  // with every command).
  void ShrinkInputLater();

  StreamConnection& conn_;
  CacheService& service_;
  net::EventLoop* const loop_;
  bool peer_closed_ = false;  // EOF read: run what is buffered, write the replies, end
  bool incomplete_ = false;   // the buffer ends with part of a command
  // The command at the buffer's head names keys only the disk tier holds: they are being
  // promoted on its reader threads (WaitForDisk), and it runs when DiskReady says so.
  bool waiting_for_disk_ = false;
  bool disk_ready_ = false;      // the head command's keys were promoted: it runs without waiting
  size_t needed_ = 1;            // buffer size at which parsing can progress
  bool socket_drained_ = false;  // the last read came back short (the socket is empty)
  net::TimerId shrink_timer_ = 0;

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
  // How far the command under way was parsed: a command trickling in is parsed once.
  protocol::RespProgress progress_;
  std::string parse_error_;
  RespOutput reply_;
};

}  // namespace kvport::server
