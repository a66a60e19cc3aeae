// SPDX-License-Identifier: Apache-2.0
// Session: one client of a node speaking the kvport binary protocol over a stream socket (TCP,
// or a Unix socket for a same-host client), served by one event loop.
//
// The session is the protocol layer between a byte stream and the CacheService: it decodes
// frames, looks the opcode up in the command table, and moves bytes between the socket and the
// arena ranges the handlers give it. A session reads one request at a time in three stages: the
// fixed frame header, the descriptor section (both into a ReadBuffer that never reads past them),
// and for MSET the payload, straight into the arena reservations (PayloadReceiver). Its stream
// reads ahead (16 KiB, plain sockets: net/stream.h), so a small call's three stages, or several
// pipelined calls, usually come from one readv; what was read ahead of a value is copied into
// its reservation from there. It then queues
// the response (owned head + borrowed, pinned arena ranges) and writes it with writev, resuming
// across EPOLLOUT events. Requests are answered in order.
//
// Backpressure: between requests, the session stops reading (drops EPOLLIN) while its queued
// responses cost more than max_outstanding_bytes (net::OutputQueue::memory_bytes: heads,
// bookkeeping and the values they pin), or their heap (heads, bookkeeping: heap_bytes) more than
// an eighth of max_node_queued_bytes, or while the heap of the node's queued responses together
// reaches max_node_queued_bytes (half of it when this session has responses queued itself, so
// that clients that read their answers keep being served); it resumes when the queues drain.
// Pinned values are not the node-wide cap's business: they live in the arena, bounded by the
// store's max_pinned_bytes, and counting them there would let one large answer pause every
// connection. Pausing never fails a request: the client just waits. The session keeps
// ServerCounters' queued_response_bytes (heap) and input_buffer_bytes gauges up to date with its
// own share.
//
// Fairness: one readiness event reads or writes at most a few MiB (and a bounded number of
// request stages) before the loop serves its other connections.
//
// Deadline: a request (header, descriptor, payload) must arrive whole within request_timeout
// plus 1 s per min_request_bytes_per_sec bytes of it received so far, counted from its first
// byte. The worker's sweep asks RequestOverdue(); AbortOverdueRequest() answers ERROR Timeout,
// aborts the MSET's reservations and half-closes (the frame cannot be resynchronised).
//
// Before HELLO: the only frame read is a HELLO of at most protocol::kMaxHelloDescriptorBytes;
// the session is registered in options.unauthenticated (server/unauthenticated.h) until its
// HELLO succeeds or it closes, and must complete HELLO within hello_timeout from its accept
// (the worker's sweep asks HelloOverdue(), then CloseWithError()).
//
// A request that decodes but cannot be served (an unknown LIST cursor, an SHM_COMMIT of a
// reservation that is not open) is answered with an ERROR for that request alone, and the
// session goes on. A malformed frame is answered with an ERROR frame; then the session stops
// reading requests, half-closes (so the peer sees the ERROR before the end of the stream rather
// than a reset) and closes once the peer closes or a short linger passes. Nothing stored is
// touched: the request was rejected before reaching the store.
//
// On a Unix socket the session also serves the shared-memory requests (SHM_*, docs/protocol.md)
// once SHM_ATTACH has been granted to the peer; the leases and reservations they create belong
// to the session (SessionState) and end with it, however it ends.
//
// TLS (options.tls, TCP sessions only): the session starts in kTlsHandshake. Its first byte
// must open a TLS record; a peer that speaks the kvport protocol in the clear instead gets a
// plain ERROR saying the node requires TLS, and is closed. The handshake counts against
// hello_timeout like the HELLO it precedes. Afterwards every byte goes through the stream's TLS
// session; decrypted bytes TLS holds are not seen by epoll, so a session that stops reading
// with such bytes held schedules its own next read (buffered_read_timer_).
//
// All members are called on the loop thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "net/event_loop.h"
#include "net/listener.h"
#include "net/output_queue.h"
#include "net/read_buffer.h"
#include "net/socket.h"
#include "net/stream.h"
#include "net/tls.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "server/connection.h"
#include "server/connection_budget.h"
#include "server/request_context.h"
#include "server/unauthenticated.h"

namespace kvport::server {

struct SessionOptions {
  uint64_t max_outstanding_bytes = uint64_t{256} << 20;
  uint64_t max_node_queued_bytes = 0;  // 0: no node-wide cap
  // Node-wide cap on input buffers (ServerCounters::input_buffer_bytes): a descriptor whose
  // buffer would grow past it waits until others shrink (or its deadline passes). 0: none.
  uint64_t max_node_input_bytes = 0;
  std::chrono::milliseconds request_timeout{0};  // 0: no request deadline
  uint64_t min_request_bytes_per_sec = 0;
  // How long a half-closed session waits for its peer to close before closing anyway.
  std::chrono::milliseconds linger = std::chrono::seconds(2);
  // From the accept to a successful HELLO; 0: no deadline.
  std::chrono::milliseconds hello_timeout{0};
  // The node's table of connections that have not completed HELLO, or null (owned by the
  // server; sessions leave it at HELLO or at close).
  UnauthenticatedConnections* unauthenticated = nullptr;
  // TLS for TCP sessions (the node's tls_cert_file...), or null: plain TCP. Unix-socket
  // sessions are never TLS (they stay on the host).
  std::shared_ptr<const net::TlsContext> tls;
};

class Session final : public Connection {
 public:
  // `on_closed` runs (on the loop thread) once, when the session has closed; the owner then
  // destroys it later (never inside the call). `kind` says which listener accepted `socket`;
  // `id` is the session's CacheService::NewSessionId.
  Session(net::EventLoop* loop, net::Socket socket, net::StreamKind kind, uint64_t id,
          CacheService& service, const SessionOptions& options,
          std::function<void(Connection*)> on_closed);
  ~Session() override;

  // Registers with the loop. On error the session is closed.
  Status Start() override;
  void OnEvents(uint32_t events) override;

  // Graceful stop: finish the request being received or answered, read no new one, then close.
  void BeginShutdown() override;
  // Closes now: aborts an MSET in progress and every shared-memory reservation (nothing of them
  // becomes visible), releases pins and leases.
  void Close(std::string_view reason) override;

  bool closed() const override { return phase_ == Phase::kClosed; }
  uint64_t id() const override { return state_.id; }
  // True once a HELLO succeeded.
  bool authenticated() const override { return state_.version != 0; }
  // True when the session has not completed HELLO within hello_timeout of its accept.
  bool HelloOverdue(MonotonicClock::time_point now) const override;
  // Closes now, after a best-effort ERROR carrying `status` (request id 0) when nothing else is
  // queued: for a connection that has not authenticated (its HELLO deadline passed, or its slot
  // is wanted), whose descriptor is freed at once rather than after a linger.
  void CloseWithError(const Status& status) override;
  // Time of the last byte read or written (or of Start).
  MonotonicClock::time_point last_activity() const override { return last_activity_; }
  // True while the peer holds shared-memory leases or reservations: its client may be reading
  // or writing the arena without a byte on the socket, so it is not idle.
  bool holds_arena_ranges() const override { return state_.shm.holds_ranges(); }
  // Aborts the shared-memory reservations not committed within the deadline their size allows
  // (server/request_deadline.h: the rule a request's arrival has), counted from when they were
  // answered: a client stalled between SHM_RESERVE and SHM_COMMIT gives its space back while
  // its connection lives. A later SHM_COMMIT of one is answered NotFound. Returns how many.
  size_t AbortOverdueReservations(MonotonicClock::time_point now) override;
  const std::string& peer() const override { return peer_; }
  // True when the request being received is past its deadline (see above).
  bool RequestOverdue(MonotonicClock::time_point now) const override;
  // Answers the overdue request with ERROR Timeout, aborting what it reserved, and closes.
  void AbortOverdueRequest() override;

 private:
  enum class Phase {
    kTlsHandshake,  // TLS sessions: before the first frame
    kHeader,        // reading a frame header (or waiting for one)
    kDescriptor,    // reading the descriptor section
    kPayload,       // reading an MSET payload into the store's reservations
    kFailing,       // writing an ERROR frame; then half-close and linger
    kLinger,        // half-closed: discarding input until the peer closes
    kClosed,
  };

  void OnReadable();
  // kTlsHandshake: one handshake step (after checking the first byte opens a TLS record).
  void AdvanceTlsHandshake();
  // Runs OnReadable from the loop soon: bytes TLS holds wake no epoll event.
  void ScheduleBufferedRead();
  // Advances the request state machine by one read; false when it cannot progress now.
  bool ReadStep();
  // Reads into in_ up to `target` bytes (counting them); nullopt when the session closed.
  std::optional<net::IoProgress> FillInput(size_t target, size_t max_allocation = SIZE_MAX);
  bool ReadHeader();
  bool ReadDescriptor();
  bool ReadPayload();
  // SO_RCVLOWAT: wake this session when `bytes` (capped) can be read (TCP only).
  void WakeWhenReadable(size_t bytes);
  void Dispatch();
  void CompleteRequest(Response response);
  // Answers the current request with an ERROR and goes on with the next one.
  void Refuse(const Status& status);
  // Answers with an ERROR and ends the session (half-close, linger).
  void Fail(const Status& status, uint64_t request_id);
  void Flush();
  void AfterOutputDrained();
  void HalfCloseAndLinger();
  void DiscardInput();
  bool AtRequestBoundary() const;
  using Throttle = ConnectionBudget::Throttle;
  // Whether queued responses (ours, the node's) hold the next request back.
  Throttle QueueThrottle() const { return budget_.QueueThrottle(out_); }
  // The allocation in_ may grow to now under the node-wide input cap.
  size_t InputAllowance() const { return budget_.InputAllowance(in_.allocated_bytes()); }
  // Mid-descriptor with a full buffer that the node-wide input cap does not let grow.
  bool DescriptorThrottled() const;
  bool WantsToRead() const;
  void UpdateInterest();
  // Counts pauses; over the node's cap, arms resume_timer_ (no event of ours says when other
  // connections drained).
  void WatchThrottle();
  // Brings the node's memory gauges up to date with this session's queue and input buffer.
  void SyncMemory();
  // Leaves options_.unauthenticated (at HELLO, or at close before one).
  void LeaveUnauthenticated();
  static constexpr std::chrono::milliseconds kResumeCheck{10};
  void Touch() { last_activity_ = loop_->Now(); }

  net::EventLoop* const loop_;
  net::Stream stream_;
  CacheService& service_;
  const SessionOptions options_;
  std::function<void(Connection*)> on_closed_;
  std::string peer_;

  Phase phase_ = Phase::kHeader;
  bool shutting_down_ = false;
  uint32_t interest_ = 0;
  int receive_low_water_ = 1;  // the socket's SO_RCVLOWAT
  net::TimerId linger_timer_ = 0;
  net::TimerId resume_timer_ = 0;
  net::TimerId buffered_read_timer_ = 0;
  net::TlsWait tls_wait_ = net::TlsWait::kRead;  // kTlsHandshake: what the handshake waits for
  bool first_byte_checked_ = false;              // kTlsHandshake: it opens a TLS record
  ConnectionBudget budget_;                      // this session's share of the node's gauges
  // The current request's first byte, and its bytes so far (header, descriptor, payload).
  MonotonicClock::time_point request_arrival_;
  uint64_t request_bytes_ = 0;
  size_t event_read_bytes_ = 0;  // read in the current readiness event
  MonotonicClock::time_point last_activity_;
  const MonotonicClock::time_point accepted_at_;

  SessionState state_;
  net::ReadBuffer in_;
  protocol::FrameHeader header_;
  protocol::AnyRequest request_;
  std::unique_ptr<PayloadReceiver> receiver_;
  net::OutputQueue out_;
};

}  // namespace kvport::server
