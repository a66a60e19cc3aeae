// SPDX-License-Identifier: Apache-2.0
#include "server/session.h"

#include <sys/socket.h>

#include <algorithm>
#include <optional>
#include <string>
#include <variant>

#include "kvport/log.h"
#include "protocol/wire.h"
#include "server/command_table.h"
#include "server/parting_error.h"
#include "server/request_deadline.h"

namespace kvport::server {

namespace {

// After a request: a batched request keeps its lists for the next one (DecodeAnyRequest decodes
// those in place, so a warm session decodes without allocating) unless they grew past
// ReplyScratch::kKeptItems, which a session does not hold on to between requests; any other
// request is cleared.
void ForgetRequest(protocol::AnyRequest* request) {
  const bool clear = std::visit(
      [](const auto& r) {
        if constexpr (requires { r.keys; }) {
          return r.keys.capacity() > ReplyScratch::kKeptItems;
        } else if constexpr (requires { r.items; }) {
          return r.items.capacity() > ReplyScratch::kKeptItems;
        } else {
          return true;
        }
      },
      *request);
  if (clear) *request = protocol::AnyRequest{};
}

// Stages advanced, and bytes read or written, per readiness event before yielding to the other
// sessions of the loop: a fast peer streaming a large payload or reading a large answer cannot
// hold its I/O loop while other connections (and new ones' HELLOs) wait. The loop is
// level-triggered, so what is left is taken up at its next turn.
constexpr int kMaxReadStepsPerEvent = 64;
constexpr size_t kMaxBytesPerEvent = 4 << 20;
// Read ahead of what a step asks for (net/stream.h): a header, a descriptor and a value of a few
// KiB, or a few hundred pipelined small requests, per readv. Part of each connection's fixed
// memory (docs/store.md, "Bounds on node memory").
constexpr size_t kReadAheadBytes = 16 << 10;

// While an MSET payload arrives over TCP, the loop is woken only once this much of it (or all
// that is left) is in the socket: a 4 MiB value then costs a few readv calls instead of one
// per segment burst (measured: 10-14 readv per 4 MiB without it, docs/performance.md).
constexpr size_t kMaxReceiveLowWater = 512 * 1024;

// The request id of a frame whose header failed to decode, when it can still be read.
uint64_t RequestIdOfBadHeader(const net::ReadBuffer& in) {
  const char* p = reinterpret_cast<const char*>(in.data());
  if (in.size() >= 16 && protocol::LoadLE32(p) == protocol::kFrameMagic) {
    return protocol::LoadLE64(p + 8);
  }
  return 0;
}

}  // namespace

Session::Session(net::EventLoop* loop, net::Socket socket, net::StreamKind kind, uint64_t id,
                 CacheService& service, const SessionOptions& options,
                 std::function<void(Connection*)> on_closed)
    : loop_(loop),
      stream_(std::move(socket)),
      service_(service),
      options_(options),
      on_closed_(std::move(on_closed)),
      peer_(net::PeerName(stream_.fd())),
      budget_(service.counters(), options_),
      last_activity_(loop->Now()),
      accepted_at_(loop->Now()) {
  state_.id = id;
  state_.kind = kind;
  state_.fd = stream_.fd();
  state_.shm.set_counters(&service_.counters());
  if (kind == net::StreamKind::kUnix) {
    Result<net::PeerCredentials> cred = net::PeerCredentialsOf(stream_.fd());
    if (cred.ok()) state_.peer_uid = cred->uid;
  }
}

Session::~Session() {
  if (phase_ != Phase::kClosed) {
    // The owner is destroying us (server stopping): release everything, but do not call back.
    on_closed_ = nullptr;
    Close("server stopped");
  }
}

Status Session::Start() {
  if (options_.tls != nullptr && state_.kind == net::StreamKind::kTcp) {
    Status started = stream_.StartTls(*options_.tls, "");
    if (!started.ok()) {
      Close("cannot start TLS: " + started.ToString());
      return started;
    }
    phase_ = Phase::kTlsHandshake;
  } else {
    // One readv brings a small call whole (its header, descriptor and value), or several
    // pipelined ones (net/stream.h, "Read-ahead").
    stream_.EnableReadAhead(kReadAheadBytes);
  }
  interest_ = EPOLLIN;
  Status watched = loop_->Watch(stream_.fd(), interest_, this);
  if (!watched.ok()) Close("cannot watch the socket: " + watched.ToString());
  return watched;
}

void Session::AdvanceTlsHandshake() {
  if (!first_byte_checked_) {
    // A kvport frame in the clear opens with its magic, not a TLS record: tell that client what
    // is wrong, in words it can read.
    Result<std::optional<bool>> opens_tls = net::FirstByteOpensTls(stream_.fd());
    if (!opens_tls.ok()) {
      Close(opens_tls.status().message());
      return;
    }
    if (!opens_tls->has_value()) return;  // nothing yet
    first_byte_checked_ = true;
    if (!**opens_tls) {
      service_.counters().CountTlsHandshakeFailure();
      net::Socket socket = std::move(stream_.socket());
      stream_ = net::Stream(std::move(socket));  // no TLS: the answer goes in the clear
      SendPartingError(
          stream_, Status::PermissionDenied("this node requires TLS: connect with tls_ca_file set "
                                            "(docs/security.md)"));
      Close("peer does not speak TLS");
      return;
    }
  }
  Result<net::TlsWait> step = stream_.Handshake();
  if (!step.ok()) {
    service_.counters().CountTlsHandshakeFailure();
    log::Debug("session {} from {}: {}", state_.id, peer_, step.status().ToString());
    // OpenSSL has queued its alert (a missing or refused client certificate...). In TLS 1.3
    // the client may already be sending its HELLO: closing with that unread would be a reset,
    // which can destroy the alert before the client reads it. Half-close and drain instead.
    net::Socket socket = std::move(stream_.socket());
    stream_ = net::Stream(std::move(socket));
    HalfCloseAndLinger();
    return;
  }
  tls_wait_ = *step;
  if (tls_wait_ != net::TlsWait::kNone) {
    UpdateInterest();
    return;
  }
  service_.counters().CountTlsHandshake(stream_.tls()->kernel_send());
  log::Debug("session {} from {}: {}{}", state_.id, peer_, stream_.tls()->Describe(),
             stream_.tls()->kernel_send() ? " (kernel TLS)" : "");
  phase_ = Phase::kHeader;
  Touch();
  // The HELLO may already be in, behind the client's last handshake record.
  OnReadable();
}

void Session::ScheduleBufferedRead() {
  if (buffered_read_timer_ != 0) return;
  buffered_read_timer_ = loop_->RunAfter(std::chrono::milliseconds(0), [this] {
    buffered_read_timer_ = 0;
    if (!closed()) OnReadable();
  });
}

void Session::OnEvents(uint32_t events) {
  if (closed()) return;  // an event fetched in the same batch as our close
  if (events & EPOLLERR) {
    Close("socket error");
    return;
  }
  if (events & (EPOLLIN | EPOLLHUP)) stream_.SocketReadable();
  if (phase_ == Phase::kTlsHandshake) {
    AdvanceTlsHandshake();
    return;
  }
  if (events & EPOLLOUT) Flush();
  if (closed()) return;
  if (events & (EPOLLIN | EPOLLHUP)) OnReadable();
  if (closed()) return;
  if ((events & EPOLLHUP) && !(interest_ & EPOLLIN)) Close("peer hung up");
}

void Session::OnReadable() {
  if (phase_ == Phase::kLinger) {
    DiscardInput();
    return;
  }
  event_read_bytes_ = 0;
  bool yielded = true;  // stopped by the per-event bounds, with more to read
  for (int i = 0;
       i < kMaxReadStepsPerEvent && event_read_bytes_ < kMaxBytesPerEvent && WantsToRead(); ++i) {
    if (!ReadStep()) {
      yielded = false;
      break;
    }
  }
  // What is left may be less than the payload's SO_RCVLOWAT (set when it last ran dry): the loop
  // must still be woken for it.
  if (yielded && phase_ == Phase::kPayload) WakeWhenReadable(1);
  // One shared counter update per readiness event, none for an event that read nothing.
  if (const uint64_t reads = stream_.TakeSocketReads(); reads > 0)
    service_.counters().AddSocketReads(reads);
  UpdateInterest();
}

bool Session::ReadStep() {
  switch (phase_) {
    case Phase::kHeader:
      return ReadHeader();
    case Phase::kDescriptor:
      return ReadDescriptor();
    case Phase::kPayload:
      return ReadPayload();
    default:
      return false;
  }
}

std::optional<net::IoProgress> Session::FillInput(size_t target, size_t max_allocation) {
  const bool first_bytes = phase_ == Phase::kHeader && in_.size() == 0;
  Result<net::IoProgress> r = in_.FillTo(stream_, target, max_allocation);
  if (!r.ok()) {
    Close(r.status().message());
    return std::nullopt;
  }
  if (r->bytes > 0) {
    Touch();
    service_.counters().AddBytesReceived(r->bytes);
    event_read_bytes_ += r->bytes;
    if (first_bytes) {
      // A request begins with its first byte: its deadline counts from here.
      request_arrival_ = loop_->Now();
      request_bytes_ = 0;
    }
    request_bytes_ += r->bytes;
  }
  SyncMemory();
  return *r;
}

bool Session::ReadHeader() {
  std::optional<net::IoProgress> r = FillInput(protocol::kFrameHeaderSize);
  if (!r) return false;
  if (in_.size() < protocol::kFrameHeaderSize) {
    if (r->eof) {
      if (in_.size() == 0) {
        Close("peer closed");
      } else {
        Close("peer closed in the middle of a frame header");
      }
    }
    return false;
  }
  std::string_view bytes(reinterpret_cast<const char*>(in_.data()), in_.size());
  Status decoded = protocol::DecodeFrameHeader(bytes, service_.limits(), &header_);
  if (!decoded.ok()) {
    if (state_.version == 0 && bytes[0] == 0x16 && bytes[1] == 0x03) {
      // A TLS record (a ClientHello) where a HELLO frame belongs: say what is wrong.
      decoded = Status::Corruption(
          "the peer speaks TLS, but this node has no TLS on its TCP port (tls_cert_file, "
          "tls_key_file: docs/security.md)");
    }
    Fail(decoded, RequestIdOfBadHeader(in_));
    return false;
  }
  if (header_.is_response()) {
    Fail(Status::InvalidArgument("a response frame was sent to the server"), header_.request_id);
    return false;
  }
  const Command* command = FindCommand(header_.opcode);
  if (command == nullptr) {
    Fail(Status::InvalidArgument(std::string(protocol::OpcodeName(header_.opcode)) +
                                 " is not a request"),
         header_.request_id);
    return false;
  }
  if (command->requires_hello && state_.version == 0) {
    Fail(Status::InvalidArgument("HELLO must be the first request on a connection, got " +
                                 std::string(protocol::OpcodeName(header_.opcode))),
         header_.request_id);
    return false;
  }
  if (state_.version == 0 && (header_.descriptor_length > protocol::kMaxHelloDescriptorBytes ||
                              header_.payload_length != 0)) {
    // Not authenticated yet: only a HELLO of its real size is read, never max_frame_bytes.
    Fail(
        Status::TooLarge(fmt::format(
            "before HELLO a frame is a HELLO of at most {} descriptor bytes and no payload; got "
            "{} and {}",
            protocol::kMaxHelloDescriptorBytes, header_.descriptor_length, header_.payload_length)),
        header_.request_id);
    return false;
  }
  if (command->requires_hello && header_.version != state_.version) {
    Fail(Status::NotSupported("frame of protocol version " + std::to_string(header_.version) +
                              " on a connection that negotiated version " +
                              std::to_string(state_.version)),
         header_.request_id);
    return false;
  }
  phase_ = Phase::kDescriptor;
  return true;
}

bool Session::ReadDescriptor() {
  std::optional<net::IoProgress> r = FillInput(header_.head_length(), InputAllowance());
  if (!r) return false;
  if (in_.size() < header_.head_length()) {
    if (r->eof) Close("peer closed in the middle of a frame descriptor");
    return false;
  }
  Dispatch();
  return !closed() && phase_ != Phase::kFailing;
}

void Session::Dispatch() {
  std::string_view descriptor(
      reinterpret_cast<const char*>(in_.data()) + protocol::kFrameHeaderSize,
      header_.descriptor_length);
  Status decoded = protocol::DecodeAnyRequest(header_, descriptor, service_.limits(), &request_);
  if (!decoded.ok()) {
    Fail(decoded, header_.request_id);
    return;
  }
  service_.counters().CountRequest(header_.opcode);
  const Command* command = FindCommand(header_.opcode);
  if (command->requires_hello) {
    // The node's tokens may have been replaced (SIGHUP) since this session's HELLO.
    Status still_granted = state_.access.Refresh(service_.access());
    if (!still_granted.ok()) {
      Fail(still_granted, header_.request_id);
      return;
    }
  }
  RequestContext ctx{service_, state_, header_};
  const bool was_authenticated = authenticated();
  Result<HandlerOutcome> outcome = command->handler(ctx, request_);
  if (!was_authenticated && authenticated()) LeaveUnauthenticated();
  if (!outcome.ok()) {
    // A request that decoded but cannot be served (an unknown LIST cursor, a reservation that
    // is not open) is refused alone: its whole frame has been read, the stream is intact, and
    // the calls pipelined behind it go on. A failed HELLO, or an error that says the stream
    // itself is off (the client closes on those as well), ends the session.
    const StatusCode code = outcome.status().code();
    service_.counters().CountRequestError(header_.opcode);
    if (header_.opcode != protocol::Opcode::kHello && header_.payload_length == 0 &&
        code != StatusCode::kCorruption && code != StatusCode::kNotSupported) {
      Refuse(outcome.status());
    } else {
      Fail(outcome.status(), header_.request_id);
    }
    return;
  }
  if (outcome->receiver == nullptr) {
    CompleteRequest(std::move(outcome->response));
    return;
  }
  receiver_ = std::move(outcome->receiver);
  phase_ = Phase::kPayload;
  if (receiver_->remaining() == 0) ReadPayload();  // nothing to read (e.g. all values empty)
}

void Session::WakeWhenReadable(size_t bytes) {
  if (state_.kind != net::StreamKind::kTcp) return;  // Unix sockets ignore SO_RCVLOWAT in poll
  const int low =
      static_cast<int>(std::clamp<size_t>(stream_.LowWaterFor(bytes), 1, kMaxReceiveLowWater));
  if (low == receive_low_water_) return;
  // The kernel caps it at half the receive buffer, so a wake-up always comes; failing to set
  // it costs wake-ups, not correctness.
  if (net::SetReceiveLowWater(stream_.fd(), low).ok()) receive_low_water_ = low;
}

bool Session::ReadPayload() {
  bool eof = false;
  bool would_block = false;
  if (receiver_->remaining() > 0) {
    // Destinations only for bytes that are here (an MSET item is reserved once its first byte
    // has arrived), so a payload that never comes evicts nothing.
    Result<net::IoProgress> available = stream_.Readable(receiver_->remaining());
    if (!available.ok()) {
      Close(available.status().message());
      return false;
    }
    receiver_->Prepare(available->bytes);
    net::ScatterReader& reader = receiver_->reader();
    if (!reader.done()) {
      Result<net::IoProgress> r = reader.ReadFrom(stream_);
      if (!r.ok()) {
        Close(r.status().message());
        return false;
      }
      if (r->bytes > 0) {
        Touch();
        service_.counters().AddBytesReceived(r->bytes);
        request_bytes_ += r->bytes;
        event_read_bytes_ += r->bytes;
      }
      eof = r->eof;
      would_block = r->would_block;
      receiver_->OnProgress();
    } else {
      eof = available->eof;
      would_block = true;
    }
  }
  if (receiver_->remaining() > 0) {
    if (eof) {
      Close("peer closed in the middle of an MSET payload");
      return false;
    }
    if (!would_block) return true;  // more may be here for items not reserved yet
    WakeWhenReadable(receiver_->remaining());
    return false;
  }
  WakeWhenReadable(1);
  Result<Response> response = receiver_->Finish();
  receiver_.reset();
  if (!response.ok()) {
    service_.counters().CountRequestError(header_.opcode);
    Fail(response.status(), header_.request_id);
    return false;
  }
  CompleteRequest(std::move(response).value());
  return !closed();
}

void Session::CompleteRequest(Response response) {
  // From the request's first byte (request_arrival_, the loop's clock of that wake-up).
  const auto elapsed = MonotonicClock::now() - request_arrival_;
  service_.counters().RecordLatency(
      header_.opcode,
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
  if (!response.pass_fds.empty()) {
    out_.AppendPassingDescriptors(std::move(response.head), std::move(response.pass_fds));
  } else if (!response.head.empty()) {  // empty: a request with no answer
    out_.Append(std::move(response.head));
  }
  for (Response::Span& span : response.payloads) {
    out_.AppendBorrowed(span.data, span.size, std::move(span.keep_alive));
  }
  // The lists go back to the handlers for the next request.
  state_.scratch.Recycle(std::move(response.payloads), out_.TakeSpare());
  in_.Clear();
  ForgetRequest(&request_);  // its views pointed into in_; its lists may serve the next one
  phase_ = Phase::kHeader;
  Flush();
}

void Session::Refuse(const Status& status) {
  service_.counters().CountErrorResponse();
  log::Debug("session {}: {} refused: {}", peer_, protocol::OpcodeName(header_.opcode),
             status.ToString());
  service_.counters().client_errors().Warn(
      peer_,
      fmt::format("refused {} {}", protocol::OpcodeName(header_.opcode),
                  StatusCodeName(status.code())),
      fmt::format("{} refused: {}", protocol::OpcodeName(header_.opcode), status.ToString()),
      loop_->Now());
  protocol::ErrorResponse error;
  error.code = status.code();
  error.message = status.message();
  protocol::EncodedFrame frame;
  Status encoded = protocol::EncodeResponse(header_.request_id, error, service_.limits(), &frame);
  if (!encoded.ok()) {
    Close("cannot encode an ERROR frame: " + encoded.ToString());
    return;
  }
  Response response;
  response.head = std::move(frame.head);
  CompleteRequest(std::move(response));
}

void Session::Fail(const Status& status, uint64_t request_id) {
  service_.counters().CountErrorResponse();
  log::Debug("session {}: {}; sending ERROR and closing", peer_, status.ToString());
  service_.counters().client_errors().Warn(
      peer_, fmt::format("closed {}", StatusCodeName(status.code())),
      fmt::format("{}; sent ERROR and closed the connection", status.ToString()), loop_->Now());
  receiver_.reset();  // aborts reservations of an MSET in progress
  protocol::ErrorResponse error;
  error.code = status.ok() ? StatusCode::kInternal : status.code();
  error.message = status.message();
  protocol::EncodedFrame frame;
  Status encoded = protocol::EncodeResponse(request_id, error, service_.limits(), &frame);
  if (!encoded.ok()) {
    Close("cannot encode an ERROR frame: " + encoded.ToString());
    return;
  }
  in_.Clear();
  request_ = protocol::AnyRequest{};
  phase_ = Phase::kFailing;
  out_.Append(std::move(frame.head));
  Flush();
}

void Session::Flush() {
  if (closed()) return;
  // Before writing too: once the answer is out, its client may look at the node's gauges.
  SyncMemory();
  if (!out_.empty()) {
    Result<net::IoProgress> r = out_.WriteTo(stream_, kMaxBytesPerEvent);
    if (!r.ok()) {
      Close(r.status().message());
      return;
    }
    if (r->bytes > 0) {
      Touch();
      service_.counters().AddBytesSent(r->bytes);
    }
  }
  SyncMemory();
  if (out_.empty()) AfterOutputDrained();
  UpdateInterest();
}

void Session::AfterOutputDrained() {
  state_.scratch.ReleasePins();  // every answer is written: its hits need no pin now
  if (phase_ == Phase::kFailing) {
    HalfCloseAndLinger();
  } else if (shutting_down_ && AtRequestBoundary()) {
    HalfCloseAndLinger();
  }
}

void Session::HalfCloseAndLinger() {
  // Our FIN follows the last response; closing outright could turn it into a reset (if unread
  // input is pending) that destroys the response before the peer reads it.
  stream_.ShutdownWrite();
  phase_ = Phase::kLinger;
  linger_timer_ = loop_->RunAfter(options_.linger, [this] {
    linger_timer_ = 0;
    Close("peer did not close after our half-close");
  });
  UpdateInterest();
}

void Session::DiscardInput() {
  if (!DiscardLingeringInput(stream_)) Close("closed after half-close");
}

void Session::BeginShutdown() {
  if (closed() || shutting_down_) return;
  shutting_down_ = true;
  if ((AtRequestBoundary() || phase_ == Phase::kTlsHandshake) && out_.empty()) {
    Close("server stopping");  // idle: nothing in flight to finish
    return;
  }
  UpdateInterest();
}

bool Session::AtRequestBoundary() const {
  return phase_ == Phase::kHeader && in_.size() == 0;
}

bool Session::DescriptorThrottled() const {
  return phase_ == Phase::kDescriptor && in_.full() && in_.size() < header_.head_length() &&
         std::max(InputAllowance(), net::ReadBuffer::kMinAllocation) <= in_.allocated_bytes();
}

bool Session::WantsToRead() const {
  switch (phase_) {
    case Phase::kHeader:
      // Mid-header: finish the frame. Between requests: only if we will answer another one,
      // and the queued answers (ours, and the node's) leave room for it.
      return in_.size() > 0 || (!shutting_down_ && QueueThrottle() == Throttle::kNone);
    case Phase::kDescriptor:
      // Unless the node's input buffers are at their cap and ours must grow: wait (the
      // request deadline still runs).
      return !DescriptorThrottled();
    case Phase::kPayload:
    case Phase::kLinger:
      return true;
    case Phase::kTlsHandshake:  // reads only handshake records (AdvanceTlsHandshake)
    case Phase::kFailing:
    case Phase::kClosed:
      return false;
  }
  return false;
}

void Session::UpdateInterest() {
  if (closed()) return;
  uint32_t want = 0;
  if (phase_ == Phase::kTlsHandshake) {
    want = tls_wait_ == net::TlsWait::kWrite ? EPOLLOUT : EPOLLIN;
  } else {
    if (WantsToRead()) {
      want |= EPOLLIN;
      // Decrypted bytes already taken from the socket: epoll will not report them.
      if (stream_.buffered() > 0) ScheduleBufferedRead();
    }
    if (!out_.empty()) want |= EPOLLOUT;
    WatchThrottle();
  }
  if (want == interest_) return;
  Status modified = loop_->Modify(stream_.fd(), want, this);
  if (!modified.ok()) {
    Close("cannot update epoll interest: " + modified.ToString());
    return;
  }
  interest_ = want;
}

void Session::Close(std::string_view reason) {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  if (linger_timer_ != 0) {
    loop_->CancelTimer(linger_timer_);
    linger_timer_ = 0;
  }
  if (resume_timer_ != 0) {
    loop_->CancelTimer(resume_timer_);
    resume_timer_ = 0;
  }
  if (buffered_read_timer_ != 0) {
    loop_->CancelTimer(buffered_read_timer_);
    buffered_read_timer_ = 0;
  }
  loop_->Unwatch(stream_.fd());
  receiver_.reset();  // an MSET in progress: every reservation is aborted
  out_.Clear();       // pins of unsent MGET values are released
  in_.Clear(0);
  budget_.Release();  // the node's gauges lose this session's share
  if (!authenticated()) LeaveUnauthenticated();
  state_.shm.Clear();                // leases and shared-memory reservations end with the session
  service_.SessionEnded(state_.id);  // and so do its LIST cursors
  service_.counters().ConnectionClosed();
  // Last: a peer that sees the connection end finds the node's counters already settled.
  stream_.Close();
  log::Debug("session {} closed: {}", peer_, reason);
  if (on_closed_) on_closed_(this);
}

void Session::SyncMemory() {
  budget_.Sync(out_.heap_bytes(), in_.allocated_bytes());
}

void Session::WatchThrottle() {
  const bool between_requests = phase_ == Phase::kHeader && in_.size() == 0 && !shutting_down_;
  const Throttle throttle = between_requests        ? QueueThrottle()
                            : DescriptorThrottled() ? Throttle::kNode
                                                    : Throttle::kNone;
  budget_.SetPaused(throttle != Throttle::kNone);
  // Over our own cap, our queue's EPOLLOUT wakes us; over the node's, other connections'
  // queues must drain, which no event of ours tells: look again shortly.
  if (throttle == Throttle::kNode && resume_timer_ == 0) {
    resume_timer_ = loop_->RunAfter(kResumeCheck, [this] {
      resume_timer_ = 0;
      UpdateInterest();
    });
  } else if (throttle != Throttle::kNode && resume_timer_ != 0) {
    loop_->CancelTimer(resume_timer_);
    resume_timer_ = 0;
  }
}

void Session::LeaveUnauthenticated() {
  if (options_.unauthenticated != nullptr && options_.unauthenticated->Remove(state_.id)) {
    service_.counters().AddUnauthenticated(-1);
  }
}

bool Session::HelloOverdue(MonotonicClock::time_point now) const {
  return options_.hello_timeout.count() > 0 && !authenticated() && !closed() &&
         now - accepted_at_ > options_.hello_timeout;
}

void Session::CloseWithError(const Status& status) {
  if (closed()) return;
  if (out_.empty()) SendPartingError(stream_, status);
  Close(status.message());
}

bool Session::RequestOverdue(MonotonicClock::time_point now) const {
  if (options_.request_timeout.count() <= 0) return false;
  const bool in_request = (phase_ == Phase::kHeader && in_.size() > 0) ||
                          phase_ == Phase::kDescriptor || phase_ == Phase::kPayload;
  if (!in_request) return false;
  return now - request_arrival_ >
         AllowedTime(options_.request_timeout, options_.min_request_bytes_per_sec, request_bytes_);
}

size_t Session::AbortOverdueReservations(MonotonicClock::time_point now) {
  if (options_.request_timeout.count() <= 0) return 0;
  return state_.shm.AbortOverdueReservations(now, [&](uint64_t bytes) {
    return AllowedTime(options_.request_timeout, options_.min_request_bytes_per_sec, bytes);
  });
}

void Session::AbortOverdueRequest() {
  if (closed() || phase_ == Phase::kFailing || phase_ == Phase::kLinger) return;
  service_.counters().CountRequestTimeout();
  const bool have_header = phase_ != Phase::kHeader;
  const uint64_t request_id = have_header ? header_.request_id : RequestIdOfBadHeader(in_);
  const uint64_t announced =
      have_header ? header_.head_length() + header_.payload_length : protocol::kFrameHeaderSize;
  const std::string what = have_header ? std::string(protocol::OpcodeName(header_.opcode))
                                       : std::string("request header");
  // The stream is mid-frame: after the ERROR the session closes (Fail), and what the request
  // reserved is aborted now.
  Fail(Status::Timeout(fmt::format(
           "{} did not arrive within the node's request deadline ({} of {} bytes in {} ms; "
           "request_timeout {} ms, min_request_bytes_per_sec {})",
           what, request_bytes_, announced,
           std::chrono::duration_cast<std::chrono::milliseconds>(loop_->Now() - request_arrival_)
               .count(),
           options_.request_timeout.count(), options_.min_request_bytes_per_sec)),
       request_id);
}

}  // namespace kvport::server
