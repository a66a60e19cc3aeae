// SPDX-License-Identifier: Apache-2.0
// Stream: a connected socket's bytes, plain or through TLS.
//
// Everything that reads or writes a connection (the node's sessions, its HTTP connections, the
// client's connections, the etcd client) goes through a Stream, so TLS is one branch here and
// nowhere else. A plain stream is the system calls of net/socket.h on its descriptor.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <memory>

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

  // readv/writev with net/socket.h's meaning (ReadV, WriteV).
  Result<IoProgress> ReadV(const iovec* iov, int count);
  Result<IoProgress> WriteV(const iovec* iov, int count);
  // What a read would find now (net::Readable): for TLS, the decrypted bytes held plus what the
  // socket holds (record framing included: at most a little more than a read will give).
  Result<IoProgress> Readable();
  // Bytes a read will return that the socket (poll, epoll) does not report: decrypted bytes
  // TLS holds. A reader waiting in poll must look here first.
  size_t buffered() const { return tls_ ? tls_->buffered() : 0; }
  // The SO_RCVLOWAT that wakes a reader needing `bytes` more: for TLS, less the most a record
  // already taken from the socket may hold (the bytes still to come can be fewer than
  // `bytes`), at least 1.
  size_t LowWaterFor(size_t bytes) const;

  // Ends the sending side: TLS close_notify, then shutdown(SHUT_WR).
  void ShutdownWrite();
  void Close();

 private:
  // Declared first: destroyed after tls_, which borrows the descriptor.
  Socket socket_;
  std::unique_ptr<TlsSession> tls_;
};

}  // namespace kvport::net
