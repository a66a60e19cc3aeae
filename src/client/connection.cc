// SPDX-License-Identifier: Apache-2.0
#include "client/connection.h"

#include <fmt/core.h>
#include <sys/socket.h>

#include <algorithm>
#include <new>
#include <string>
#include <utility>

#include "kvport/log.h"
#include "net/unix_listener.h"
#include "protocol/messages.h"

namespace kvport::client {

struct Connection::Call {
  enum class State { kWaiting, kReceiving, kDone };

  Call(uint64_t request_id, ResponseHandler* h, Deadline d, uint64_t max_descriptor)
      : id(request_id), handler(h), deadline(d), max_descriptor_bytes(max_descriptor) {}

  const uint64_t id;
  ResponseHandler* const handler;
  std::unique_ptr<ResponseHandler> owned_handler;  // Post: the call owns its handler
  const Deadline deadline;                         // the caller's; the reader drains past it
  const uint64_t max_descriptor_bytes;             // handler->MaxDescriptorBytes, taken by Send
  // Guarded by Connection::mu_. kWaiting: in pending_, nobody touches the handler;
  // kReceiving: the reader thread has taken it (see io_mu); kDone: result is final, off
  // pending_.
  State state = State::kWaiting;
  Status result;
  std::condition_variable done;
  // The reader holds io_mu whenever it touches the handler or the caller's buffers, and checks
  // `abandoned` first; Abandon sets `abandoned` under io_mu, so once it has, the reader never
  // touches them again (it discards the rest of the response instead).
  std::mutex io_mu;
  bool abandoned = false;  // guarded by io_mu
};

namespace {

// A HELLO response: version, six u64 limits, server name (u8 length, at most 255 bytes).
constexpr uint32_t kMaxHelloDescriptorBytes = 1 + 6 * 8 + 1 + 255;
// An SHM_ATTACH response: status, u64 arena size, u16 reason length, at most 1024 reason bytes.
constexpr uint32_t kMaxAttachDescriptorBytes = 1 + 8 + 2 + 1024;
// An ERROR response: code, u16 message length, at most 1024 message bytes.
constexpr uint32_t kMaxErrorDescriptorBytes = 1 + 2 + 1024;
// A descriptor buffer starts at most this large and doubles as its bytes arrive.
constexpr size_t kDescriptorFirstBytes = 64 * 1024;

// `base + d`, saturating at kNoDeadline.
Deadline After(Deadline base, std::chrono::milliseconds d) {
  if (base >= kNoDeadline - d) return kNoDeadline;
  return base + d;
}

// A Timeout of the reader's own bound as what it is: a node that stopped sending mid-response.
Status Stalled(const Status& s, std::chrono::milliseconds drain_timeout) {
  if (s.code() != StatusCode::kTimeout) return s;
  return Status::Timeout(fmt::format(
      "the node stalled in the middle of a response (not complete {} ms after its call's "
      "deadline, drain_timeout)",
      drain_timeout.count()));
}

// The node's ERROR response as a Status.
Status NodeError(const protocol::FrameHeader& header, std::string_view descriptor,
                 const protocol::Limits& limits, std::string_view peer) {
  protocol::ErrorResponse error;
  Status decoded = protocol::DecodeResponse(header, descriptor, limits, &error);
  if (!decoded.ok()) {
    return Status::Corruption("node " + std::string(peer) +
                              " sent an undecodable ERROR frame: " + decoded.message());
  }
  return Status(error.code, "node " + std::string(peer) +
                                " rejected the request: " + std::string(error.message));
}

// Whether a node's ERROR ends the connection: one not tied to a request (id 0), or one that
// says the stream itself is broken (malformed bytes, a version the node does not speak), after
// which the node closes. Any other ERROR answers its request alone.
bool ErrorEndsConnection(const protocol::FrameHeader& header, const Status& error) {
  return header.request_id == 0 || error.code() == StatusCode::kCorruption ||
         error.code() == StatusCode::kNotSupported;
}

// Reads one frame header: waits as long as it takes for its first byte (an idle connection),
// then gives the rest `stall` to arrive.
Status ReadHeader(int fd, char* head, std::chrono::milliseconds stall) {
  size_t got = 0;
  Deadline until = kNoDeadline;
  while (got < protocol::kFrameHeaderSize) {
    iovec iov{head + got, protocol::kFrameHeaderSize - got};
    Result<net::IoProgress> progress = net::ReadV(fd, &iov, 1);
    if (!progress.ok()) {
      return Status::Unavailable("connection lost while reading a response: " +
                                 progress.status().message());
    }
    got += progress->bytes;
    if (got == protocol::kFrameHeaderSize) break;
    if (progress->eof) return Status::Unavailable("the node closed the connection");
    if (got > 0 && until == kNoDeadline) until = After(MonotonicClock::now(), stall);
    if (progress->would_block) {
      Status waited = WaitReadable(fd, until);
      if (waited.code() == StatusCode::kTimeout) {
        return Status::Timeout(
            fmt::format("the node stalled in the middle of a response header (more than {} ms)",
                        stall.count()));
      }
      KVPORT_RETURN_IF_ERROR(waited);
    }
  }
  return Status::Ok();
}

}  // namespace

Connection::Connection(net::Socket socket, std::string peer, const ConnectionOptions& options)
    : socket_(std::move(socket)), peer_(std::move(peer)), options_(options) {}

Connection::~Connection() {
  Close(Status::Aborted("the client closed the connection"));
  if (reader_.joinable()) reader_.join();
}

Result<std::shared_ptr<Connection>> Connection::Open(const NodeAddress& address,
                                                     std::string_view client_name,
                                                     Deadline deadline,
                                                     const ConnectionOptions& options,
                                                     ArenaMapper* mapper) {
  if (mapper != nullptr && !address.is_unix()) {
    return Status::InvalidArgument("shared memory needs the node's Unix socket, not " +
                                   address.ToString());
  }
  Result<net::Socket> socket =
      address.is_unix() ? net::ConnectUnix(address.unix_path) : ConnectTcp(address.tcp, deadline);
  if (!socket.ok()) return socket.status();
  std::shared_ptr<Connection> conn(
      new Connection(std::move(socket).value(), address.ToString(), options));
  Status hello = conn->Handshake(client_name, options.token, deadline);
  if (!hello.ok()) {
    conn->alive_ = false;
    return hello.WithContext("handshake with " + conn->peer_);
  }
  if (mapper != nullptr) {
    Status attached = conn->AttachArena(mapper, deadline);
    if (!attached.ok()) {
      conn->alive_ = false;
      return attached;
    }
  }
  conn->reader_ = std::thread([raw = conn.get()] { raw->ReadLoop(); });
  return conn;
}

Status Connection::ReadControlResponse(uint64_t id, protocol::Opcode opcode, uint32_t most,
                                       Deadline deadline, protocol::FrameHeader* header,
                                       std::string* descriptor, net::Socket* passed) {
  const protocol::Limits defaults;
  char head[protocol::kFrameHeaderSize];
  Status read = passed != nullptr
                    ? ReadFullyWithDescriptor(socket_.fd(), head, sizeof(head), deadline, passed)
                    : ReadFully(socket_.fd(), head, sizeof(head), deadline);
  KVPORT_RETURN_IF_ERROR(read);
  Status decoded =
      protocol::DecodeFrameHeader(std::string_view(head, sizeof(head)), defaults, header);
  if (!decoded.ok()) {
    return Status::Corruption("the peer does not speak the kvport protocol: " + decoded.message());
  }
  // Both possible answers are small: never allocate what a header merely claims.
  const uint32_t limit =
      header->opcode == protocol::Opcode::kError ? kMaxErrorDescriptorBytes : most;
  if (header->descriptor_length > limit) {
    return Status::Corruption(
        fmt::format("the node answered {} with a {} descriptor of {} bytes (at most {} possible)",
                    protocol::OpcodeName(opcode), protocol::OpcodeName(header->opcode),
                    header->descriptor_length, limit));
  }
  descriptor->assign(header->descriptor_length, '\0');
  KVPORT_RETURN_IF_ERROR(ReadFully(socket_.fd(), descriptor->data(), descriptor->size(), deadline));
  if (header->opcode == protocol::Opcode::kError) {
    return NodeError(*header, *descriptor, defaults, peer_);
  }
  if (header->request_id != id || header->opcode != opcode) {
    return Status::Corruption(
        fmt::format("the node answered {} with {} (request id {})", protocol::OpcodeName(opcode),
                    protocol::OpcodeName(header->opcode), header->request_id));
  }
  return Status::Ok();
}

Status Connection::AttachArena(ArenaMapper* mapper, Deadline deadline) {
  if (version_ < protocol::kShmVersion) {
    return Status::NotSupported(
        fmt::format("shared memory needs protocol version {}; the node at {} speaks version {}",
                    protocol::kShmVersion, peer_, version_));
  }
  protocol::EncodedFrame frame;
  const uint64_t id = NextRequestId();
  KVPORT_RETURN_IF_ERROR(
      protocol::EncodeRequest(id, protocol::ShmAttachRequest{}, limits_, &frame, version_));
  iovec iov{frame.head.data(), frame.head.size()};
  KVPORT_RETURN_IF_ERROR(WriteFully(socket_.fd(), std::span<iovec>(&iov, 1), deadline));
  protocol::FrameHeader header;
  std::string descriptor;
  net::Socket memfd;
  KVPORT_RETURN_IF_ERROR(ReadControlResponse(id, protocol::Opcode::kShmAttach,
                                             kMaxAttachDescriptorBytes, deadline, &header,
                                             &descriptor, &memfd));
  protocol::ShmAttachResponse response;
  Status decoded = protocol::DecodeResponse(header, descriptor, limits_, &response);
  if (!decoded.ok())
    return Status::Corruption("undecodable SHM_ATTACH answer: " + decoded.message());
  if (response.status != StatusCode::kOk) {
    return Status(response.status, "the node at " + peer_ +
                                       " declined shared memory: " + std::string(response.reason));
  }
  if (!memfd.valid()) {
    return Status::Corruption("the node granted shared memory but passed no descriptor");
  }
  KVPORT_ASSIGN_OR_RETURN(arena_, mapper->Map(std::move(memfd), response.arena_bytes));
  return Status::Ok();
}

Status Connection::Handshake(std::string_view client_name, std::string_view token,
                             Deadline deadline) {
  protocol::HelloRequest request;
  request.client_name = client_name.substr(0, 255);
  request.token = token;
  protocol::EncodedFrame frame;
  const protocol::Limits defaults;
  const uint64_t id = NextRequestId();
  KVPORT_RETURN_IF_ERROR(protocol::EncodeRequest(id, request, defaults, &frame));
  iovec iov{frame.head.data(), frame.head.size()};
  KVPORT_RETURN_IF_ERROR(WriteFully(socket_.fd(), std::span<iovec>(&iov, 1), deadline));

  protocol::FrameHeader header;
  std::string descriptor;
  Status answered = ReadControlResponse(id, protocol::Opcode::kHello, kMaxHelloDescriptorBytes,
                                        deadline, &header, &descriptor, nullptr);
  if (!answered.ok() && !token.empty() && answered.code() == StatusCode::kCorruption) {
    // A node older than protocol version 4 reads the token as trailing bytes.
    return answered.WithContext(
        "the node refused a HELLO with a token (a node older than "
        "protocol version 4 does not take tokens)");
  }
  KVPORT_RETURN_IF_ERROR(answered);
  protocol::HelloResponse response;
  KVPORT_RETURN_IF_ERROR(protocol::DecodeResponse(header, descriptor, defaults, &response));
  if (response.version < protocol::kMinProtocolVersion ||
      response.version > protocol::kMaxProtocolVersion) {
    return Status::NotSupported("the node chose protocol version " +
                                std::to_string(response.version) + "; this client speaks " +
                                std::to_string(protocol::kMinProtocolVersion) + ".." +
                                std::to_string(protocol::kMaxProtocolVersion));
  }
  Status limits_ok = protocol::ValidateLimits(response.limits);
  if (!limits_ok.ok()) {
    return Status::Corruption("the node announced unusable limits: " + limits_ok.message());
  }
  limits_ = response.limits;
  version_ = response.version;
  server_name_ = std::string(response.server_name);
  return Status::Ok();
}

Result<Connection::Ticket> Connection::Send(uint64_t request_id,
                                            const protocol::EncodedFrame& frame,
                                            ResponseHandler* handler, Deadline deadline) {
  return SendCall(
      std::make_shared<Call>(request_id, handler, deadline, handler->MaxDescriptorBytes(limits_)),
      frame, deadline);
}

Result<Connection::Ticket> Connection::SendCall(Ticket call, const protocol::EncodedFrame& frame,
                                                Deadline deadline) {
  const uint64_t request_id = call->id;
  {
    std::lock_guard lock(mu_);
    if (!alive_.load(std::memory_order_relaxed)) return close_reason_;
    pending_.emplace(request_id, call);
  }
  std::vector<iovec> iov;
  iov.reserve(1 + frame.payloads.size());
  iov.push_back({const_cast<char*>(frame.head.data()), frame.head.size()});
  for (const protocol::PayloadSpan& span : frame.payloads) {
    iov.push_back({const_cast<void*>(span.data), span.size});
  }

  std::unique_lock write_lock(write_mu_, std::defer_lock);
  if (!write_lock.try_lock_until(deadline)) {
    Abandon(call);
    return Status::Timeout("deadline passed while waiting to write on the connection to " + peer_ +
                           " (busy with other requests)");
  }
  Status written = WriteFully(socket_.fd(), iov, deadline);
  write_lock.unlock();
  if (!written.ok()) {
    // The stream may hold part of a frame: nothing more can be sent on it.
    Close(written);
    Abandon(call);
    if (written.code() == StatusCode::kTimeout) {
      return Status::Timeout("deadline passed while writing a request to " + peer_);
    }
    return close_reason();
  }
  return call;
}

Status Connection::Post(uint64_t request_id, const protocol::EncodedFrame& frame,
                        std::unique_ptr<ResponseHandler> handler, Deadline deadline) {
  auto call = std::make_shared<Call>(request_id, handler.get(), deadline,
                                     handler->MaxDescriptorBytes(limits_));
  call->owned_handler = std::move(handler);
  return SendCall(std::move(call), frame, deadline).status();
}

Status Connection::Wait(const Ticket& call, Deadline deadline) {
  auto done = [&] { return call->state == Call::State::kDone; };
  {
    std::unique_lock lock(mu_);
    if (deadline == kNoDeadline) {
      call->done.wait(lock, done);
      return call->result;
    }
    if (call->done.wait_until(lock, deadline, done)) return call->result;
  }
  switch (Abandon(call)) {
    case Abandoned::kCompleted: {
      std::lock_guard lock(mu_);
      return call->result;
    }
    case Abandoned::kBeforeResponse:
      return Status::Timeout("no response from " + peer_ + " before the deadline");
    case Abandoned::kMidResponse:
      break;
  }
  return Status::Timeout("the response from " + peer_ +
                         " was still arriving at the deadline (its rest is discarded)");
}

Connection::Abandoned Connection::Abandon(const Ticket& call) {
  {
    std::lock_guard lock(mu_);
    switch (call->state) {
      case Call::State::kDone:
        return Abandoned::kCompleted;
      case Call::State::kWaiting:
        // The reader has not started on it: a late response will find no call and be drained.
        pending_.erase(call->id);
        call->state = Call::State::kDone;
        call->result = Status::Timeout("abandoned before its response began");
        return Abandoned::kBeforeResponse;
      case Call::State::kReceiving:
        break;
    }
  }
  // The reader is on this call's response. Taking io_mu waits out a read into the caller's
  // buffers in progress (one readv of what the socket holds, never a wait for the node);
  // afterwards the reader sees `abandoned` and discards the rest.
  std::lock_guard io(call->io_mu);
  call->abandoned = true;
  return Abandoned::kMidResponse;
}

void Connection::Finish(Call& call, Status result) {
  std::lock_guard lock(mu_);
  pending_.erase(call.id);
  call.result = std::move(result);
  call.state = Call::State::kDone;
  call.done.notify_all();
}

void Connection::Close(const Status& reason) {
  // Writers into this session's arena reservations finish first (BeginArenaWrite).
  std::unique_lock writers(arena_writers_);
  {
    std::lock_guard lock(mu_);
    if (!alive_.load(std::memory_order_relaxed)) return;
    alive_.store(false, std::memory_order_release);
    close_reason_ = Status::Unavailable("connection to " + peer_ + " lost: " + reason.message());
  }
  // Wakes the reader thread (its read returns end-of-file) and fails any write in progress. The
  // descriptor itself stays open until the destructor, so it cannot be reused under a reader.
  ::shutdown(socket_.fd(), SHUT_RDWR);
}

Status Connection::close_reason() const {
  std::lock_guard lock(mu_);
  return close_reason_;
}

void Connection::ReadLoop() {
  while (true) {
    Status status;
    try {
      status = ReadOneResponse();
    } catch (const std::bad_alloc&) {
      // Decoding a response allocates (per-key tables, bounded by the bytes received); running
      // out of memory ends this connection, never the process.
      status = Status::NoSpace("out of memory while reading a response");
    }
    if (!status.ok()) {
      if (alive()) log::Debug("connection to {} ends: {}", peer_, status.ToString());
      Close(status);
      break;
    }
  }
  FailAllPending(close_reason());
}

void Connection::FailAllPending(const Status& reason) {
  std::lock_guard lock(mu_);
  for (auto& [id, call] : pending_) {
    call->state = Call::State::kDone;
    call->result = reason;
    call->done.notify_all();
  }
  pending_.clear();
}

Status Connection::ReadDescriptor(uint32_t n, Deadline until, DescriptorBytes* out) {
  out->clear();
  size_t have = 0;
  while (have < n) {
    // Grown as the bytes arrive: a header's claim alone never costs more than twice what was
    // received (plus the first chunk), and nothing is zero-filled before it is read into.
    const size_t next = std::min<size_t>(n, std::max(kDescriptorFirstBytes, 2 * have));
    try {
      out->resize(next);
    } catch (const std::bad_alloc&) {
      return Status::NoSpace(
          fmt::format("cannot allocate {} bytes for a response descriptor from {}", next, peer_));
    }
    Status read = ReadFully(socket_.fd(), out->data() + have, next - have, until);
    if (!read.ok()) return Stalled(read, options_.drain_timeout);
    have = next;
  }
  return Status::Ok();
}

Status Connection::Drain(uint64_t n, Deadline until, std::string_view what) {
  if (n > options_.drain_max_bytes) {
    return Status::Aborted(fmt::format(
        "{}: {} bytes to discard, more than drain_max_bytes ({}); closing instead of draining",
        what, n, options_.drain_max_bytes));
  }
  Status discarded = DiscardFully(socket_.fd(), n, until);
  if (!discarded.ok()) return Stalled(discarded, options_.drain_timeout);
  drained_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status Connection::ReadPayload(Call& call, std::vector<iovec>& iov, Deadline until,
                               bool* abandoned) {
  const int fd = socket_.fd();
  uint64_t left = 0;
  for (const iovec& v : iov)
    left += v.iov_len;
  size_t i = 0;
  while (i < iov.size()) {
    if (iov[i].iov_len == 0) {
      ++i;
      continue;
    }
    if (iov[i].iov_base == nullptr) {
      Status discarded = DiscardFully(fd, iov[i].iov_len, until);
      if (!discarded.ok()) return Stalled(discarded, options_.drain_timeout);
      left -= iov[i].iov_len;
      ++i;
      continue;
    }
    // A run of real destinations: one readv per run (per wake-up), not one read per value.
    size_t end = i;
    while (end < iov.size() && iov[end].iov_base != nullptr && end - i < IOV_MAX)
      ++end;
    net::IoProgress progress;
    {
      std::lock_guard io(call.io_mu);
      if (call.abandoned) {
        *abandoned = true;
        break;
      }
      Result<net::IoProgress> read = net::ReadV(fd, &iov[i], static_cast<int>(end - i));
      if (!read.ok()) {
        return Status::Unavailable("connection lost while reading a response: " +
                                   read.status().message());
      }
      progress = *read;
    }
    left -= progress.bytes;
    size_t moved = progress.bytes;
    while (moved > 0 && i < end) {
      size_t step = std::min(moved, iov[i].iov_len);
      iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + step;
      iov[i].iov_len -= step;
      moved -= step;
      if (iov[i].iov_len == 0) ++i;
    }
    if (left == 0) break;
    if (progress.eof) return Status::Unavailable("the node closed the connection");
    if (progress.would_block) {
      Status waited = WaitReadable(fd, until);
      if (!waited.ok()) return Stalled(waited, options_.drain_timeout);
    }
  }
  if (!*abandoned) return Status::Ok();
  return Drain(left, until, "the rest of a response whose call timed out");
}

Status Connection::ReadError(const protocol::FrameHeader& header, const Ticket& call) {
  const Deadline until =
      After(call != nullptr ? call->deadline : MonotonicClock::now(), options_.drain_timeout);
  Status error;
  if (header.descriptor_length > kMaxErrorDescriptorBytes) {
    error = Status::Corruption(
        fmt::format("the node sent an ERROR frame with a descriptor of {} bytes (at most {})",
                    header.descriptor_length, kMaxErrorDescriptorBytes));
  } else {
    char descriptor[kMaxErrorDescriptorBytes];
    Status read = ReadFully(socket_.fd(), descriptor, header.descriptor_length, until);
    error = read.ok() ? NodeError(header, std::string_view(descriptor, header.descriptor_length),
                                  limits_, peer_)
                      : Stalled(read, options_.drain_timeout);
  }
  const bool fatal = ErrorEndsConnection(header, error);
  if (call != nullptr) {
    Finish(*call, error);
  } else if (!fatal) {
    log::Debug("dropping the node's ERROR for request {}, which no call waits for: {}",
               header.request_id, error.ToString());
  }
  return fatal ? error : Status::Ok();
}

Status Connection::ReadOneResponse() {
  char head[protocol::kFrameHeaderSize];
  KVPORT_RETURN_IF_ERROR(ReadHeader(socket_.fd(), head, options_.drain_timeout));
  protocol::FrameHeader header;
  Status decoded =
      protocol::DecodeFrameHeader(std::string_view(head, sizeof(head)), limits_, &header);
  if (!decoded.ok()) {
    return Status::Corruption("malformed frame from the node: " + decoded.message());
  }
  if (!header.is_response()) {
    return Status::Corruption("the node sent a request frame (" +
                              std::string(protocol::OpcodeName(header.opcode)) + ")");
  }
  if (header.opcode != protocol::Opcode::kError && header.version != version_) {
    return Status::Corruption(
        "the node sent a " + std::string(protocol::OpcodeName(header.opcode)) +
        " response of protocol version " + std::to_string(header.version) +
        " on a connection that negotiated version " + std::to_string(version_));
  }

  Ticket call;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(header.request_id);
    if (it != pending_.end() && it->second->state == Call::State::kWaiting) {
      call = it->second;
      call->state = Call::State::kReceiving;
    }
  }
  if (header.opcode == protocol::Opcode::kError) return ReadError(header, call);
  if (call == nullptr) {
    // Nobody waits for it: its call timed out before the response began.
    return Drain(header.descriptor_length + header.payload_length,
                 After(MonotonicClock::now(), options_.drain_timeout),
                 fmt::format("a late {} response", protocol::OpcodeName(header.opcode)));
  }

  const Deadline until = After(call->deadline, options_.drain_timeout);
  if (header.descriptor_length > call->max_descriptor_bytes) {
    Status bad = Status::Corruption(fmt::format(
        "the node announced a {} response descriptor of {} bytes; an answer to this request has "
        "at most {}",
        protocol::OpcodeName(header.opcode), header.descriptor_length, call->max_descriptor_bytes));
    Finish(*call, bad);
    return bad;
  }
  DescriptorBytes descriptor;
  Status read = ReadDescriptor(header.descriptor_length, until, &descriptor);
  if (!read.ok()) {
    Finish(*call, read);
    return read;
  }

  std::vector<iovec> payload;
  Status result;
  bool abandoned = false;
  {
    std::lock_guard io(call->io_mu);
    if (call->abandoned) {
      abandoned = true;
    } else {
      ResponseHandler* handler = call->handler;
      handler->descriptor = std::move(descriptor);
      result = handler->OnResponse(header, &payload);
    }
  }
  if (result.ok() && !abandoned) {
    uint64_t placed = 0;
    for (const iovec& v : payload)
      placed += v.iov_len;
    if (placed != header.payload_length) {
      result = Status::Corruption("response payload of " + std::to_string(header.payload_length) +
                                  " bytes does not match its descriptor (" +
                                  std::to_string(placed) + " bytes)");
    }
  }
  if (result.code() == StatusCode::kCorruption) {
    // The node broke the protocol: the rest of the stream cannot be trusted.
    Finish(*call, result);
    return result;
  }
  if (abandoned || !result.ok()) {
    read = Drain(header.payload_length, until, "a response whose call timed out");
  } else {
    read = ReadPayload(*call, payload, until, &abandoned);
  }
  if (!read.ok()) {
    Finish(*call, read);
    return read;
  }
  Finish(*call, abandoned ? Status::Timeout("abandoned in the middle of its response")
                          : std::move(result));
  return Status::Ok();
}

}  // namespace kvport::client
