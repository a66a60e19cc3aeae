// SPDX-License-Identifier: Apache-2.0
// StreamConnection: one client connection of a node (TCP, or a Unix socket for a same-host
// client), whichever protocol it speaks, served by one event loop.
//
// The connection is the transport half, written once for every protocol: it owns the socket
// and its TLS, the output queue, the epoll interest, backpressure and the connection's share of
// the node's memory gauges, the deadlines, the half-close and linger, and the close. A
// ProtocolHandler (the kvport binary protocol: server/kvport_protocol.h; Redis's:
// server/resp_protocol.h) only parses what arrives into requests, serves them through the
// CacheService and queues their answers here. So every bound below holds on every port.
//
// TLS (options.tls, TCP only): the connection starts in its handshake. Its first byte must open
// a TLS record; a peer that speaks in the clear instead gets an error in its protocol's words
// saying the node requires TLS, and is closed. The handshake counts against hello_timeout like
// the authentication it precedes. Afterwards every byte goes through the stream's TLS session;
// decrypted bytes TLS holds are not seen by epoll, so a connection that stops reading with such
// bytes held schedules its own next read.
//
// Backpressure (server/connection_budget.h): between requests the handler reads nothing more
// while the connection's queued answers cost too much, or while it has answers queued and the
// node's queued answers together are at half their cap. A connection with nothing queued is
// never held back by others' answers, so a client that does not read its answers pauses itself
// alone. A connection paused with answers queued that its peer takes no byte of within the
// request deadline (request_timeout plus 1 s per min_request_bytes_per_sec bytes queued) is
// closed: its client is not reading, and what it holds is wanted by the others.
//
// Fairness: one readiness event reads or writes at most a few MiB before the loop serves its
// other connections.
//
// Deadlines: a request must arrive whole within request_timeout plus 1 s per
// min_request_bytes_per_sec bytes of it received so far, from its first byte (the worker's
// sweep asks RequestOverdue, then AbortOverdueRequest: the handler answers a timeout error and
// the connection ends, its framing lost). Authentication must complete within hello_timeout of
// the accept (HelloOverdue, then CloseWithError).
//
// Ending: a protocol error, QUIT or the peer's end of stream ends the connection gracefully
// (Finish): the answers queued are written, then the connection half-closes (so the peer sees
// them before the end of the stream rather than a reset) and reads and drops what the peer still
// sends until it closes or a short linger passes. A peer that has not authenticated gets no
// linger worth its bytes: past kMaxUnauthenticatedDiscard dropped, the connection closes.
// Nothing stored is touched by any of this.
//
// All members are called on the loop thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/monotonic_clock.h"
#include "kvport/status.h"
#include "net/event_loop.h"
#include "net/listener.h"
#include "net/output_queue.h"
#include "net/socket.h"
#include "net/stream.h"
#include "net/tls.h"
#include "server/connection_budget.h"
#include "server/connection_mailbox.h"
#include "server/unauthenticated.h"

namespace kvport::server {

class CacheService;

// The protocol a listener speaks.
enum class WireProtocol { kKvport, kResp };

struct ConnectionOptions {
  uint64_t max_outstanding_bytes = uint64_t{256} << 20;
  uint64_t max_node_queued_bytes = 0;  // 0: no node-wide cap
  // Node-wide cap on input buffers (ServerCounters::input_buffer_bytes): a buffer that would
  // grow past it waits until others shrink (or its deadline passes). 0: none.
  uint64_t max_node_input_bytes = 0;
  std::chrono::milliseconds request_timeout{0};  // 0: no request deadline
  uint64_t min_request_bytes_per_sec = 0;
  // How long a half-closed connection waits for its peer to close before closing anyway.
  std::chrono::milliseconds linger = std::chrono::seconds(2);
  // From the accept to a successful authentication; 0: no deadline.
  std::chrono::milliseconds hello_timeout{0};
  // The node's table of connections that have not authenticated, or null (owned by the server;
  // connections leave it when they authenticate or close).
  UnauthenticatedConnections* unauthenticated = nullptr;
  // TLS for TCP connections (the node's tls_cert_file...), or null: plain TCP. Unix-socket
  // connections are never TLS (they stay on the host).
  std::shared_ptr<const net::TlsContext> tls;
};

class StreamConnection;

// What one protocol does over a StreamConnection. Called on the loop thread only.
class ProtocolHandler {
 public:
  using Throttle = ConnectionBudget::Throttle;
  virtual ~ProtocolHandler() = default;

  // For logs: "session", "RESP session".
  virtual std::string_view name() const = 0;
  // Read-ahead the plain stream keeps (net/stream.h), 0 for none.
  virtual size_t read_ahead_bytes() const { return 0; }
  // The connection is open (after TLS's handshake, if any) and about to be read.
  virtual void Opened() {}
  // The socket is readable, or bytes it holds are: read (connection().stream()) and serve what
  // arrived, within connection().ReadBudgetLeft(). Answers go to connection().output(); ending
  // the connection goes through connection().Finish() or Close().
  virtual void OnReadable() = 0;
  // Whether it would read now (between requests: only if connection().QueueThrottle() allows).
  virtual bool WantsToRead() const = 0;
  // Input it holds that it could serve now without reading (complete requests buffered): the
  // connection runs OnReadable for them once the queues allow, as no epoll event will say so.
  virtual bool HasServableInput() const { return false; }
  // What holds it back from reading now (kNone: nothing, or it is mid-request and reads on).
  virtual Throttle Throttled() const = 0;
  // Part of a request has arrived: its deadline runs, and a graceful stop waits for it.
  virtual bool RequestUnderWay() const = 0;
  // What the request under way is, for a timeout's message ("MSET", "the command").
  virtual std::string RequestName() const = 0;
  // Answers the request under way with `status` (a timeout) in the protocol's words and drops it
  // (what it reserved is aborted); the connection then finishes.
  virtual void FailRequest(const Status& status) = 0;
  // `status` in the protocol's words, for bytes written straight to the socket (a refusal
  // before anything else was said).
  virtual std::string PartingError(const Status& status) const = 0;
  // Every queued answer was written.
  virtual void OutputDrained() {}
  // Heap it holds beyond the connection's output queue (answers being gathered), and its input
  // buffer: the connection's share of the node's gauges.
  virtual uint64_t gathered_bytes() const { return 0; }
  virtual uint64_t input_buffer_bytes() const = 0;
  // True once the client proved who it is.
  virtual bool authenticated() const = 0;
  // Shared-memory leases or reservations held: not idle even without a byte on the socket.
  virtual bool holds_arena_ranges() const { return false; }
  // Aborts reservations past their deadline (StreamConnection::AbortOverdueReservations).
  virtual size_t AbortOverdueReservations(MonotonicClock::time_point) { return 0; }
  // The connection closed: give back what the session holds (reservations, leases, cursors).
  virtual void Closed() = 0;
};

class StreamConnection final : public net::EventHandler {
 public:
  using Throttle = ConnectionBudget::Throttle;
  // Past this many bytes dropped after the half-close of a connection that never authenticated,
  // it closes: its peer has not earned a linger.
  static constexpr size_t kMaxUnauthenticatedDiscard = 64 << 10;

  // `on_closed` runs (on the loop thread) once, when the connection has closed; the owner then
  // destroys it later (never inside the call). `kind` says which listener accepted `socket`;
  // `id` is the connection's CacheService::NewSessionId.
  StreamConnection(net::EventLoop* loop, net::Socket socket, net::StreamKind kind, uint64_t id,
                   CacheService& service, const ConnectionOptions& options,
                   std::function<void(StreamConnection*)> on_closed);
  ~StreamConnection() override;
  StreamConnection(const StreamConnection&) = delete;
  StreamConnection& operator=(const StreamConnection&) = delete;

  // The protocol spoken; set once, before Start.
  void set_handler(std::unique_ptr<ProtocolHandler> handler) { handler_ = std::move(handler); }

  // Registers with the loop. On error the connection is closed.
  Status Start();
  void OnEvents(uint32_t events) override;
  // Graceful stop: finish the request being received or answered, read no new one, then close.
  void BeginShutdown();
  // Closes now: the handler aborts what is under way (nothing of it becomes visible) and gives
  // back what the session holds; pins of unsent answers are released.
  void Close(std::string_view reason);
  // Closes now, after a best-effort error in the protocol's words when nothing else is queued:
  // for a connection that has not authenticated (its deadline passed, or its slot is wanted).
  void CloseWithError(const Status& status);

  bool closed() const { return phase_ == Phase::kClosed; }
  uint64_t id() const { return id_; }
  bool authenticated() const { return handler_->authenticated(); }
  // Not authenticated within hello_timeout of the accept.
  bool HelloOverdue(MonotonicClock::time_point now) const;
  MonotonicClock::time_point last_activity() const { return last_activity_; }
  bool holds_arena_ranges() const { return handler_->holds_arena_ranges(); }
  // Aborts the shared-memory reservations not committed within the deadline their size allows
  // (server/request_deadline.h), counted from when they were answered. Returns how many.
  size_t AbortOverdueReservations(MonotonicClock::time_point now);
  const std::string& peer() const { return peer_; }
  // The request being received is past its deadline, or answers held back by backpressure have
  // waited past theirs with the peer taking none of their bytes.
  bool RequestOverdue(MonotonicClock::time_point now) const;
  // For the first: answers a timeout error and ends the connection. For the second: closes.
  void AbortOverdueRequest();

  // For the protocol handler.
  net::Stream& stream() { return stream_; }
  const net::Stream& stream() const { return stream_; }
  net::StreamKind kind() const { return kind_; }
  net::OutputQueue& output() { return out_; }
  const net::OutputQueue& output() const { return out_; }
  CacheService& service() { return service_; }
  const ConnectionOptions& options() const { return options_; }
  MonotonicClock::time_point now() const { return loop_->Now(); }
  // Open and serving (not in TLS's handshake, not finishing, lingering or closed).
  bool open() const { return phase_ == Phase::kOpen; }
  bool shutting_down() const { return shutting_down_; }
  // Whether queued answers (this connection's, the node's) hold the next request back.
  Throttle QueueThrottle() const { return budget_.QueueThrottle(out_); }
  // The allocation an input buffer of `own` bytes may grow to now under the node-wide cap.
  size_t InputAllowance(size_t own) const { return budget_.InputAllowance(own); }
  // The first bytes of a request arrived (`already` of them were read before): its deadline
  // counts from now.
  void BeginRequest(uint64_t already = 0);
  // `bytes` were read: counted for the node, the request's deadline and this event's bound.
  void Received(size_t bytes);
  // This readiness event may read more.
  bool ReadBudgetLeft() const { return event_read_bytes_ < kMaxBytesPerEvent; }
  // When the request under way began to arrive.
  MonotonicClock::time_point request_arrival() const { return request_arrival_; }
  // Writes what is queued, as much as the socket takes now.
  void Flush();
  // Ends the connection gracefully: after what is queued is written, half-close and linger.
  void Finish();
  // The client authenticated: it leaves the node's table of unauthenticated connections.
  void Authenticated();
  // Brings the node's memory gauges up to date with this connection's share.
  void SyncMemory();
  // Runs the handler's OnReadable from the loop soon.
  void ScheduleRead();
  // Where work finishing on other threads reaches this connection, and the waiter of its
  // changes that wait for the disk (server/connection_mailbox.h).
  const std::shared_ptr<ConnectionMailbox>& mailbox() const { return mailbox_; }
  // A change waits for the disk (ConnectionBudget::HoldChange): no answer is written until as
  // many ReleaseChange come (the mailbox calls both).
  void HoldChange();
  void ReleaseChange();

 private:
  enum class Phase {
    kTlsHandshake,  // TLS: before the first byte of the protocol
    kOpen,          // reading and serving
    kFinishing,     // writing the last answers; then half-close and linger
    kLinger,        // half-closed: discarding input until the peer closes
    kClosed,
  };
  // Per readiness event, so a fast peer cannot hold its loop while others (and new connections'
  // handshakes) wait; the loop is level-triggered, so what is left is taken up at its next turn.
  static constexpr size_t kMaxBytesPerEvent = 4 << 20;
  static constexpr std::chrono::milliseconds kResumeCheck{10};

  void AdvanceTlsHandshake();
  void OnReadable();
  void AfterOutputDrained();
  void HalfCloseAndLinger();
  void DiscardInput();
  bool WantsToRead() const;
  void UpdateInterest();
  // Counts pauses; over the node's cap, arms resume_timer_ (no event of ours says when other
  // connections drained).
  void WatchThrottle();
  void LeaveUnauthenticated();
  // Answers queued and held back by backpressure, with the peer taking none of them, past the
  // request deadline.
  bool AnswersOverdue(MonotonicClock::time_point now) const;
  void Touch() { last_activity_ = loop_->Now(); }

  net::EventLoop* const loop_;
  net::Stream stream_;
  const net::StreamKind kind_;
  const uint64_t id_;
  CacheService& service_;
  const ConnectionOptions options_;
  std::function<void(StreamConnection*)> on_closed_;
  const std::string peer_;
  std::unique_ptr<ProtocolHandler> handler_;

  Phase phase_ = Phase::kOpen;
  bool shutting_down_ = false;
  uint32_t interest_ = 0;
  net::TimerId linger_timer_ = 0;
  net::TimerId resume_timer_ = 0;
  net::TimerId read_timer_ = 0;
  net::TlsWait tls_wait_ = net::TlsWait::kRead;  // kTlsHandshake: what the handshake waits for
  bool first_byte_checked_ = false;              // kTlsHandshake: it opens a TLS record
  size_t discarded_bytes_ = 0;                   // kLinger: dropped so far
  ConnectionBudget budget_;                      // this connection's share of the node's gauges
  // The request under way: its first byte, and its bytes so far.
  MonotonicClock::time_point request_arrival_;
  uint64_t request_bytes_ = 0;
  size_t event_read_bytes_ = 0;  // read in the current readiness event
  MonotonicClock::time_point last_activity_;
  // Since when queued answers have waited with the peer taking none of their bytes.
  MonotonicClock::time_point output_waiting_since_;
  bool queue_was_empty_ = true;  // at the end of the last Flush
  const MonotonicClock::time_point accepted_at_;
  net::OutputQueue out_;
  const std::shared_ptr<ConnectionMailbox> mailbox_;
};

}  // namespace kvport::server
