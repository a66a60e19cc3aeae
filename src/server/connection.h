// Connection: one client socket of a node, served by one event loop.
//
// A connection reads one request at a time in three stages: the fixed frame header, the
// descriptor section (both into a ReadBuffer that never reads past them), and for MSET the
// payload, straight into the arena reservations (PayloadReceiver). It then queues the response
// (owned head + borrowed, pinned arena ranges) and writes it with writev, resuming across
// EPOLLOUT events. Requests are answered in order.
//
// Backpressure: between requests, the connection stops reading (drops EPOLLIN) while more than
// max_outstanding_bytes of responses are queued, and resumes when the queue drains below it.
//
// A malformed frame is answered with an ERROR frame; then the connection stops reading
// requests, half-closes (so the peer sees the ERROR before the end of the stream rather than
// a reset) and closes once the peer closes or a short linger passes. Nothing stored is touched:
// the request was rejected before reaching the store.
//
// All members are called on the loop thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

#include "net/event_loop.h"
#include "net/output_queue.h"
#include "net/read_buffer.h"
#include "net/socket.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "server/request_context.h"

namespace kvport::server {

struct ConnectionOptions {
  uint64_t max_outstanding_bytes = uint64_t{256} << 20;
  // How long a half-closed connection waits for its peer to close before closing anyway.
  std::chrono::milliseconds linger = std::chrono::seconds(2);
};

class Connection final : public net::EventHandler {
 public:
  // `on_closed` runs (on the loop thread) once, when the connection has closed; the owner then
  // destroys it later (never inside the call).
  Connection(net::EventLoop* loop, net::Socket socket, const ServerContext& server,
             const ConnectionOptions& options, std::function<void(Connection*)> on_closed);
  ~Connection() override;

  // Registers with the loop. On error the connection is closed.
  Status Start();
  void OnEvents(uint32_t events) override;

  // Graceful stop: finish the request being received or answered, read no new one, then close.
  void BeginShutdown();
  // Closes now: aborts an MSET in progress (nothing of it becomes visible), releases pins.
  void Close(std::string_view reason);

  bool closed() const { return phase_ == Phase::kClosed; }
  // Time of the last byte read or written (or of Start).
  net::Clock::time_point last_activity() const { return last_activity_; }
  const std::string& peer() const { return peer_; }

 private:
  enum class Phase {
    kHeader,      // reading a frame header (or waiting for one)
    kDescriptor,  // reading the descriptor section
    kPayload,     // reading an MSET payload into the store's reservations
    kFailing,     // writing an ERROR frame; then half-close and linger
    kLinger,      // half-closed: discarding input until the peer closes
    kClosed,
  };

  void OnReadable();
  // Advances the request state machine by one read; false when it cannot progress now.
  bool ReadStep();
  bool ReadHeader();
  bool ReadDescriptor();
  bool ReadPayload();
  void Dispatch();
  void CompleteRequest(Response response);
  void Fail(const Status& status, uint64_t request_id);
  void Flush();
  void AfterOutputDrained();
  void HalfCloseAndLinger();
  void DiscardInput();
  bool AtRequestBoundary() const;
  bool WantsToRead() const;
  void UpdateInterest();
  void Touch() { last_activity_ = loop_->Now(); }

  net::EventLoop* const loop_;
  net::Socket socket_;
  const ServerContext& server_;
  const ConnectionOptions options_;
  std::function<void(Connection*)> on_closed_;
  std::string peer_;

  Phase phase_ = Phase::kHeader;
  bool shutting_down_ = false;
  uint32_t interest_ = 0;
  net::TimerId linger_timer_ = 0;
  net::Clock::time_point last_activity_;

  ConnectionState state_;
  net::ReadBuffer in_;
  protocol::FrameHeader header_;
  protocol::AnyRequest request_;
  std::unique_ptr<PayloadReceiver> receiver_;
  net::OutputQueue out_;
};

}  // namespace kvport::server
