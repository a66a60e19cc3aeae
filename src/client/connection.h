// SPDX-License-Identifier: Apache-2.0
// Connection: one connection to a node (TCP, or its Unix socket), with pipelined requests.
//
// Any number of threads send requests on one Connection; each request carries a fresh request
// id and the node's responses are matched to their callers by that id, so a slow MGET does not
// hold up the calls behind it. Writing is serialised (one frame at a time, by the calling
// thread, from the caller's buffers). Reading is done by whoever holds the connection's reader
// role, which hands each response to the ResponseHandler of the call it answers: a caller
// waiting in Wait takes the role when nobody reads the socket (or only the process's socket
// watcher, idle between frames), so its response is read by the thread that waits for it and
// no second thread has to be woken; responses to other calls it reads on the way are handed to
// them (their waiters woken). When its own call is over it passes the role to another waiting
// caller, or, once the socket has gone unread for a while (or a response is half read), to the
// SocketWatcher: the one thread of the process that keeps every idle connection's socket
// watched (late responses, answers nobody waits for, the node going away), never blocking on
// any one of them. A handler reads the payload straight into the caller's buffers: the reader
// places the payload where the handler says, and no call touches those buffers after it
// returns.
//
// Nothing a node reports is trusted for allocation: a response's descriptor is checked against
// what the request can bring back (ResponseHandler::MaxDescriptorBytes) and read into a buffer
// that grows as its bytes arrive, never sized from the header's claim alone.
//
// A call whose deadline passes while its response is arriving gives up its buffers at once;
// the reader discards the rest of that response (the drain, bounded by
// ConnectionOptions::drain_max_bytes and drain_timeout) and goes on with the next one, so the
// calls pipelined behind it are not failed. A node's ERROR response to one request fails that
// request only, unless it says the stream itself is broken.
//
// A Connection never reconnects: once closed (the node went away, a write timed out mid-frame,
// the node broke the protocol, a drain over its bounds) every pending and later call fails with
// the close reason, Unavailable, and the ConnectionPool replaces it.
//
// A connection opened with an ArenaMapper (a Unix socket to a same-host node) also asks for the
// node's arena (SHM_ATTACH) before it is used, and keeps the mapping: the shared-memory
// transport's calls then move values through it, and the socket carries only control frames.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "client/arena_mapping.h"
#include "client/endpoint.h"
#include "client/socket_io.h"
#include "client/socket_watcher.h"
#include "client/waitable_mutex.h"
#include "common/thread_annotations.h"
#include "kvport/byte_vector.h"
#include "kvport/status.h"
#include "net/host_port.h"
#include "net/socket.h"
#include "protocol/frame.h"
#include "protocol/limits.h"

namespace kvport::client {

// A response descriptor: filled by the reader thread without zero-filling first.
using DescriptorBytes = std::vector<char, DefaultInitAllocator<char>>;

struct ConnectionOptions {
  // How long after its call's deadline a response may take to arrive completely: the time the
  // reader spends draining a response nobody waits for any more. A node that stalls longer in
  // the middle of a response has the connection closed.
  std::chrono::milliseconds drain_timeout{5'000};
  // The most bytes of an abandoned response the reader discards to keep the connection; a
  // larger remainder closes the connection instead (reconnecting is cheaper).
  uint64_t drain_max_bytes = uint64_t{256} << 20;
  // Presented in HELLO to a node that requires a token (docs/security.md); empty: none.
  std::string token;
  // InitOptions::busy_poll: how long a caller reading its own answer polls without sleeping,
  // before the answer's first byte, until it blocks (the reader thread never spins).
  std::chrono::microseconds busy_poll{0};
  // TLS for TCP connections (InitOptions::tls_ca_file...), or null: plain TCP. The node's
  // certificate is verified against the CA and the host name connected to. A Unix-socket
  // connection never uses it (it stays on the host).
  std::shared_ptr<const net::TlsContext> tls;
};

// Decodes the response to one request. Runs on the thread holding the connection's reader role
// (a waiting caller, or the socket watcher's thread).
class ResponseHandler {
 public:
  virtual ~ResponseHandler() = default;

  // Called once the response's header and descriptor have arrived (`descriptor` holds the
  // descriptor bytes and stays valid for as long as this handler does). Decodes them and, when
  // the response has a payload, appends to `payload` where its bytes go, in order; the sizes
  // must add up to header.payload_length (a null iov_base discards that many bytes). A non-OK
  // return fails the call with that status (the payload is then discarded); Corruption also
  // closes the connection, since the node broke the protocol.
  virtual Status OnResponse(const protocol::FrameHeader& header, std::vector<iovec>* payload) = 0;

  // Called by the connection with each run of payload bytes as it lands where OnResponse put
  // payload iov `index` (in order; each byte once; never for discarded bytes), on the thread
  // reading the connection, while the caller's buffers are still the call's: a handler can hash
  // the bytes while they are in cache. Default: nothing.
  virtual void OnPayloadBytes(size_t /*index*/, const void* /*data*/, size_t /*bytes*/) {}

  // The largest descriptor a well-formed answer to this handler's request can have, given the
  // connection's limits. A response announcing more is Corruption, refused before anything is
  // allocated for it. Called by Send, on the sending thread.
  virtual uint64_t MaxDescriptorBytes(const protocol::Limits& limits) const = 0;

  std::string_view descriptor_view() const { return {descriptor.data(), descriptor.size()}; }

  // Bytes of the response's descriptor; filled by the connection before OnResponse.
  DescriptorBytes descriptor;
};

class Connection : private SocketWatcher::Watched {
 public:
  // Connects, sends HELLO (offering protocol versions kMinProtocolVersion..kMaxProtocolVersion)
  // and waits for the node's answer (version and limits), all before `deadline`. With `mapper`
  // (Unix sockets only), then asks for the arena and maps it through `mapper`. Errors:
  // Unavailable (refused, reset, no such host; a failed TLS handshake), Timeout, NotSupported
  // (no common protocol version; or the node declined shared memory, with its reason),
  // Corruption (the peer is not a kvport node), PermissionDenied (the node's certificate failed
  // verification; a TLS node refused a client in the clear).
  static Result<std::shared_ptr<Connection>> Open(const NodeAddress& address,
                                                  std::string_view client_name, Deadline deadline,
                                                  const ConnectionOptions& options = {},
                                                  ArenaMapper* mapper = nullptr);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The limits the node announced: requests must fit them.
  const protocol::Limits& limits() const { return limits_; }
  // The protocol version negotiated in HELLO: requests are encoded with it, and every response
  // but ERROR must carry it.
  uint8_t version() const { return version_; }
  const std::string& server_name() const { return server_name_; }
  // The namespace the session's token names for calls that name none (HELLO of version 5 on);
  // nullopt when it names none.
  const std::optional<std::string>& default_namespace() const { return default_namespace_; }
  const std::string& peer() const { return peer_; }

  // A pending call: returned by Send, consumed by Wait.
  struct Call;
  using Ticket = std::shared_ptr<Call>;

  // A request id unique on this connection, for the encoder.
  uint64_t NextRequestId() { return next_request_id_.fetch_add(1, std::memory_order_relaxed); }

  // Writes `frame` (encoded with `request_id`) and registers `handler` for its response.
  // `handler` and the frame's payload buffers must stay valid until Wait returns (or Send
  // fails). Errors: Unavailable (closed or lost), Timeout (the deadline passed before the frame
  // was written; a partly written frame closes the connection).
  // `reuse`, a ticket of an earlier call (on any connection) that Wait returned, becomes this
  // call's ticket when nobody else holds it, so that a call allocates nothing.
  Result<Ticket> Send(uint64_t request_id, const protocol::EncodedFrame& frame,
                      ResponseHandler* handler, Deadline deadline, Ticket reuse = nullptr);

  // Send for a request whose answer nobody waits for (ARENA_RELEASE before protocol version 7):
  // the connection keeps `handler` until the answer arrives or the connection closes, then
  // drops it.
  Status Post(uint64_t request_id, const protocol::EncodedFrame& frame,
              std::unique_ptr<ResponseHandler> handler, Deadline deadline);
  // Releases a lease of this connection's session (protocol version 7 or later: the node does
  // not answer ARENA_RELEASE). The release goes out in the same write as the next request on the
  // connection, so a get costs its caller no write of its own; when no request follows, the
  // socket watcher's next callback (within kReaderGrace) sends it. At most kMaxDeferredReleases
  // wait: the one that fills the list is sent at once. Not fatal when it cannot be sent: a lease
  // the node never hears about ends with the session.
  void ReleaseLease(uint64_t lease_id) EXCLUDES(mu_);

  // Waits for the response to a sent request. OK when the handler accepted it; otherwise the
  // handler's error, the node's ERROR response, Unavailable when the connection was lost, or
  // Timeout when `deadline` passed first. When Wait returns, the reader is done with the
  // handler and with every buffer it named: a response still arriving at the deadline is
  // drained by the next reader (the rest of it discarded), never written into the caller's
  // buffers. The waiting thread may itself read the connection meanwhile (the reader role).
  Status Wait(const Ticket& ticket, Deadline deadline) EXCLUDES(mu_);

  // Whether the response to a sent request is in (Wait would return at once), without waiting
  // for the node: when nobody else reads the connection, this thread reads what has arrived
  // (taking the reader role and giving it back before it returns). Never abandons the call.
  bool Poll(const Ticket& ticket) EXCLUDES(mu_);

  // The node's arena, when the connection was opened with a mapper; null otherwise.
  const std::shared_ptr<ArenaMapping>& arena() const { return arena_; }
  // Held (shared) while the caller writes into an arena reservation of this connection's
  // session: Close waits for it before shutting the socket down, because the node aborts the
  // session's reservations when it sees the socket close, and the space must not be reused
  // while this process still writes into it.
  std::shared_lock<std::shared_mutex> BeginArenaWrite() {
    return std::shared_lock<std::shared_mutex>(arena_writers_);
  }

  // What an arena access keeps for this connection's session (UCX: the session key the node
  // gave and the endpoints that carry the session's values). Set once, before the connection is
  // used (PoolOptions::attach); destroyed with the connection.
  class ArenaSession {
   public:
    virtual ~ArenaSession() = default;
  };
  void SetArenaSession(std::unique_ptr<ArenaSession> session) {
    arena_session_ = std::move(session);
  }
  ArenaSession* arena_session() const { return arena_session_.get(); }
  // The numeric address of the node's end of the connection ("127.0.0.1", "::1"); empty for a
  // Unix socket or a socket that is gone.
  std::string PeerIp() const;

  // True until the connection is closed.
  bool alive() const { return alive_.load(std::memory_order_acquire); }
  // Whether the node still holds this session's leases, checked after reading leased bytes
  // (ArenaMapping::LeaseWordHeld): false once the node has ended them (it may reuse their bytes).
  // True for a node too old to say (protocol below 6: alive() is all there is).
  bool leases_held() const {
    return lease_word_ == nullptr || ArenaMapping::LeaseWordHeld(lease_word_, lease_generation_);
  }
  // Closes the connection (idempotent): pending calls fail with `reason` (made Unavailable).
  // The descriptor is closed by the destructor only.
  void Close(const Status& reason) EXCLUDES(mu_);
  // Why the connection closed; OK while alive.
  Status close_reason() const EXCLUDES(mu_);

  // Responses (or their rest) the reader discarded because their call had given up, with the
  // connection kept: for tests and diagnostics.
  uint64_t drained_responses() const { return drained_.load(std::memory_order_relaxed); }
  // Read system calls made on the socket so far (read-ahead makes a small response one).
  uint64_t socket_reads() const { return socket_reads_.load(std::memory_order_relaxed); }

 private:
  Connection(net::Stream stream, std::string peer, const ConnectionOptions& options);
  Result<Ticket> SendCall(Ticket call, const protocol::EncodedFrame& frame, Deadline deadline)
      EXCLUDES(mu_);
  // Writes one frame whole (write_mu_ held for it), after an ARENA_RELEASE of the deferred
  // releases when there are any (`frame` may be null: only them); a failure closes the
  // connection. `if_free`: only if no other writer holds the connection (OK, nothing written,
  // otherwise).
  Status WriteFrame(const protocol::EncodedFrame* frame, Deadline deadline, bool if_free = false);
  // The socket watcher's callback: sends the deferred releases no request carried (unless a
  // writer holds the connection: its frame carries them).
  void SendDeferredReleases();
  Status Handshake(std::string_view client_name, std::string_view token, Deadline deadline);
  Status AttachArena(ArenaMapper* mapper, Deadline deadline);
  // Reads one small control response to `id` (HELLO, SHM_ATTACH) before the reader thread
  // runs: its header and a descriptor of at most `most` bytes; an ERROR is returned as the
  // node's Status. Descriptors passed with the bytes land in *passed when not null.
  Status ReadControlResponse(uint64_t id, protocol::Opcode opcode, uint32_t most, Deadline deadline,
                             protocol::FrameHeader* header, std::string* descriptor,
                             std::vector<net::Socket>* passed);
  // The socket watcher's callback: takes the reader role while no caller holds it (see the file
  // comment), reads what the socket holds without waiting, and asks to be called again.
  void OnWatch() override EXCLUDES(mu_);
  // Takes the reader role for the calling thread (mu_ held) when nobody reads, or only the
  // watcher, idle between frames.
  bool TakeReaderRole() REQUIRES(mu_);
  // Holding the reader role: reads responses until `call` is done or `deadline` passes, then
  // gives the role up. Returns Wait's result.
  Status ReadFor(const Ticket& call, Deadline deadline) EXCLUDES(mu_);
  // Holding the reader role: reads until `call` is done, `give_up` passes or the connection
  // ends (closed here on a read error). Keeps the role. `spin`: each wait for bytes polls
  // without sleeping for up to options_.busy_poll first.
  void ReadUntilDone(const Ticket& call, Deadline give_up, bool spin) EXCLUDES(mu_);
  // Holding the reader role: reads until the response in progress (frame_) is complete, or
  // until `give_up` passes (*paused; frame_ keeps how far it got, for the next holder). A
  // non-OK status ends the connection.
  Status Advance(Deadline give_up, bool* paused, bool spin = false) EXCLUDES(mu_);
  // The bytes frame_ waits for now, read as they come, until `give_up` passes (*paused).
  Status Fill(Deadline give_up, bool* paused, bool spin);
  // What frame_ does once the bytes it waited for are in: sets *complete at its end.
  Status Step(bool* complete) EXCLUDES(mu_);
  // Starts reading (or growing) frame_'s descriptor.
  Status NextDescriptorChunk();
  // Switches frame_ to discarding `n` bytes (the drain), within drain_max_bytes.
  Status DiscardRest(uint64_t n, std::string_view what);
  // Gives the reader role up (mu_ held), and wakes who should take it next: a waiting caller,
  // or the watcher (at once when a response is half read, after kReaderGrace otherwise); once
  // closed, fails what is pending.
  void ReleaseReader() REQUIRES(mu_);
  // Wakes whoever should take a free reader role (mu_ held).
  void HandOff() REQUIRES(mu_);
  void FailAllPending(const Status& reason) REQUIRES(mu_);
  // Settles a call whose response will not be used (Send failure, Wait timeout): kCompleted
  // when it completed first (its result stands), otherwise whether it was given up before its
  // response began or in the middle of it (the reader drains the rest). Either way the reader
  // touches neither its handler nor its buffers once Abandon returns.
  enum class Abandoned { kCompleted, kBeforeResponse, kMidResponse };
  Abandoned Abandon(const Ticket& ticket) EXCLUDES(mu_);
  // The pending call with request id `id`, or null (mu_ held).
  Ticket* FindPending(uint64_t id) REQUIRES(mu_);
  // Takes the call with request id `id` off pending_ (mu_ held); none: nothing happens.
  void ErasePending(uint64_t id) REQUIRES(mu_);
  // Makes `call` final with `result` and takes it off pending_.
  void Finish(Call& call, Status result) EXCLUDES(mu_);

  net::Stream stream_;
  const std::string peer_;
  const ConnectionOptions options_;
  protocol::Limits limits_;
  uint8_t version_ = protocol::kMinProtocolVersion;
  std::string server_name_;
  std::optional<std::string> default_namespace_;
  std::atomic<uint64_t> next_request_id_{1};
  std::atomic<bool> alive_{true};
  std::atomic<uint64_t> drained_{0};
  std::atomic<uint64_t> socket_reads_{0};

  std::shared_ptr<ArenaMapping> arena_;
  const uint64_t* lease_word_ = nullptr;  // in arena_'s lease words; null: none (version < 6)
  uint64_t lease_generation_ = 0;
  std::shared_mutex arena_writers_;  // see BeginArenaWrite
  std::unique_ptr<ArenaSession> arena_session_;

  std::timed_mutex write_mu_;     // one frame at a time
  std::vector<iovec> write_iov_;  // the frame being written (guarded by write_mu_), kept grown
  // ReleaseLease's lease ids, sent before the next frame; the list being sent and its encoded
  // frame are write_mu_'s. Taken after mu_ when both are held.
  Mutex deferred_mu_ ACQUIRED_AFTER(mu_);
  std::vector<uint64_t> deferred_releases_ GUARDED_BY(deferred_mu_);
  std::vector<uint64_t> sending_releases_;
  protocol::EncodedFrame release_frame_;

  // Guards pending_, close_reason_, the reader role and every Call's state (Call::done waits
  // on it).
  mutable WaitableMutex mu_;
  // The calls sent and not finished, in no order: a connection has a handful in flight, so a
  // vector searched by id beats a map and, once grown, allocates nothing per call.
  std::vector<Ticket> pending_ GUARDED_BY(mu_);
  Status close_reason_ GUARDED_BY(mu_);

  // The reader role (connection_reader.cc): who reads the socket now. Its state is reader_ and
  // watcher_idle_, both guarded by mu_; every move below is made with mu_ held, and whoever
  // holds the role alone touches frame_ (its hand-over happens under mu_).
  //
  //   state          reader_   watcher_idle_  who reads the socket
  //   free           kNone     false          nobody: a waiter was woken, or the watcher will be
  //   watcher-idle   kWatcher  true           nobody: the watcher's epoll waits for a first byte
  //   watcher        kWatcher  false          the watcher's thread, in OnWatch (or between its
  //                                           callbacks, armed, with a response half read)
  //   caller         kCaller   false          a caller in Wait (ReadFor) or Poll
  //
  //   from           event                                   by                      to
  //   (Open)         connection opened                       the opening thread      watcher-idle
  //   free           TakeReaderRole (Wait, Poll)             a caller                caller
  //   watcher-idle   TakeReaderRole, without telling it      a caller                caller
  //   free           callback, nobody waits, and a response  the watcher (OnWatch)   watcher
  //                  is half read or kReaderGrace passed
  //   free           callback while a caller waits, or too   the watcher (OnWatch)   free (it
  //                  soon (it asks again at the grace end)                            waits)
  //   watcher-idle   callback                                the watcher (OnWatch)   watcher
  //   watcher        the socket has nothing more; between    the watcher (OnWatch)   watcher-idle
  //                  responses
  //   watcher        the same with a response half read      the watcher (OnWatch)   watcher
  //   watcher        a caller waits, an error, or closed     the watcher (OnWatch:   free
  //                                                          ReleaseReader)
  //   caller         its call done, its deadline, or the     the caller              free
  //                  end of what Poll found                  (ReleaseReader)
  //   free or        Close                                   any thread              free, the
  //   watcher-idle                                                                   pending failed
  //   caller         callback                                the watcher             caller (no-op)
  //
  // Whoever makes the role free (ReleaseReader) hands it off (HandOff): it wakes the oldest
  // caller waiting in Wait, or else asks the watcher for a callback, at once when a response is
  // half read (frame_open_), after kReaderGrace otherwise. A closed connection's role, when
  // given up, fails every pending call (the holder of the role saw the socket end; Close fails
  // them itself when nobody held it). Only the holder may give the role up; only a caller may
  // take it from the watcher, and only while the watcher is idle.
  enum class Reader { kNone, kWatcher, kCaller };
  Reader reader_ GUARDED_BY(mu_) = Reader::kNone;
  // The watcher holds the role but waits (armed in epoll, not in a callback) for the first byte
  // of a response: a caller may take the role from it without telling it; its next callback
  // finds the role taken and does nothing.
  bool watcher_idle_ GUARDED_BY(mu_) = false;
  // A response is partly read (frame_): whoever takes the role next must finish it.
  bool frame_open_ GUARDED_BY(mu_) = false;
  MonotonicClock::time_point free_since_ GUARDED_BY(mu_){};  // when the role last became free
  std::vector<Call*> waiters_ GUARDED_BY(mu_);               // callers in Wait not holding the role

  // The response being read; touched only by the reader role's holder (handed over under mu_).
  struct Frame;
  std::unique_ptr<Frame> frame_;

  // The process's watcher; this connection is registered with it from Open to the destructor.
  std::shared_ptr<SocketWatcher> watcher_;
};

}  // namespace kvport::client
