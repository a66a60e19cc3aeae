// SPDX-License-Identifier: Apache-2.0
#include "client/connection.h"

#include <arpa/inet.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "client/fork_guard.h"
#include "kvport/log.h"
#include "net/connect.h"
#include "net/unix_listener.h"
#include "protocol/messages.h"

namespace kvport::client {

struct Connection::Call {
  enum class State { kWaiting, kReceiving, kDone };

  Call(uint64_t request_id, ResponseHandler* h, Deadline d, uint64_t max_descriptor)
      : id(request_id), handler(h), deadline(d), max_descriptor_bytes(max_descriptor) {}

  // Makes a done call, held by nobody else, a new one (Send's `reuse`).
  void Restart(uint64_t request_id, ResponseHandler* h, Deadline d, uint64_t max_descriptor) {
    id = request_id;
    handler = h;
    deadline = d;
    max_descriptor_bytes = max_descriptor;
    state = State::kWaiting;
    result = Status::Ok();
    abandoned = false;
  }

  // Set by the constructor or Restart, before the call is shared.
  uint64_t id;
  ResponseHandler* handler;
  std::unique_ptr<ResponseHandler> owned_handler;  // Post: the call owns its handler
  Deadline deadline;                               // the caller's; the reader drains past it
  uint64_t max_descriptor_bytes;                   // handler->MaxDescriptorBytes, taken by Send
  // Guarded by Connection::mu_. kWaiting: in pending_, nobody touches the handler;
  // kReceiving: the reader has taken it (see io_mu); kDone: result is final, off pending_.
  State state = State::kWaiting;
  Status result;
  std::condition_variable done;
  // The reader holds io_mu whenever it touches the handler or the caller's buffers, and checks
  // `abandoned` first; Abandon sets `abandoned` under io_mu, so once it has, the reader never
  // touches them again (it discards the rest of the response instead).
  std::mutex io_mu;
  bool abandoned = false;  // guarded by io_mu
};

// The response being read, kept between reads so that the reader role can change hands in the
// middle of it: a caller whose deadline passes returns at once and the next holder goes on.
struct Connection::Frame {
  enum class Phase { kHeader, kDescriptor, kErrorDescriptor, kPayload };

  // Back to waiting for the next response's header.
  void Reset() {
    phase = Phase::kHeader;
    call = nullptr;
    until = kNoDeadline;
    result = Status::Ok();
    to_caller = false;
    drain = false;
    abandoned = false;
    Expect(head, sizeof(head));
  }
  // The next bytes go to [at, at + n) (a null `at` discards them).
  void Expect(void* at, size_t n) {
    iov.assign(1, iovec{at, n});
    next = 0;
    left = n;
  }
  // Whether any byte of this response has been read.
  bool open() const { return phase != Phase::kHeader || left != sizeof(head); }

  Phase phase = Phase::kHeader;
  char head[protocol::kFrameHeaderSize];
  protocol::FrameHeader header;
  Ticket call;                   // the call it answers; null when nobody waits for it
  Deadline until = kNoDeadline;  // past this, the node stalled: the connection closes
  // The bytes awaited now: iov[next..], `left` of them; a null base discards.
  std::vector<iovec> iov;
  std::vector<iovec> handler_iov;  // where a handler places a payload, before it becomes iov
  size_t next = 0;
  uint64_t left = 0;
  bool to_caller = false;  // iov are the call's buffers: read under io_mu, checking abandoned
  bool drain = false;      // the bytes awaited are discarded: counted in drained_ at the end
  bool abandoned = false;  // the call gave up in the middle of it
  Status result;           // the handler's verdict, the call's result once the payload is in
  DescriptorBytes descriptor;
  char error[1 + 2 + 1024];  // an ERROR's descriptor, at most kMaxErrorDescriptorBytes
  char sink[16 * 1024];      // where discarded bytes go
};

namespace {

// A HELLO response: version, six u64 limits, server name (u8 length, at most 255 bytes).
constexpr uint32_t kMaxHelloDescriptorBytes = 1 + 6 * 8 + 1 + 255;
// An SHM_ATTACH response: status, u64 arena size, (version 6) u64 lease word offset and
// generation, u16 reason length, at most 1024 reason bytes.
constexpr uint32_t kMaxAttachDescriptorBytes = 1 + 3 * 8 + 2 + 1024;
// An ERROR response: code, u16 message length, at most 1024 message bytes.
constexpr uint32_t kMaxErrorDescriptorBytes = 1 + 2 + 1024;
// A descriptor buffer starts at most this large and doubles as its bytes arrive.
constexpr size_t kDescriptorFirstBytes = 64 * 1024;
// How long the socket may go unread, between responses, before the watcher takes the reader
// role back from the callers. Callers that keep calling keep the role among themselves (the
// watcher wakes once per this period to look, not once per call, and its socket stays out of
// epoll meanwhile); when they stop, the watcher watches the socket again for late responses and
// for the node going away.
constexpr std::chrono::milliseconds kReaderGrace{50};
// Bytes each read from the socket asks for beyond the step's own (net::Stream::EnableReadAhead):
// a small response whole.
constexpr size_t kReadAheadBytes = 16 * 1024;
// Lease releases that wait for the next request (ReleaseLease) before they are sent by
// themselves, and how long such a write may wait for the connection.
constexpr size_t kMaxDeferredReleases = 64;
constexpr std::chrono::seconds kReleaseWriteTimeout{5};
// Responses the watcher reads from one connection in one callback before it lets the others'
// callbacks run (it comes back at once).
constexpr int kResponsesPerVisit = 16;

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
    std::lock_guard lock(conn->mu_);
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

Result<Connection::Ticket> Connection::Send(uint64_t request_id,
                                            const protocol::EncodedFrame& frame,
                                            ResponseHandler* handler, Deadline deadline,
                                            Ticket reuse) {
  const uint64_t max_descriptor = handler->MaxDescriptorBytes(limits_);
  // A done call nobody else holds (the reader dropped it under mu_ before its Wait returned,
  // or is only dropping its reference now) is this call's storage: no allocation.
  if (reuse != nullptr && reuse.use_count() == 1 && reuse->owned_handler == nullptr) {
    reuse->Restart(request_id, handler, deadline, max_descriptor);
    return SendCall(std::move(reuse), frame, deadline);
  }
  return SendCall(std::make_shared<Call>(request_id, handler, deadline, max_descriptor), frame,
                  deadline);
}

Result<Connection::Ticket> Connection::SendCall(Ticket call, const protocol::EncodedFrame& frame,
                                                Deadline deadline) {
  {
    std::lock_guard lock(mu_);
    if (!alive_.load(std::memory_order_relaxed)) return close_reason_;
    pending_.push_back(call);
  }
  Status written = WriteFrame(&frame, deadline);
  if (!written.ok()) {
    Abandon(call);
    return written;
  }
  return call;
}

void Connection::ReleaseLease(uint64_t lease_id) {
  bool send_now = true;
  {
    std::lock_guard lock(mu_);
    if (!alive_.load(std::memory_order_relaxed)) return;  // the session's leases went with it
    std::lock_guard deferred(deferred_mu_);
    deferred_releases_.push_back(lease_id);
    // While a caller reads, or between calls, a callback of the watcher is still to come (the
    // one asked for when the reader role is let go) and sends what no request carried. Once
    // the watcher holds the role it asks only for the socket: the release goes now.
    send_now = reader_ == Reader::kWatcher || deferred_releases_.size() >= kMaxDeferredReleases;
  }
  if (!send_now) return;
  Status s = WriteFrame(nullptr, MonotonicClock::now() + kReleaseWriteTimeout);
  if (!s.ok()) log::Debug("SHM_RELEASE on {}: {}", peer_, s.ToString());
}

void Connection::SendDeferredReleases() {
  {
    std::lock_guard lock(deferred_mu_);
    if (deferred_releases_.empty()) return;
  }
  // Never wait for a writer on the watcher's thread: a writer takes what is deferred with its
  // frame. (One that took the list just before these were added leaves them for the next
  // request or callback; at most kMaxDeferredReleases wait so.)
  Status s = WriteFrame(nullptr, MonotonicClock::now() + kReleaseWriteTimeout, /*if_free=*/true);
  if (!s.ok()) log::Debug("SHM_RELEASE on {}: {}", peer_, s.ToString());
}

Status Connection::WriteFrame(const protocol::EncodedFrame* frame, Deadline deadline,
                              bool if_free) {
  std::unique_lock write_lock(write_mu_, std::defer_lock);
  if (if_free && !write_lock.try_lock()) return Status::Ok();
  if (!write_lock.owns_lock() && !write_lock.try_lock_until(deadline)) {
    return Status::Timeout("deadline passed while waiting to write on the connection to " + peer_ +
                           " (busy with other requests)");
  }
  std::vector<iovec>& iov = write_iov_;
  iov.clear();
  {
    std::lock_guard lock(deferred_mu_);
    sending_releases_.swap(deferred_releases_);
  }
  if (!sending_releases_.empty()) {
    protocol::ShmReleaseRequest release;
    release.lease_ids.swap(sending_releases_);
    Status encoded =
        protocol::EncodeRequest(NextRequestId(), release, limits_, &release_frame_, version_);
    release.lease_ids.swap(sending_releases_);
    sending_releases_.clear();
    if (encoded.ok()) {
      iov.push_back({release_frame_.head.data(), release_frame_.head.size()});
    } else {
      log::Debug("SHM_RELEASE on {}: {}", peer_, encoded.ToString());
    }
  }
  if (frame != nullptr) {
    iov.push_back({const_cast<char*>(frame->head.data()), frame->head.size()});
    for (const protocol::PayloadSpan& span : frame->payloads) {
      iov.push_back({const_cast<void*>(span.data), span.size});
    }
  }
  Status written = WriteFully(stream_, iov, deadline);
  write_lock.unlock();
  if (written.ok()) return written;
  // The stream may hold part of a frame: nothing more can be sent on it.
  Close(written);
  if (written.code() == StatusCode::kTimeout) {
    return Status::Timeout("deadline passed while writing a request to " + peer_);
  }
  return close_reason();
}

Status Connection::Post(uint64_t request_id, const protocol::EncodedFrame& frame,
                        std::unique_ptr<ResponseHandler> handler, Deadline deadline) {
  auto call = std::make_shared<Call>(request_id, handler.get(), deadline,
                                     handler->MaxDescriptorBytes(limits_));
  call->owned_handler = std::move(handler);
  return SendCall(std::move(call), frame, deadline).status();
}

Status Connection::Wait(const Ticket& call, Deadline deadline) {
  std::unique_lock lock(mu_);
  bool listed = false;
  auto unlist = [&] {
    if (!listed) return;
    listed = false;
    waiters_.erase(std::find(waiters_.begin(), waiters_.end(), call.get()));
    // It may have been the one woken to take a free role: pass the wake-up on.
    if (reader_ == Reader::kNone) HandOff();
  };
  while (call->state != Call::State::kDone) {
    if (TakeReaderRole()) {
      // Nobody is in the middle of reading: this thread reads its own response (and whatever
      // comes before it), so no other thread has to be woken to hand it over.
      unlist();
      lock.unlock();
      return ReadFor(call, deadline);
    }
    if (!listed) {
      waiters_.push_back(call.get());
      listed = true;
    }
    if (deadline == kNoDeadline) {
      call->done.wait(lock);
    } else if (call->done.wait_until(lock, deadline) == std::cv_status::timeout &&
               call->state != Call::State::kDone) {
      unlist();
      lock.unlock();
      switch (Abandon(call)) {
        case Abandoned::kCompleted: {
          std::lock_guard relock(mu_);
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
  }
  unlist();
  return call->result;
}

bool Connection::TakeReaderRole() {
  const bool watcher_idle = reader_ == Reader::kWatcher && watcher_idle_;
  if (!alive_.load(std::memory_order_relaxed) || !(reader_ == Reader::kNone || watcher_idle)) {
    return false;
  }
  // From an idle watcher, without telling it: its socket may stay armed, and the callback the
  // response's arrival causes finds the role taken.
  reader_ = Reader::kCaller;
  watcher_idle_ = false;
  return true;
}

bool Connection::Poll(const Ticket& call) {
  std::unique_lock lock(mu_);
  if (call->state == Call::State::kDone) return true;
  if (!TakeReaderRole()) return false;  // someone else reads: they hand the response over
  lock.unlock();
  // Reads what the socket holds now: a give-up time already passed pauses at the first wait.
  ReadUntilDone(call, MonotonicClock::now(), /*spin=*/false);
  lock.lock();
  ReleaseReader();
  return call->state == Call::State::kDone;
}

void Connection::ReadUntilDone(const Ticket& call, Deadline give_up, bool spin) {
  bool paused = false;
  while (true) {
    Status status;
    try {
      status = Advance(give_up, &paused, spin);
    } catch (const std::bad_alloc&) {
      status = Status::NoSpace("out of memory while reading a response");
    }
    if (!status.ok()) {
      if (alive()) log::Debug("connection to {} ends: {}", peer_, status.ToString());
      Close(status);
      return;
    }
    {
      std::lock_guard lock(mu_);
      if (call->state == Call::State::kDone) return;
    }
    if (paused) return;
  }
}

Status Connection::ReadFor(const Ticket& call, Deadline deadline) {
  ReadUntilDone(call, deadline, /*spin=*/options_.busy_poll.count() > 0);
  std::unique_lock lock(mu_);
  if (call->state != Call::State::kDone && alive_.load(std::memory_order_relaxed)) {
    // The deadline passed. Its response has not begun (a late one will be drained), or it is
    // the one half read: the next holder of the role discards the rest.
    if (call->state == Call::State::kWaiting) {
      ErasePending(call->id);
      call->state = Call::State::kDone;
      call->result = Status::Timeout("abandoned before its response began");
      ReleaseReader();
      return Status::Timeout("no response from " + peer_ + " before the deadline");
    }
    {
      std::lock_guard io(call->io_mu);
      call->abandoned = true;
    }
    ReleaseReader();
    return Status::Timeout("the response from " + peer_ +
                           " was still arriving at the deadline (its rest is discarded)");
  }
  // Done, or closed: a closed connection fails every pending call, this one with it.
  ReleaseReader();
  return call->result;
}

void Connection::ReleaseReader() {
  reader_ = Reader::kNone;
  watcher_idle_ = false;
  frame_open_ = frame_->open();
  free_since_ = MonotonicClock::now();
  if (!alive_.load(std::memory_order_relaxed)) {
    FailAllPending(close_reason_);
    return;
  }
  HandOff();
}

void Connection::HandOff() {
  if (!waiters_.empty()) {
    // The oldest waiter's response is likely the next on the stream.
    waiters_.front()->done.notify_all();
  } else {
    // A response is half read and nobody waits to go on with it: the watcher finishes (or
    // drains) it now. Otherwise it takes the role back after kReaderGrace, unless a call takes
    // it first (the time asked for then moves on: no system call per call).
    watcher_->Watch(this, /*readable=*/false,
                    frame_open_ ? MonotonicClock::now() : free_since_ + kReaderGrace);
  }
}

Connection::Abandoned Connection::Abandon(const Ticket& call) {
  {
    std::lock_guard lock(mu_);
    switch (call->state) {
      case Call::State::kDone:
        return Abandoned::kCompleted;
      case Call::State::kWaiting:
        // The reader has not started on it: a late response will find no call and be drained.
        ErasePending(call->id);
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
  ErasePending(call.id);
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
  std::lock_guard lock(mu_);
  return close_reason_;
}

void Connection::OnWatch() {
  std::unique_lock lock(mu_);
  if (!alive_.load(std::memory_order_relaxed)) {
    if (reader_ == Reader::kWatcher) ReleaseReader();  // fails what is pending
    return;
  }
  if (reader_ == Reader::kCaller) return;  // it asks for a callback when it lets the role go
  if (reader_ == Reader::kNone) {
    if (!waiters_.empty()) return;  // woken to take the role: a caller reads its own response
    const Deadline take_at = free_since_ + kReaderGrace;
    if (!frame_open_ && MonotonicClock::now() < take_at) {
      watcher_->Watch(this, /*readable=*/false, take_at);  // calls kept coming: look again then
      return;
    }
    reader_ = Reader::kWatcher;
  }
  watcher_idle_ = false;
  lock.unlock();
  // The watcher reads from here on: releases deferred until now go (later ones go at once).
  SendDeferredReleases();
  // What the socket holds now, response after response, never waiting for more. A callback is
  // the watcher's epoll finding the socket readable, or a time asked for: either way the
  // socket is asked again, whatever the last read of it found.
  stream_.SocketReadable();
  Status status;
  bool paused = false;
  bool yield = false;
  for (int responses = 0; status.ok() && !paused; ++responses) {
    if (responses == kResponsesPerVisit) {
      yield = true;  // the other connections' callbacks first
      break;
    }
    try {
      status = Advance(MonotonicClock::now(), &paused);
    } catch (const std::bad_alloc&) {
      // Decoding a response allocates (per-key tables, bounded by the bytes received); running
      // out of memory ends this connection, never the process.
      status = Status::NoSpace("out of memory while reading a response");
    }
    if (status.ok() && !paused) {
      std::lock_guard check(mu_);
      if (!waiters_.empty()) break;  // a response ended and a caller waits: it goes on
    }
  }
  if (!status.ok()) {
    if (alive()) log::Debug("connection to {} ends: {}", peer_, status.ToString());
    Close(status);
  }
  lock.lock();
  if (!status.ok() || !alive_.load(std::memory_order_relaxed) || !waiters_.empty()) {
    // A caller waits: it reads its own response from here on (also the rest of a half-read
    // one).
    ReleaseReader();
    return;
  }
  watcher_idle_ = !frame_->open();
  if (yield || stream_.buffered() > 0) {
    // Bytes TLS already decrypted wake no epoll: they are read at the next callback.
    watcher_->Watch(this, /*readable=*/false, MonotonicClock::now());
  } else {
    // A response half read gives the node until its stall bound, and is failed there.
    watcher_->Watch(this, /*readable=*/true, frame_->open() ? frame_->until : kNoDeadline);
  }
}

Connection::Ticket* Connection::FindPending(uint64_t id) {
  for (Ticket& call : pending_) {
    if (call->id == id) return &call;
  }
  return nullptr;
}

void Connection::ErasePending(uint64_t id) {
  if (Ticket* call = FindPending(id)) {
    *call = std::move(pending_.back());
    pending_.pop_back();
  }
}

void Connection::FailAllPending(const Status& reason) {
  for (const Ticket& call : pending_) {
    call->state = Call::State::kDone;
    call->result = reason;
    call->done.notify_all();
  }
  pending_.clear();
}

Status Connection::Advance(Deadline give_up, bool* paused, bool spin) {
  *paused = false;
  while (true) {
    Status status = Fill(give_up, paused, spin);
    if (status.ok() && *paused) return status;
    bool complete = false;
    if (status.ok()) status = Step(&complete);
    if (!status.ok()) {
      // The call this response answers fails with the cause; the others with the close.
      Ticket call = std::move(frame_->call);
      if (call != nullptr) {
        std::lock_guard lock(mu_);
        if (call->state == Call::State::kReceiving) {
          ErasePending(call->id);
          call->result = status;
          call->state = Call::State::kDone;
          call->done.notify_all();
        }
      }
      frame_->Reset();
      return status;
    }
    if (complete) {
      frame_->Reset();
      return Status::Ok();
    }
  }
}

Status Connection::Fill(Deadline give_up, bool* paused, bool spin) {
  struct CountReads {
    Connection* conn;
    ~CountReads() {
      conn->socket_reads_.fetch_add(conn->stream_.TakeSocketReads(), std::memory_order_relaxed);
    }
  } count_reads{this};
  Frame& f = *frame_;
  while (f.left > 0) {
    while (f.iov[f.next].iov_len == 0)
      ++f.next;
    Result<net::IoProgress> read = net::IoProgress{};
    const size_t first = f.next;
    size_t end = first;
    if (f.iov[first].iov_base == nullptr) {
      iovec sink{f.sink, std::min(f.iov[first].iov_len, sizeof(f.sink))};
      read = stream_.ReadV(&sink, 1);
      end = first + 1;
    } else {
      // A run of real destinations: one readv per run (per wake-up), not one read per value.
      while (end < f.iov.size() && f.iov[end].iov_base != nullptr && end - first < IOV_MAX)
        ++end;
      if (f.to_caller) {
        std::lock_guard io(f.call->io_mu);
        if (f.call->abandoned) {
          f.abandoned = true;
        } else {
          read = stream_.ReadV(&f.iov[first], static_cast<int>(end - first));
          // Shown to the handler before the iovs move past them, under io_mu: the buffers are
          // the call's until it gives up.
          if (read.ok()) {
            size_t landed = read->bytes;
            for (size_t i = first; landed > 0 && i < end; ++i) {
              const size_t step = std::min(landed, f.iov[i].iov_len);
              if (step > 0) f.call->handler->OnPayloadBytes(i, f.iov[i].iov_base, step);
              landed -= step;
            }
          }
        }
      } else {
        read = stream_.ReadV(&f.iov[first], static_cast<int>(end - first));
      }
      if (f.abandoned && f.to_caller) {
        // Its call gave up: the caller's buffers are off limits, the rest is discarded.
        f.to_caller = false;
        KVPORT_RETURN_IF_ERROR(DiscardRest(f.left, "the rest of a response whose call timed out"));
        continue;
      }
    }
    if (!read.ok()) {
      return Status::Unavailable("connection lost while reading a response: " +
                                 read.status().message());
    }
    size_t moved = read->bytes;
    f.left -= moved;
    for (size_t i = first; moved > 0 && i < end; ++i) {
      const size_t step = std::min(moved, f.iov[i].iov_len);
      if (f.iov[i].iov_base != nullptr) {
        f.iov[i].iov_base = static_cast<char*>(f.iov[i].iov_base) + step;
      }
      f.iov[i].iov_len -= step;
      moved -= step;
    }
    if (f.left == 0) break;
    if (read->eof) return Status::Unavailable("the node closed the connection");
    if (!read->would_block) continue;
    if (f.phase == Frame::Phase::kHeader && f.until == kNoDeadline && f.open()) {
      // An idle connection waits as long as it takes for a response's first byte; the rest of
      // its header gets drain_timeout.
      f.until = After(MonotonicClock::now(), options_.drain_timeout);
    }
    // A give-up time already passed (a look at what has arrived: Poll, the watcher) ends at the
    // wait below, which then only asks whether the socket has more (a read-ahead stream that
    // found the socket drained did not ask it).
    const bool stall_first = f.until <= give_up;
    // Busy polling is for the round trip, before a response's first byte: once bytes stream
    // in, the node is sending and a spinning reader would only take CPU from it.
    const bool awaiting = f.phase == Frame::Phase::kHeader && !f.open();
    Status waited =
        WaitReadable(stream_, stall_first ? f.until : give_up,
                     spin && awaiting ? options_.busy_poll : std::chrono::microseconds(0));
    if (waited.code() == StatusCode::kTimeout) {
      if (!stall_first) {
        *paused = true;
        return Status::Ok();
      }
      if (f.phase == Frame::Phase::kHeader) {
        return Status::Timeout(
            fmt::format("the node stalled in the middle of a response header (more than {} ms)",
                        options_.drain_timeout.count()));
      }
      return Stalled(waited, options_.drain_timeout);
    }
    KVPORT_RETURN_IF_ERROR(waited);
  }
  return Status::Ok();
}

Status Connection::DiscardRest(uint64_t n, std::string_view what) {
  if (n > options_.drain_max_bytes) {
    return Status::Aborted(fmt::format(
        "{}: {} bytes to discard, more than drain_max_bytes ({}); closing instead of draining",
        what, n, options_.drain_max_bytes));
  }
  frame_->Expect(nullptr, n);
  frame_->drain = true;
  return Status::Ok();
}

Status Connection::NextDescriptorChunk() {
  Frame& f = *frame_;
  const size_t have = f.descriptor.size();
  // Grown as the bytes arrive: a header's claim alone never costs more than twice what was
  // received (plus the first chunk), and nothing is zero-filled before it is read into.
  const size_t next =
      std::min<size_t>(f.header.descriptor_length, std::max(kDescriptorFirstBytes, 2 * have));
  try {
    f.descriptor.resize(next);
  } catch (const std::bad_alloc&) {
    return Status::NoSpace(
        fmt::format("cannot allocate {} bytes for a response descriptor from {}", next, peer_));
  }
  f.Expect(f.descriptor.data() + have, next - have);
  return Status::Ok();
}

Status Connection::Step(bool* complete) {
  Frame& f = *frame_;
  switch (f.phase) {
    case Frame::Phase::kHeader: {
      protocol::FrameHeader& header = f.header;
      Status decoded =
          protocol::DecodeFrameHeader(std::string_view(f.head, sizeof(f.head)), limits_, &header);
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
      {
        std::lock_guard lock(mu_);
        Ticket* pending = FindPending(header.request_id);
        if (pending != nullptr && (*pending)->state == Call::State::kWaiting) {
          f.call = *pending;
          f.call->state = Call::State::kReceiving;
        }
      }
      f.until = After(f.call != nullptr ? f.call->deadline : MonotonicClock::now(),
                      options_.drain_timeout);
      if (header.opcode == protocol::Opcode::kError) {
        if (header.descriptor_length > sizeof(f.error)) {
          return Status::Corruption(
              fmt::format("the node sent an ERROR frame with a descriptor of {} bytes (at most {})",
                          header.descriptor_length, sizeof(f.error)));
        }
        f.phase = Frame::Phase::kErrorDescriptor;
        f.Expect(f.error, header.descriptor_length);
        return Status::Ok();
      }
      if (f.call == nullptr) {
        // Nobody waits for it: its call timed out before the response began.
        f.phase = Frame::Phase::kPayload;
        return DiscardRest(header.descriptor_length + header.payload_length,
                           fmt::format("a late {} response", protocol::OpcodeName(header.opcode)));
      }
      if (header.descriptor_length > f.call->max_descriptor_bytes) {
        return Status::Corruption(
            fmt::format("the node announced a {} response descriptor of {} bytes; an answer to "
                        "this request has at most {}",
                        protocol::OpcodeName(header.opcode), header.descriptor_length,
                        f.call->max_descriptor_bytes));
      }
      f.phase = Frame::Phase::kDescriptor;
      f.descriptor.clear();
      return NextDescriptorChunk();
    }
    case Frame::Phase::kDescriptor: {
      if (f.descriptor.size() < f.header.descriptor_length) return NextDescriptorChunk();
      std::vector<iovec>& payload = f.handler_iov;
      payload.clear();
      {
        std::lock_guard io(f.call->io_mu);
        if (f.call->abandoned) {
          f.abandoned = true;
        } else {
          // The handler keeps the bytes (its answer's views point into them); the reader takes
          // the handler's previous buffer, so a handler used again brings its capacity back.
          ResponseHandler* handler = f.call->handler;
          std::swap(handler->descriptor, f.descriptor);
          f.result = handler->OnResponse(f.header, &payload);
        }
      }
      if (f.descriptor.capacity() > kDescriptorFirstBytes) f.descriptor = DescriptorBytes();
      if (f.result.ok() && !f.abandoned) {
        uint64_t placed = 0;
        for (const iovec& v : payload)
          placed += v.iov_len;
        if (placed != f.header.payload_length) {
          f.result = Status::Corruption(
              "response payload of " + std::to_string(f.header.payload_length) +
              " bytes does not match its descriptor (" + std::to_string(placed) + " bytes)");
        }
      }
      // The node broke the protocol: the rest of the stream cannot be trusted.
      if (f.result.code() == StatusCode::kCorruption) return f.result;
      f.phase = Frame::Phase::kPayload;
      if (f.abandoned || !f.result.ok()) {
        return DiscardRest(f.header.payload_length, "a response whose call timed out");
      }
      f.iov.swap(payload);  // both keep their capacity for the next responses
      f.next = 0;
      f.left = f.header.payload_length;
      f.to_caller = true;
      return Status::Ok();
    }
    case Frame::Phase::kErrorDescriptor: {
      Status error = NodeError(f.header, std::string_view(f.error, f.header.descriptor_length),
                               limits_, peer_);
      const bool fatal = ErrorEndsConnection(f.header, error);
      if (f.call != nullptr) {
        Finish(*f.call, error);
      } else if (!fatal) {
        log::Debug("dropping the node's ERROR for request {}, which no call waits for: {}",
                   f.header.request_id, error.ToString());
      }
      if (fatal) {
        f.call = nullptr;  // already finished with the node's word
        return error;
      }
      *complete = true;
      return Status::Ok();
    }
    case Frame::Phase::kPayload: {
      if (f.drain) drained_.fetch_add(1, std::memory_order_relaxed);
      if (f.call != nullptr) {
        Finish(*f.call, f.abandoned ? Status::Timeout("abandoned in the middle of its response")
                                    : std::move(f.result));
      }
      *complete = true;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

}  // namespace kvport::client
