// SPDX-License-Identifier: Apache-2.0
#include "net/stream.h"

#include <sys/socket.h>

#include <algorithm>

namespace kvport::net {

namespace {

// The most bytes of one TLS record that can sit in OpenSSL's buffer, taken from the socket but
// not yet readable (a record's header and ciphertext, 16 KiB of plaintext plus its overhead).
constexpr size_t kMaxRecordInFlight = 16 * 1024 + 512;

}  // namespace

Status Stream::StartTls(const TlsContext& context, std::string_view server_name) {
  KVPORT_ASSIGN_OR_RETURN(tls_, context.NewSession(socket_.fd(), server_name));
  return Status::Ok();
}

Result<TlsWait> Stream::Handshake() {
  if (!tls_) return TlsWait::kNone;
  return tls_->Handshake();
}

Result<IoProgress> Stream::ReadV(const iovec* iov, int count) {
  if (!tls_) return net::ReadV(socket_.fd(), iov, count);
  return tls_->Read(iov, count);
}

Result<IoProgress> Stream::WriteV(const iovec* iov, int count) {
  if (!tls_) return net::WriteV(socket_.fd(), iov, count);
  return tls_->Write(iov, count);
}

Result<IoProgress> Stream::Readable() {
  Result<IoProgress> in_socket = net::Readable(socket_.fd());
  if (!tls_ || !in_socket.ok()) return in_socket;
  const size_t held = tls_->buffered();
  if (held > 0) {
    IoProgress progress;
    progress.bytes = held + in_socket->bytes;
    return progress;
  }
  return in_socket;
}

size_t Stream::LowWaterFor(size_t bytes) const {
  if (!tls_) return std::max<size_t>(bytes, 1);
  return bytes > kMaxRecordInFlight ? bytes - kMaxRecordInFlight : 1;
}

void Stream::ShutdownWrite() {
  if (tls_) tls_->SendCloseNotify();
  ::shutdown(socket_.fd(), SHUT_WR);
}

void Stream::Close() {
  tls_.reset();
  socket_.Close();
}

}  // namespace kvport::net
