// SPDX-License-Identifier: Apache-2.0
#include "server/session.h"

#include <sys/socket.h>

#include <algorithm>
#include <optional>
#include <string>

#include "kvport/log.h"
#include "protocol/wire.h"
#include "server/command_table.h"

namespace kvport::server {

namespace {

// Stages advanced per readiness event before yielding to the other sessions of the loop.
constexpr int kMaxReadStepsPerEvent = 64;

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

Session::Session(net::EventLoop* loop, net::Socket socket, net::StreamKind kind,
                 CacheService& service, const SessionOptions& options,
                 std::function<void(Session*)> on_closed)
    : loop_(loop),
      socket_(std::move(socket)),
      service_(service),
      options_(options),
      on_closed_(std::move(on_closed)),
      peer_(net::PeerName(socket_.fd())),
      last_activity_(loop->Now()) {
  state_.kind = kind;
  state_.shm.set_counters(&service_.counters());
  if (kind == net::StreamKind::kUnix) {
    Result<net::PeerCredentials> cred = net::PeerCredentialsOf(socket_.fd());
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
  interest_ = EPOLLIN;
  Status watched = loop_->Watch(socket_.fd(), interest_, this);
  if (!watched.ok()) Close("cannot watch the socket: " + watched.ToString());
  return watched;
}

void Session::OnEvents(uint32_t events) {
  if (closed()) return;  // an event fetched in the same batch as our close
  if (events & EPOLLERR) {
    Close("socket error");
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
  for (int i = 0; i < kMaxReadStepsPerEvent && WantsToRead(); ++i) {
    if (!ReadStep()) break;
  }
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

std::optional<net::IoProgress> Session::FillInput(size_t target) {
  Result<net::IoProgress> r = in_.FillTo(socket_.fd(), target);
  if (!r.ok()) {
    Close(r.status().message());
    return std::nullopt;
  }
  if (r->bytes > 0) {
    Touch();
    service_.counters().AddBytesReceived(r->bytes);
  }
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
  std::optional<net::IoProgress> r = FillInput(header_.head_length());
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
  RequestContext ctx{service_, state_, header_};
  Result<HandlerOutcome> outcome = command->handler(ctx, request_);
  if (!outcome.ok()) {
    // A request that decoded but cannot be served (an unknown LIST cursor, a reservation that
    // is not open) is refused alone: its whole frame has been read, the stream is intact, and
    // the calls pipelined behind it go on. A failed HELLO, or an error that says the stream
    // itself is off (the client closes on those as well), ends the session.
    const StatusCode code = outcome.status().code();
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
  if (receiver_->reader().done()) ReadPayload();  // nothing to read (e.g. all values empty)
}

void Session::WakeWhenReadable(size_t bytes) {
  if (state_.kind != net::StreamKind::kTcp) return;  // Unix sockets ignore SO_RCVLOWAT in poll
  const int low = static_cast<int>(std::clamp<size_t>(bytes, 1, kMaxReceiveLowWater));
  if (low == receive_low_water_) return;
  // The kernel caps it at half the receive buffer, so a wake-up always comes; failing to set
  // it costs wake-ups, not correctness.
  if (net::SetReceiveLowWater(socket_.fd(), low).ok()) receive_low_water_ = low;
}

bool Session::ReadPayload() {
  net::ScatterReader& reader = receiver_->reader();
  bool eof = false;
  if (!reader.done()) {
    Result<net::IoProgress> r = reader.ReadFrom(socket_.fd());
    if (!r.ok()) {
      Close(r.status().message());
      return false;
    }
    if (r->bytes > 0) {
      Touch();
      service_.counters().AddBytesReceived(r->bytes);
    }
    eof = r->eof;
    receiver_->OnProgress();
  }
  if (!reader.done()) {
    if (eof) {
      Close("peer closed in the middle of an MSET payload");
    } else {
      WakeWhenReadable(reader.remaining());
    }
    return false;
  }
  WakeWhenReadable(1);
  Result<Response> response = receiver_->Finish();
  receiver_.reset();
  if (!response.ok()) {
    Fail(response.status(), header_.request_id);
    return false;
  }
  CompleteRequest(std::move(response).value());
  return !closed();
}

void Session::CompleteRequest(Response response) {
  if (response.pass_fd >= 0) {
    out_.AppendPassingDescriptor(std::move(response.head), response.pass_fd);
  } else {
    out_.Append(std::move(response.head));
  }
  for (Response::Span& span : response.payloads) {
    out_.AppendBorrowed(span.data, span.size, std::move(span.keep_alive));
  }
  in_.Clear();
  request_ = protocol::AnyRequest{};  // its views pointed into in_
  phase_ = Phase::kHeader;
  Flush();
}

void Session::Refuse(const Status& status) {
  service_.counters().CountErrorResponse();
  log::Debug("session {}: {} refused: {}", peer_, protocol::OpcodeName(header_.opcode),
             status.ToString());
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
  log::Info("session {}: {}; sending ERROR and closing", peer_, status.ToString());
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
  if (!out_.empty()) {
    Result<net::IoProgress> r = out_.WriteTo(socket_.fd());
    if (!r.ok()) {
      Close(r.status().message());
      return;
    }
    if (r->bytes > 0) {
      Touch();
      service_.counters().AddBytesSent(r->bytes);
    }
  }
  if (out_.empty()) AfterOutputDrained();
  UpdateInterest();
}

void Session::AfterOutputDrained() {
  if (phase_ == Phase::kFailing) {
    HalfCloseAndLinger();
  } else if (shutting_down_ && AtRequestBoundary()) {
    HalfCloseAndLinger();
  }
}

void Session::HalfCloseAndLinger() {
  // Our FIN follows the last response; closing outright could turn it into a reset (if unread
  // input is pending) that destroys the response before the peer reads it.
  ::shutdown(socket_.fd(), SHUT_WR);
  phase_ = Phase::kLinger;
  linger_timer_ = loop_->RunAfter(options_.linger, [this] {
    linger_timer_ = 0;
    Close("peer did not close after our half-close");
  });
  UpdateInterest();
}

void Session::DiscardInput() {
  char scratch[4096];
  for (int i = 0; i < 64; ++i) {
    iovec iov{scratch, sizeof(scratch)};
    Result<net::IoProgress> r = net::ReadV(socket_.fd(), &iov, 1);
    if (!r.ok() || r->eof) {
      Close("closed after half-close");
      return;
    }
    if (r->would_block) return;
  }
}

void Session::BeginShutdown() {
  if (closed() || shutting_down_) return;
  shutting_down_ = true;
  if (AtRequestBoundary() && out_.empty()) {
    Close("server stopping");  // idle: nothing in flight to finish
    return;
  }
  UpdateInterest();
}

bool Session::AtRequestBoundary() const {
  return phase_ == Phase::kHeader && in_.size() == 0;
}

bool Session::WantsToRead() const {
  switch (phase_) {
    case Phase::kHeader:
      // Mid-header: finish the frame. Between requests: only if we will answer another one.
      return in_.size() > 0 || (!shutting_down_ && out_.bytes() <= options_.max_outstanding_bytes);
    case Phase::kDescriptor:
    case Phase::kPayload:
    case Phase::kLinger:
      return true;
    case Phase::kFailing:
    case Phase::kClosed:
      return false;
  }
  return false;
}

void Session::UpdateInterest() {
  if (closed()) return;
  uint32_t want = 0;
  if (WantsToRead()) want |= EPOLLIN;
  if (!out_.empty()) want |= EPOLLOUT;
  if (want == interest_) return;
  Status modified = loop_->Modify(socket_.fd(), want, this);
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
  loop_->Unwatch(socket_.fd());
  socket_.Close();
  receiver_.reset();   // an MSET in progress: every reservation is aborted
  out_.Clear();        // pins of unsent MGET values are released
  state_.shm.Clear();  // leases and shared-memory reservations end with the session
  service_.counters().ConnectionClosed();
  log::Debug("session {} closed: {}", peer_, reason);
  if (on_closed_) on_closed_(this);
}

}  // namespace kvport::server
