// SPDX-License-Identifier: Apache-2.0
// KvportProtocol: the kvport binary protocol (docs/protocol.md) on one StreamConnection
// (server/stream_connection.h, which owns the socket, TLS, the output queue, backpressure,
// deadlines and the close).
//
// The handler decodes frames, looks the opcode up in the command table, and moves bytes between
// the socket and the arena ranges the handlers give it. It reads one request at a time in three
// stages: the fixed frame header, the descriptor section (both into a ReadBuffer that never
// reads past them), and for MSET the payload, straight into the arena reservations
// (PayloadReceiver). Its stream reads ahead (16 KiB, plain sockets: net/stream.h), so a small
// call's three stages, or several pipelined calls, usually come from one readv; what was read
// ahead of a value is copied into its reservation from there. It then queues the response
// (owned head + borrowed, pinned arena ranges) on the connection. Requests are answered in
// order. One readiness event advances a bounded number of request stages.
//
// Before HELLO: the only frame read is a HELLO of at most protocol::kMaxHelloDescriptorBytes;
// anything else is answered with an ERROR and the connection ends (its peer, unauthenticated,
// gets no linger worth a large frame's bytes).
//
// A request that decodes but cannot be served (an unknown LIST cursor, an ARENA_COMMIT of a
// reservation that is not open) is answered with an ERROR for that request alone, and the
// connection goes on. A malformed frame is answered with an ERROR frame and the connection
// ends (StreamConnection::Finish). Nothing stored is touched: the request was rejected before
// reaching the store.
//
// On a Unix socket the handler also serves the shared-memory requests (ARENA_*, docs/protocol.md)
// once SHM_ATTACH has been granted to the peer; the leases and reservations they create belong
// to the session (SessionState) and end with it, however it ends.
//
// With a disk tier, a batched read (MGET, ARENA_GET) of keys that memory lacks and the disk holds
// is not served on the loop's thread: their promotions run on the disk tier's reader threads
// (CacheService::PromoteInBackground) while the connection reads nothing more (its request
// deadline runs), and the request is served from memory once they are over. A change that must
// wait for the disk (an overwrite or a delete of a key the disk holds) holds the connection's
// answers instead (server/connection_mailbox.h). So no loop waits for a disk but in one rare
// case: a key promoted for a read and evicted again before the read, which reads it again on
// the loop.
//
// All members are called on the loop thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "net/read_buffer.h"
#include "net/stream.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "server/request_context.h"
#include "server/stream_connection.h"

namespace kvport::server {

class KvportProtocol final : public ProtocolHandler {
 public:
  explicit KvportProtocol(StreamConnection& connection);
  ~KvportProtocol() override;

  std::string_view name() const override { return "session"; }
  size_t read_ahead_bytes() const override;
  void Opened() override;
  void OnReadable() override;
  bool WantsToRead() const override;
  Throttle Throttled() const override;
  bool RequestUnderWay() const override;
  std::string RequestName() const override;
  void FailRequest(const Status& status) override;
  std::string PartingError(const Status& status) const override;
  void OutputDrained() override;
  uint64_t input_buffer_bytes() const override { return in_.allocated_bytes(); }
  bool authenticated() const override { return state_.version != 0; }
  bool holds_arena_ranges() const override { return state_.arena.holds_ranges(); }
  size_t AbortOverdueReservations(MonotonicClock::time_point now) override;
  void Closed() override;

 private:
  enum class Phase {
    kHeader,      // reading a frame header (or waiting for one)
    kDescriptor,  // reading the descriptor section
    kPayload,     // reading an MSET payload into the store's reservations
    kEnded,       // answered with an ERROR that ends the connection
  };

  // Advances the request state machine by one read; false when it cannot progress now.
  bool ReadStep();
  // Reads into in_ up to `target` bytes (counting them); nullopt when the connection closed.
  std::optional<net::IoProgress> FillInput(size_t target, size_t max_allocation = SIZE_MAX);
  bool ReadHeader();
  bool ReadDescriptor();
  bool ReadPayload();
  // SO_RCVLOWAT: wake this connection when `bytes` (capped) can be read (TCP only).
  void WakeWhenReadable(size_t bytes);
  void Dispatch();
  // The request decoded, with its grant checked: served now, unless it waits for the disk.
  void Serve();
  // Whether the request (a batched read whose keys need the disk) was sent to the disk tier's
  // readers first (DiskReady then serves it).
  bool WaitForDisk();
  void DiskReady();
  void CompleteRequest(Response response);
  // Answers the current request with an ERROR and goes on with the next one.
  void Refuse(const Status& status);
  // Answers with an ERROR and ends the connection.
  void Fail(const Status& status, uint64_t request_id);
  // Mid-descriptor with a full buffer that the node-wide input cap does not let grow.
  bool DescriptorThrottled() const;

  StreamConnection& conn_;
  CacheService& service_;
  Phase phase_ = Phase::kHeader;
  int receive_low_water_ = 1;  // the socket's SO_RCVLOWAT
  SessionState state_;
  net::ReadBuffer in_;
  protocol::FrameHeader header_;
  protocol::AnyRequest request_;
  std::unique_ptr<PayloadReceiver> receiver_;
  // kDescriptor: the request's promotions are running. One at a time (nothing is read
  // meanwhile); a wait ended by the request's failure ends the connection, so a late
  // DiskReady finds it cleared.
  bool waiting_for_disk_ = false;
};

}  // namespace kvport::server
