#include "client/connection.h"

#include <sys/socket.h>

#include <string>
#include <utility>

#include "kvport/log.h"
#include "protocol/messages.h"

namespace kvport::client {

struct Connection::Call {
  enum class State { kWaiting, kReceiving, kDone };

  Call(uint64_t request_id, ResponseHandler* h) : id(request_id), handler(h) {}

  const uint64_t id;
  ResponseHandler* const handler;
  // Guarded by Connection::mu_. kWaiting: in pending_, nobody touches the handler;
  // kReceiving: the reader thread owns the handler; kDone: result is final, off pending_.
  State state = State::kWaiting;
  Status result;
  std::condition_variable done;
};

namespace {

// Reads `iov` completely; entries with a null base are read and dropped.
Status ReadIntoIov(int fd, std::vector<iovec>& iov) {
  size_t i = 0;
  while (i < iov.size()) {
    if (iov[i].iov_base == nullptr) {
      KVPORT_RETURN_IF_ERROR(DiscardFully(fd, iov[i].iov_len, kNoDeadline));
      ++i;
      continue;
    }
    // A run of real destinations: one readv per run (per wake-up), not one read per value.
    size_t end = i;
    while (end < iov.size() && iov[end].iov_base != nullptr && end - i < IOV_MAX)
      ++end;
    while (i < end) {
      if (iov[i].iov_len == 0) {
        ++i;
        continue;
      }
      Result<net::IoProgress> progress = net::ReadV(fd, &iov[i], static_cast<int>(end - i));
      if (!progress.ok()) {
        return Status::Unavailable("connection lost while reading a response: " +
                                   progress.status().message());
      }
      size_t moved = progress->bytes;
      while (moved > 0 && i < end) {
        size_t step = std::min(moved, iov[i].iov_len);
        iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + step;
        iov[i].iov_len -= step;
        moved -= step;
        if (iov[i].iov_len == 0) ++i;
      }
      if (i < end && progress->eof) return Status::Unavailable("the node closed the connection");
      if (i < end && progress->would_block) {
        KVPORT_RETURN_IF_ERROR(WaitReadable(fd, kNoDeadline));
      }
    }
  }
  return Status::Ok();
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

}  // namespace

Connection::Connection(net::Socket socket, std::string peer)
    : socket_(std::move(socket)), peer_(std::move(peer)) {}

Connection::~Connection() {
  Close(Status::Aborted("the client closed the connection"));
  if (reader_.joinable()) reader_.join();
}

Result<std::shared_ptr<Connection>> Connection::Open(const net::HostPort& address,
                                                     std::string_view client_name,
                                                     Deadline deadline) {
  KVPORT_ASSIGN_OR_RETURN(net::Socket socket, ConnectTcp(address, deadline));
  std::shared_ptr<Connection> conn(new Connection(std::move(socket), address.ToString()));
  Status hello = conn->Handshake(client_name, deadline);
  if (!hello.ok()) {
    conn->alive_ = false;
    return hello.WithContext("handshake with " + conn->peer_);
  }
  conn->reader_ = std::thread([raw = conn.get()] { raw->ReadLoop(); });
  return conn;
}

Status Connection::Handshake(std::string_view client_name, Deadline deadline) {
  protocol::HelloRequest request;
  request.client_name = client_name.substr(0, 255);
  protocol::EncodedFrame frame;
  const protocol::Limits defaults;
  const uint64_t id = NextRequestId();
  KVPORT_RETURN_IF_ERROR(protocol::EncodeRequest(id, request, defaults, &frame));
  iovec iov{frame.head.data(), frame.head.size()};
  KVPORT_RETURN_IF_ERROR(WriteFully(socket_.fd(), std::span<iovec>(&iov, 1), deadline));

  char head[protocol::kFrameHeaderSize];
  KVPORT_RETURN_IF_ERROR(ReadFully(socket_.fd(), head, sizeof(head), deadline));
  protocol::FrameHeader header;
  Status decoded =
      protocol::DecodeFrameHeader(std::string_view(head, sizeof(head)), defaults, &header);
  if (!decoded.ok()) {
    return Status::Corruption("the peer does not speak the kvport protocol: " + decoded.message());
  }
  std::string descriptor(header.descriptor_length, '\0');
  KVPORT_RETURN_IF_ERROR(ReadFully(socket_.fd(), descriptor.data(), descriptor.size(), deadline));
  if (header.opcode == protocol::Opcode::kError) {
    return NodeError(header, descriptor, defaults, peer_);
  }
  if (header.request_id != id || header.opcode != protocol::Opcode::kHello) {
    return Status::Corruption("the node answered HELLO with " +
                              std::string(protocol::OpcodeName(header.opcode)) + " (request id " +
                              std::to_string(header.request_id) + ")");
  }
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
  auto call = std::make_shared<Call>(request_id, handler);
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

Status Connection::Wait(const Ticket& call, Deadline deadline) {
  std::unique_lock lock(mu_);
  if (deadline == kNoDeadline) {
    call->done.wait(lock, [&] { return call->state == Call::State::kDone; });
  } else if (!call->done.wait_until(lock, deadline,
                                    [&] { return call->state == Call::State::kDone; })) {
    lock.unlock();
    Abandon(call);
    return Status::Timeout("no response from " + peer_ + " before the deadline");
  }
  return call->result;
}

void Connection::Abandon(const Ticket& call) {
  std::unique_lock lock(mu_);
  if (call->state == Call::State::kWaiting) {
    // The reader has not started on it: a late response will find no call and be discarded.
    pending_.erase(call->id);
    call->state = Call::State::kDone;
    return;
  }
  if (call->state == Call::State::kReceiving) {
    // The reader is writing into the caller's buffers right now. Stop it (it is blocked on the
    // socket at worst) and wait until it lets go, so no byte lands after the call returns.
    lock.unlock();
    Close(Status::Timeout("a response was still arriving when its call's deadline passed"));
    lock.lock();
    call->done.wait(lock, [&] { return call->state == Call::State::kDone; });
  }
}

void Connection::Close(const Status& reason) {
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
    Status status = ReadOneResponse();
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

Status Connection::ReadOneResponse() {
  const int fd = socket_.fd();
  char head[protocol::kFrameHeaderSize];
  KVPORT_RETURN_IF_ERROR(ReadFully(fd, head, sizeof(head), kNoDeadline));
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
  if (call == nullptr) {
    // Nobody waits for it (the call timed out), or it is a connection-level ERROR.
    std::string descriptor(header.descriptor_length, '\0');
    KVPORT_RETURN_IF_ERROR(ReadFully(fd, descriptor.data(), descriptor.size(), kNoDeadline));
    if (header.opcode == protocol::Opcode::kError) {
      return NodeError(header, descriptor, limits_, peer_);
    }
    return DiscardFully(fd, header.payload_length, kNoDeadline);
  }

  auto finish = [&](Status result) {
    std::lock_guard lock(mu_);
    pending_.erase(call->id);
    call->result = std::move(result);
    call->state = Call::State::kDone;
    call->done.notify_all();
  };

  ResponseHandler* handler = call->handler;
  handler->descriptor.resize(header.descriptor_length);
  Status read = ReadFully(fd, handler->descriptor.data(), header.descriptor_length, kNoDeadline);
  if (!read.ok()) {
    finish(read);
    return read;
  }
  if (header.opcode == protocol::Opcode::kError) {
    // The node closes the connection after an ERROR; so do we.
    Status error = NodeError(header, handler->descriptor, limits_, peer_);
    finish(error);
    return error;
  }

  std::vector<iovec> payload;
  Status result = handler->OnResponse(header, &payload);
  if (result.ok()) {
    uint64_t placed = 0;
    for (const iovec& v : payload)
      placed += v.iov_len;
    if (placed != header.payload_length) {
      result = Status::Corruption("response payload of " + std::to_string(header.payload_length) +
                                  " bytes does not match its descriptor (" +
                                  std::to_string(placed) + " bytes)");
    }
  }
  read =
      result.ok() ? ReadIntoIov(fd, payload) : DiscardFully(fd, header.payload_length, kNoDeadline);
  if (!read.ok()) {
    finish(read);
    return read;
  }
  const bool broken = result.code() == StatusCode::kCorruption;
  Status close_with = broken ? result : Status::Ok();
  finish(std::move(result));
  return close_with;
}

}  // namespace kvport::client
