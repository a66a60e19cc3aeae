// SPDX-License-Identifier: Apache-2.0
// HttpConnection: one connection of the operations endpoint, on the endpoint's event loop. It
// reads a request head, has its owner answer it, writes the answer without blocking, and then
// waits for the next request (keep-alive) or closes.
//
// Over HTTPS (the endpoint has a TlsContext) it first completes a TLS handshake (TLS 1.3, the
// node's certificate) and then does the same over TLS; a peer whose first byte is not a TLS
// handshake record (0x16: plain HTTP sent to the HTTPS endpoint) is answered, in the clear,
// 400 "this endpoint requires HTTPS" and closed.
//
// Every wait is bounded, so that a peer holds one of the endpoint's capped descriptors for a
// bounded time and a bounded amount of memory, whatever it sends or fails to send:
//   - the TLS handshake counts against the reading deadline below: a peer that does not finish
//     it, and send a whole request head, within `request_timeout` of being accepted is closed.
//   - reading: the whole head of a request must arrive within `request_timeout` of the
//     connection being accepted or its previous response being sent (this is the keep-alive idle
//     timeout and the slow-head deadline in one); at most kMaxRequestHeadBytes are buffered.
//     Idle, it closes; with part of a head, it answers 408 first.
//   - writing: one response at a time, sent whole within `write_timeout` of the first write that
//     could not take it all, else reset. No request is read meanwhile, so a peer that does not
//     read holds one page, never a queue of them.
//   - closing: after its last response (Connection: close, or a refusal: 400, 413, 431, 505...)
//     it half-closes and discards what the peer still sends, at most kLingerBytes for at most
//     kLingerTimeout, so that the peer reads the response instead of a reset.
// Pipelined requests are answered in order, at most kMaxRequestsPerEvent per readiness event, so
// one connection cannot hold the loop that all of them share.
//
// Thread safety: loop thread only. Lifetime (EventLoop's rule): the owner destroys a connection
// from a posted task or a timer, never inside its OnEvents.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/monotonic_clock.h"
#include "http/http_message.h"
#include "kvport/status.h"
#include "net/event_loop.h"
#include "net/socket.h"
#include "net/stream.h"
#include "net/tls.h"

namespace kvport::http {

class HttpConnection;

// What a connection needs of the endpoint: answers, and word of its closing.
class HttpConnectionOwner {
 public:
  virtual ~HttpConnectionOwner() = default;
  // The response to a parsed request (its views are valid for the call only) from `peer`
  // (net::PeerAddress of the connection).
  virtual HttpResponse Respond(const RequestHead& request, std::string_view peer) = 0;
  // `connection` has closed its descriptor (its peer left, a deadline passed, or Close()). The
  // owner destroys it later, from a posted task.
  virtual void Closed(HttpConnection* connection) = 0;
};

struct HttpConnectionLimits {
  std::chrono::milliseconds request_timeout{2000};
  std::chrono::milliseconds write_timeout{5000};
};

class HttpConnection final : public net::EventHandler {
 public:
  static constexpr int kMaxRequestsPerEvent = 16;
  static constexpr size_t kLingerBytes = 64 * 1024;
  static constexpr std::chrono::milliseconds kLingerTimeout{1000};

  // `socket` is connected and non-blocking; `loop` and `owner` outlive the connection; `tls`
  // (null: plain HTTP) is the context it was accepted under, kept to its end.
  HttpConnection(net::EventLoop* loop, net::Socket socket,
                 std::shared_ptr<const net::TlsContext> tls, HttpConnectionOwner* owner,
                 HttpConnectionLimits limits);
  ~HttpConnection() override;
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Watches the socket and starts the TLS handshake, or the wait for the first request.
  Status Start();
  void OnEvents(uint32_t events) override;
  // Closes the descriptor now and tells the owner (Closed). Idempotent.
  void Close();
  // Makes room at the endpoint's cap: Close() when idle(), else a reset (the answer being sent
  // is cut short, and the kernel drops what was queued for it).
  void Evict();

  // In its TLS handshake, waiting for a request (none is buffered whole), or lingering after its
  // last response: closing it loses no answer.
  bool idle() const {
    return state_ == State::kHandshake || state_ == State::kLingering ||
           (state_ == State::kReading && watched_ == EPOLLIN);
  }
  // When it became idle (meaningful while idle()).
  MonotonicClock::time_point idle_since() const { return idle_since_; }
  MonotonicClock::time_point accepted_at() const { return accepted_at_; }

 private:
  enum class State { kHandshake, kReading, kWriting, kLingering, kClosed };

  // One step of the TLS handshake (the first byte checked first); on completion, reads the
  // request that may already have arrived behind it.
  void AdvanceHandshake();
  // Plain HTTP sent to the HTTPS endpoint: 400 in the clear, then lingering.
  void RefuseCleartext();
  void ReadInput();
  void ServeBuffered();
  void Refuse(int status, std::string_view reason);
  void Send(std::string bytes, bool keep_alive);
  // Writes what the socket takes; true once the whole response is out (the connection has then
  // moved on to reading or lingering).
  bool Flush();
  void EnterReading();
  void StartLingering();
  void Discard();
  void OnDeadline();
  // Closes with a reset (SO_LINGER 0): the kernel drops what the peer did not read, instead of
  // keeping it, orphaned, for a peer that is not reading.
  void Abort();
  void SetDeadline(std::chrono::milliseconds delay);
  void CancelDeadline();
  void WatchFor(uint32_t events);
  // Waits for the peer's next bytes: EPOLLIN, and, when TLS holds decrypted bytes the socket
  // (and so epoll) will not report, a read from a timer of 0 ms (after the loop's other events).
  void WaitForInput();
  void ScheduleBufferedRead();

  net::EventLoop* const loop_;
  net::Stream stream_;      // the socket, through TLS once Start() has started it
  const std::string peer_;  // its address (net::PeerAddress), which failed tokens are charged to
  const std::shared_ptr<const net::TlsContext> tls_;
  HttpConnectionOwner* const owner_;
  const HttpConnectionLimits limits_;
  State state_ = State::kReading;
  uint32_t watched_ = 0;  // the events asked of the loop; 0 before Start
  net::TimerId deadline_ = 0;
  net::TimerId buffered_read_ = 0;   // ScheduleBufferedRead's timer
  bool first_byte_checked_ = false;  // kHandshake: the peer's first byte is 0x16
  const MonotonicClock::time_point accepted_at_ = MonotonicClock::now();
  MonotonicClock::time_point idle_since_;

  std::string input_;   // received, not yet answered: at most kMaxRequestHeadBytes
  size_t scanned_ = 0;  // FindRequestHeadEnd's progress through input_
  std::string output_;  // the response being written
  size_t sent_ = 0;
  bool keep_alive_ = true;  // after output_
  size_t discarded_ = 0;    // while lingering
};

}  // namespace kvport::http
