// SPDX-License-Identifier: Apache-2.0
// Opening a connection (connect, TLS, HELLO, SHM_ATTACH) and closing it.
#include "client/connection.h"

#include <arpa/inet.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "client/connection_call.h"
#include "client/connection_frame.h"
#include "client/fork_guard.h"
#include "net/connect.h"
#include "net/unix_listener.h"
#include "protocol/messages.h"

namespace kvport::client {

namespace {

// A HELLO response: version, six u64 limits, server name (u8 length, at most 255 bytes).
constexpr uint32_t kMaxHelloDescriptorBytes = 1 + 6 * 8 + 1 + 255;
// An SHM_ATTACH response: status, u64 arena size, (version 6) u64 lease word offset and
// generation, u16 reason length, at most 1024 reason bytes.
constexpr uint32_t kMaxAttachDescriptorBytes = 1 + 3 * 8 + 2 + 1024;
// Bytes each read from the socket asks for beyond the step's own (net::Stream::EnableReadAhead):
// a small response whole.
constexpr size_t kReadAheadBytes = 16 * 1024;

}  // namespace

Connection::Connection(net::Stream stream, std::string peer, const ConnectionOptions& options)
    : stream_(std::move(stream)),
      peer_(std::move(peer)),
      options_(options),
      frame_(std::make_unique<Frame>()) {
  frame_->Reset();
  KeepFromForkedChildren(stream_.fd());
}

Connection::~Connection() {
  Close(Status::Aborted("the client closed the connection"));
  if (watcher_ != nullptr) watcher_->Remove(this);
  // After the watcher let go of the descriptor: epoll must not see its number reused.
  CloseKeptFromForkedChildren(stream_);
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
  Result<net::Socket> socket = address.is_unix() ? net::ConnectUnix(address.unix_path)
                                                 : net::ConnectTcp(address.tcp, deadline);
  if (!socket.ok()) return socket.status();
  // Owned by the connection from here on, so that it is kept from forked children (and taken
  // off their list when closed) on every path, the TLS handshake's failures included.
  std::shared_ptr<Connection> conn(
      new Connection(net::Stream(std::move(socket).value()), address.ToString(), options));
  if (options.tls != nullptr && !address.is_unix()) {
    KVPORT_RETURN_IF_ERROR(conn->stream_.StartTls(*options.tls, address.tcp.host));
    Status secured = CompleteTlsHandshake(conn->stream_, deadline);
    if (!secured.ok()) return secured.WithContext("TLS handshake with " + address.ToString());
  }
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
  // From here on every response is read through the stream: a small one (header, descriptor,
  // value) in one system call (net/stream.h). The handshake's answers, passed descriptors
  // among them, were read one at a time before.
  conn->stream_.EnableReadAhead(kReadAheadBytes);
  KVPORT_ASSIGN_OR_RETURN(conn->watcher_, SocketWatcher::Shared());
  KVPORT_RETURN_IF_ERROR(conn->watcher_->Add(conn.get(), conn->stream_.fd()));
  {
    // Watched from the start: an idle connection sees the node go away.
    WaitableLock lock(conn->mu_);
    conn->reader_ = Reader::kWatcher;
    conn->watcher_idle_ = true;
    conn->watcher_->Watch(conn.get(), /*readable=*/true, kNoDeadline);
  }
  return conn;
}

std::string Connection::PeerIp() const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getpeername(stream_.fd(), reinterpret_cast<sockaddr*>(&address), &length) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text, sizeof(text));
  } else if (address.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, text,
              sizeof(text));
  }
  return text;
}

Status Connection::ReadControlResponse(uint64_t id, protocol::Opcode opcode, uint32_t most,
                                       Deadline deadline, protocol::FrameHeader* header,
                                       std::string* descriptor, std::vector<net::Socket>* passed) {
  const protocol::Limits defaults;
  char head[protocol::kFrameHeaderSize];
  Status read = passed != nullptr
                    ? ReadFullyWithDescriptors(stream_.fd(), head, sizeof(head), deadline, passed)
                    : ReadFully(stream_, head, sizeof(head), deadline);
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
  KVPORT_RETURN_IF_ERROR(ReadFully(stream_, descriptor->data(), descriptor->size(), deadline));
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
  KVPORT_RETURN_IF_ERROR(WriteFully(stream_, std::span<iovec>(&iov, 1), deadline));
  protocol::FrameHeader header;
  std::string descriptor;
  std::vector<net::Socket> memfds;  // the arena's; from version 6 on, the lease words' after it
  KVPORT_RETURN_IF_ERROR(ReadControlResponse(id, protocol::Opcode::kShmAttach,
                                             kMaxAttachDescriptorBytes, deadline, &header,
                                             &descriptor, &memfds));
  protocol::ShmAttachResponse response;
  Status decoded = protocol::DecodeResponse(header, descriptor, limits_, &response);
  if (!decoded.ok())
    return Status::Corruption("undecodable SHM_ATTACH answer: " + decoded.message());
  if (response.status != StatusCode::kOk) {
    return Status(response.status, "the node at " + peer_ +
                                       " declined shared memory: " + std::string(response.reason));
  }
  const bool lease_word = version_ >= protocol::kLeaseWordVersion;
  const size_t expected = lease_word ? 2 : 1;
  if (memfds.size() != expected) {
    return Status::Corruption(fmt::format(
        "the node granted shared memory with {} descriptor(s); protocol version {} passes {}",
        memfds.size(), version_, expected));
  }
  net::Socket words = lease_word ? std::move(memfds[1]) : net::Socket();
  KVPORT_ASSIGN_OR_RETURN(
      arena_, mapper->Map(std::move(memfds[0]), response.arena_bytes, std::move(words)));
  if (lease_word) {
    KVPORT_ASSIGN_OR_RETURN(lease_word_, arena_->LeaseWord(response.lease_word_offset));
    lease_generation_ = response.lease_generation;
  }
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
  KVPORT_RETURN_IF_ERROR(WriteFully(stream_, std::span<iovec>(&iov, 1), deadline));

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
  if (response.default_namespace) default_namespace_.emplace(*response.default_namespace);
  return Status::Ok();
}

void Connection::Close(const Status& reason) {
  // Writers into this session's arena reservations finish first (BeginArenaWrite).
  std::unique_lock writers(arena_writers_);
  {
    WaitableLock lock(mu_);
    if (!alive_.load(std::memory_order_relaxed)) return;
    alive_.store(false, std::memory_order_release);
    close_reason_ = Status::Unavailable("connection to " + peer_ + " lost: " + reason.message());
    // With nobody reading (or only an idle watcher), nobody would see the end: the pending calls
    // fail here. A holder of the role sees the socket shut down and fails them when it gives the
    // role up.
    if (reader_ == Reader::kNone || (reader_ == Reader::kWatcher && watcher_idle_)) {
      reader_ = Reader::kNone;
      watcher_idle_ = false;
      FailAllPending(close_reason_);
    }
  }
  // Wakes the reader (its read returns end-of-file) and fails any write in progress. The
  // descriptor itself stays open until the destructor, so it cannot be reused under a reader.
  ::shutdown(stream_.fd(), SHUT_RDWR);
}

Status Connection::close_reason() const {
  WaitableLock lock(mu_);
  return close_reason_;
}

}  // namespace kvport::client
