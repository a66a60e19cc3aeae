// SPDX-License-Identifier: Apache-2.0
// Stream: a connected socket's bytes, plain or through TLS.
//
// Everything that reads or writes a connection (the node's sessions, its HTTP connections, the
// client's connections, the etcd client) goes through a Stream, so TLS is one branch here and
// nowhere else. A plain stream is the system calls of net/socket.h on its descriptor.
//
// Read-ahead (plain streams, EnableReadAhead; the node's sessions use it): a small call is a
// frame header, a descriptor and maybe a small value, and reading each into its own buffer was a
// system call each (and FIONREAD before the value, and a last readv that found nothing). With
// read-ahead every readv from the socket also offers a buffer of its own after the caller's, so
// one readv brings what the socket holds: the next reads are copies out of that buffer. A readv
// that filled the caller's buffers but not the read-ahead emptied the socket: reads then answer
// would_block without a system call until SocketReadable() says epoll reported it readable
// again. (One that did not fill the caller's buffers, a large value still streaming in, leaves
// the next read to ask the socket.) A stream holds its read-ahead buffer only while bytes are
// kept in it; emptied, the buffer goes back to a spare its thread's streams share, so an idle
// connection costs no read-ahead memory.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "kvport/status.h"
#include "net/socket.h"
#include "net/tls.h"

namespace kvport::net {

class Stream {
 public:
  Stream() = default;
  explicit Stream(Socket socket) : socket_(std::move(socket)) {}
  Stream(Stream&&) noexcept = default;
  Stream& operator=(Stream&&) noexcept = default;

  // Starts TLS on the socket (before any byte of the connection's protocol is exchanged).
  // The handshake then advances with Handshake(); reads and writes before it completes do
  // handshake steps too. `server_name`: see TlsContext::NewSession.
  Status StartTls(const TlsContext& context, std::string_view server_name);

  bool valid() const { return socket_.valid(); }
  int fd() const { return socket_.fd(); }
  Socket& socket() { return socket_; }
  // nullptr for a plain stream.
  TlsSession* tls() const { return tls_.get(); }

  // A plain stream: kNone. TLS: TlsSession::Handshake.
  Result<TlsWait> Handshake();

  // From now on each read from the socket asks for up to `bytes` more than the caller's buffers
  // take, kept for the next reads (see the file comment). The caller must call SocketReadable()
  // whenever epoll reports the socket readable. A TLS stream ignores it (TLS keeps its own).
  void EnableReadAhead(size_t bytes);
  // epoll reported the socket readable (or hung up): reads ask the socket again.
  void SocketReadable() { drained_ = false; }
  // Read system calls this plain stream made since the last call (TLS reads are OpenSSL's and
  // not counted).
  uint64_t TakeSocketReads() { return std::exchange(socket_reads_, 0); }

  // readv/writev with net/socket.h's meaning (ReadV, WriteV). With read-ahead, a read served
  // from the bytes kept returns only those (never also reading the socket).
  Result<IoProgress> ReadV(const iovec* iov, int count);
  Result<IoProgress> WriteV(const iovec* iov, int count);
  // What a read would find now (net::Readable): for TLS, the decrypted bytes held plus what the
  // socket holds (record framing included: at most a little more than a read will give). With
  // read-ahead: the bytes kept plus what the socket holds, except that when the bytes kept are
  // `wanted` or more, or the socket was drained, it answers from what is kept without asking the
  // socket (a small call's value is then known to be here with no FIONREAD; a large one's
  // reservation still grows by all that has arrived).
  Result<IoProgress> Readable(size_t wanted = SIZE_MAX);
  // Bytes a read will return that the socket (poll, epoll) does not report: decrypted bytes
  // TLS holds, or bytes read ahead. A reader waiting in poll must look here first.
  size_t buffered() const { return tls_ ? tls_->buffered() : ahead_end_ - ahead_begin_; }
  // The read-ahead buffer's bytes this stream holds now: its whole size while bytes are kept in
  // it, 0 otherwise (emptied, it went back to its thread's spare).
  size_t read_ahead_held() const { return ahead_ != nullptr ? ahead_capacity_ : 0; }
  // The SO_RCVLOWAT that wakes a reader needing `bytes` more: for TLS, less the most a record
  // already taken from the socket may hold (the bytes still to come can be fewer than
  // `bytes`), at least 1.
  size_t LowWaterFor(size_t bytes) const;

  // Ends the sending side: TLS close_notify, then shutdown(SHUT_WR).
  void ShutdownWrite();
  void Close();

 private:
  Result<IoProgress> ReadAhead(const iovec* iov, int count);

  // Declared first: destroyed after tls_, which borrows the descriptor.
  Socket socket_;
  std::unique_ptr<TlsSession> tls_;
  std::unique_ptr<uint8_t[]> ahead_;  // read-ahead: the bytes kept are [ahead_begin_, ahead_end_)
  size_t ahead_capacity_ = 0;
  size_t ahead_begin_ = 0;
  size_t ahead_end_ = 0;
  bool drained_ = false;  // the last read from the socket came back short
  uint64_t socket_reads_ = 0;
};

}  // namespace kvport::net
