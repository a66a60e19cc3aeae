// SPDX-License-Identifier: Apache-2.0
#include "server/kvport_protocol.h"

#include <sys/socket.h>

#include <algorithm>
#include <optional>
#include <string>
#include <variant>

#include "kvport/log.h"
#include "protocol/wire.h"
#include "server/cache_service.h"
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

// Request stages advanced per readiness event before yielding to the other connections of the
// loop (the bytes read are bounded by the connection): the loop is level-triggered, so what is
// left is taken up at its next turn.
constexpr int kMaxReadStepsPerEvent = 64;
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

KvportProtocol::KvportProtocol(StreamConnection& connection)
    : conn_(connection), service_(connection.service()) {
  state_.id = conn_.id();
  state_.kind = conn_.kind();
  state_.fd = conn_.stream().fd();
  state_.arena.set_counters(&service_.counters());
  state_.durability = conn_.mailbox();
  if (state_.kind == net::StreamKind::kUnix) {
    Result<net::PeerCredentials> cred = net::PeerCredentialsOf(state_.fd);
    if (cred.ok()) state_.peer_uid = cred->uid;
  }
}

KvportProtocol::~KvportProtocol() = default;

// One readv brings a small call whole (its header, descriptor and value), or several pipelined
// ones (net/stream.h, "Read-ahead").
size_t KvportProtocol::read_ahead_bytes() const {
  return kReadAheadBytes;
}

void KvportProtocol::Opened() {
  // Mutual TLS: the certificate may stand for a token at HELLO (AccessToken::cert_names).
  if (const net::TlsSession* tls = conn_.stream().tls(); tls != nullptr)
    state_.peer_certificate_names = tls->PeerCertificateNames();
}

void KvportProtocol::OnReadable() {
  bool yielded = true;  // stopped by the per-event bounds, with more to read
  for (int i = 0;
       i < kMaxReadStepsPerEvent && conn_.ReadBudgetLeft() && conn_.open() && WantsToRead(); ++i) {
    if (!ReadStep()) {
      yielded = false;
      break;
    }
  }
  // What is left may be less than the payload's SO_RCVLOWAT (set when it last ran dry): the loop
  // must still be woken for it.
  if (yielded && phase_ == Phase::kPayload && !conn_.closed()) WakeWhenReadable(1);
}

bool KvportProtocol::ReadStep() {
  switch (phase_) {
    case Phase::kHeader:
      return ReadHeader();
    case Phase::kDescriptor:
      return ReadDescriptor();
    case Phase::kPayload:
      return ReadPayload();
    case Phase::kEnded:
      return false;
  }
  return false;
}

std::optional<net::IoProgress> KvportProtocol::FillInput(size_t target, size_t max_allocation) {
  const bool first_bytes = phase_ == Phase::kHeader && in_.size() == 0;
  Result<net::IoProgress> r = in_.FillTo(conn_.stream(), target, max_allocation);
  if (!r.ok()) {
    conn_.Close(r.status().message());
    return std::nullopt;
  }
  if (r->bytes > 0) {
    // A request begins with its first byte: its deadline counts from here.
    if (first_bytes) conn_.BeginRequest();
    conn_.Received(r->bytes);
  }
  conn_.SyncMemory();
  return *r;
}

bool KvportProtocol::ReadHeader() {
  std::optional<net::IoProgress> r = FillInput(protocol::kFrameHeaderSize);
  if (!r) return false;
  if (in_.size() < protocol::kFrameHeaderSize) {
    if (r->eof) {
      if (in_.size() == 0) {
        conn_.Close("peer closed");
      } else {
        conn_.Close("peer closed in the middle of a frame header");
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

bool KvportProtocol::ReadDescriptor() {
  std::optional<net::IoProgress> r =
      FillInput(header_.head_length(), conn_.InputAllowance(in_.allocated_bytes()));
  if (!r) return false;
  if (in_.size() < header_.head_length()) {
    if (r->eof) conn_.Close("peer closed in the middle of a frame descriptor");
    return false;
  }
  Dispatch();
  return conn_.open() && phase_ != Phase::kEnded;
}

void KvportProtocol::Dispatch() {
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
  if (WaitForDisk()) return;
  Serve();
}

bool KvportProtocol::WaitForDisk() {
  if (!service_.has_disk()) return false;
  std::string_view ns;
  bool any_namespace = false;
  const std::vector<protocol::MgetKey>* keys = nullptr;
  if (auto* mget = std::get_if<protocol::MgetRequest>(&request_)) {
    ns = mget->ns;
    any_namespace = mget->any_namespace;
    keys = &mget->keys;
  } else if (auto* get = std::get_if<protocol::ArenaGetRequest>(&request_)) {
    ns = get->ns;
    any_namespace = get->any_namespace;
    keys = &get->keys;
  } else {
    return false;
  }
  std::vector<std::string_view> names;
  names.reserve(keys->size());
  for (const protocol::MgetKey& key : *keys)
    names.push_back(key.key);
  if (!service_.NeedsDisk(state_.access.grant(), ns, any_namespace, names)) return false;
  waiting_for_disk_ = true;
  service_.PromoteInBackground(
      state_.access.shared_grant(), std::string(ns), any_namespace,
      std::vector<std::string>(names.begin(), names.end()),
      [mailbox = conn_.mailbox(), this] { mailbox->Post([this] { DiskReady(); }); });
  return true;
}

void KvportProtocol::DiskReady() {
  // Ended meanwhile (its deadline passed, the connection failed): nothing to serve.
  if (!waiting_for_disk_ || phase_ != Phase::kDescriptor || !conn_.open()) {
    return;
  }
  waiting_for_disk_ = false;
  Serve();
  // Writes the answer, and goes on with what is buffered or arrives.
  conn_.ScheduleRead();
}

void KvportProtocol::Serve() {
  const Command* command = FindCommand(header_.opcode);
  RequestContext ctx{service_, state_, header_};
  const bool was_authenticated = authenticated();
  Result<HandlerOutcome> outcome = command->handler(ctx, request_);
  if (!was_authenticated && authenticated()) conn_.Authenticated();
  if (!outcome.ok()) {
    // A request that decoded but cannot be served (an unknown LIST cursor, a reservation that
    // is not open) is refused alone: its whole frame has been read, the stream is intact, and
    // the calls pipelined behind it go on. A failed HELLO, or an error that says the stream
    // itself is off (the client closes on those as well), ends the connection.
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

void KvportProtocol::WakeWhenReadable(size_t bytes) {
  if (state_.kind != net::StreamKind::kTcp) return;  // Unix sockets ignore SO_RCVLOWAT in poll
  const int low = static_cast<int>(
      std::clamp<size_t>(conn_.stream().LowWaterFor(bytes), 1, kMaxReceiveLowWater));
  if (low == receive_low_water_) return;
  // The kernel caps it at half the receive buffer, so a wake-up always comes; failing to set
  // it costs wake-ups, not correctness.
  if (net::SetReceiveLowWater(state_.fd, low).ok()) receive_low_water_ = low;
}

bool KvportProtocol::ReadPayload() {
  bool eof = false;
  bool would_block = false;
  if (receiver_->remaining() > 0) {
    // Destinations only for bytes that are here (an MSET item is reserved once its first byte
    // has arrived), so a payload that never comes evicts nothing.
    Result<net::IoProgress> available = conn_.stream().Readable(receiver_->remaining());
    if (!available.ok()) {
      conn_.Close(available.status().message());
      return false;
    }
    receiver_->Prepare(available->bytes);
    net::ScatterReader& reader = receiver_->reader();
    if (!reader.done()) {
      Result<net::IoProgress> r = reader.ReadFrom(conn_.stream());
      if (!r.ok()) {
        conn_.Close(r.status().message());
        return false;
      }
      conn_.Received(r->bytes);
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
      conn_.Close("peer closed in the middle of an MSET payload");
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
  return conn_.open();
}

void KvportProtocol::CompleteRequest(Response response) {
  // From the request's first byte (the loop's clock of that wake-up).
  const auto elapsed = MonotonicClock::now() - conn_.request_arrival();
  service_.counters().RecordLatency(
      header_.opcode,
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
  net::OutputQueue& out = conn_.output();
  if (!response.pass_fds.empty()) {
    out.AppendPassingDescriptors(std::move(response.head), std::move(response.pass_fds));
  } else if (!response.head.empty()) {  // empty: a request with no answer
    out.Append(std::move(response.head));
  }
  for (Response::Span& span : response.payloads) {
    out.AppendBorrowed(span.data, span.size, std::move(span.keep_alive));
  }
  // The lists go back to the handlers for the next request.
  state_.scratch.Recycle(std::move(response.payloads), out.TakeSpare());
  in_.Clear();
  ForgetRequest(&request_);  // its views pointed into in_; its lists may serve the next one
  phase_ = Phase::kHeader;
  conn_.Flush();
}

void KvportProtocol::Refuse(const Status& status) {
  service_.counters().CountErrorResponse();
  log::Debug("session {}: {} refused: {}", conn_.peer(), protocol::OpcodeName(header_.opcode),
             status.ToString());
  service_.counters().client_errors().Warn(
      conn_.peer(),
      fmt::format("refused {} {}", protocol::OpcodeName(header_.opcode),
                  StatusCodeName(status.code())),
      fmt::format("{} refused: {}", protocol::OpcodeName(header_.opcode), status.ToString()),
      conn_.now());
  protocol::ErrorResponse error;
  error.code = status.code();
  error.message = status.message();
  protocol::EncodedFrame frame;
  Status encoded = protocol::EncodeResponse(header_.request_id, error, service_.limits(), &frame);
  if (!encoded.ok()) {
    conn_.Close("cannot encode an ERROR frame: " + encoded.ToString());
    return;
  }
  Response response;
  response.head = std::move(frame.head);
  CompleteRequest(std::move(response));
}

void KvportProtocol::Fail(const Status& status, uint64_t request_id) {
  service_.counters().CountErrorResponse();
  log::Debug("session {}: {}; sending ERROR and closing", conn_.peer(), status.ToString());
  service_.counters().client_errors().Warn(
      conn_.peer(), fmt::format("closed {}", StatusCodeName(status.code())),
      fmt::format("{}; sent ERROR and closed the connection", status.ToString()), conn_.now());
  receiver_.reset();  // aborts reservations of an MSET in progress
  protocol::ErrorResponse error;
  error.code = status.ok() ? StatusCode::kInternal : status.code();
  error.message = status.message();
  protocol::EncodedFrame frame;
  Status encoded = protocol::EncodeResponse(request_id, error, service_.limits(), &frame);
  if (!encoded.ok()) {
    conn_.Close("cannot encode an ERROR frame: " + encoded.ToString());
    return;
  }
  in_.Clear();
  request_ = protocol::AnyRequest{};
  phase_ = Phase::kEnded;
  conn_.output().Append(std::move(frame.head));
  conn_.Finish();
  conn_.Flush();
}

void KvportProtocol::OutputDrained() {
  state_.scratch.ReleasePins();  // every answer is written: its hits need no pin now
}

bool KvportProtocol::RequestUnderWay() const {
  return phase_ == Phase::kDescriptor || phase_ == Phase::kPayload ||
         (phase_ == Phase::kHeader && in_.size() > 0);
}

bool KvportProtocol::DescriptorThrottled() const {
  return phase_ == Phase::kDescriptor && in_.full() && in_.size() < header_.head_length() &&
         std::max(conn_.InputAllowance(in_.allocated_bytes()), net::ReadBuffer::kMinAllocation) <=
             in_.allocated_bytes();
}

bool KvportProtocol::WantsToRead() const {
  switch (phase_) {
    case Phase::kHeader:
      // Mid-header: finish the frame. Between requests: only if we will answer another one,
      // and the queued answers (ours, and the node's) leave room for it.
      return in_.size() > 0 || (!conn_.shutting_down() && conn_.QueueThrottle() == Throttle::kNone);
    case Phase::kDescriptor:
      // Unless its keys are being read from disk, or the node's input buffers are at their cap
      // and ours must grow: wait (the request deadline still runs).
      return !waiting_for_disk_ && !DescriptorThrottled();
    case Phase::kPayload:
      return true;
    case Phase::kEnded:
      return false;
  }
  return false;
}

ProtocolHandler::Throttle KvportProtocol::Throttled() const {
  if (phase_ == Phase::kHeader && in_.size() == 0 && !conn_.shutting_down())
    return conn_.QueueThrottle();
  return DescriptorThrottled() ? Throttle::kNode : Throttle::kNone;
}

std::string KvportProtocol::RequestName() const {
  return phase_ == Phase::kHeader ? std::string("request header")
                                  : std::string(protocol::OpcodeName(header_.opcode));
}

void KvportProtocol::FailRequest(const Status& status) {
  if (phase_ == Phase::kEnded) return;
  waiting_for_disk_ = false;
  Fail(status, phase_ == Phase::kHeader ? RequestIdOfBadHeader(in_) : header_.request_id);
}

std::string KvportProtocol::PartingError(const Status& status) const {
  return ErrorFrameBytes(status);
}

size_t KvportProtocol::AbortOverdueReservations(MonotonicClock::time_point now) {
  const ConnectionOptions& options = conn_.options();
  return state_.arena.AbortOverdueReservations(now, [&](uint64_t bytes) {
    return AllowedTime(options.request_timeout, options.min_request_bytes_per_sec, bytes);
  });
}

void KvportProtocol::Closed() {
  receiver_.reset();  // an MSET in progress: every reservation is aborted
  in_.Clear(0);
  state_.arena.Clear();  // leases and shared-memory reservations end with the session
}

}  // namespace kvport::server
