// SPDX-License-Identifier: Apache-2.0
#include "net/stream.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

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

namespace {

// The read-ahead buffer a thread's streams take turns with: a stream holds one only while it
// keeps bytes in it (file comment), so a thread serving thousands of idle connections holds one
// buffer, not one per connection, and taking it back allocates nothing.
thread_local std::unique_ptr<uint8_t[]> spare_ahead;
thread_local size_t spare_ahead_capacity = 0;

std::unique_ptr<uint8_t[]> TakeAheadBuffer(size_t capacity) {
  if (spare_ahead != nullptr && spare_ahead_capacity == capacity) return std::move(spare_ahead);
  return std::make_unique_for_overwrite<uint8_t[]>(capacity);
}

void GiveBackAheadBuffer(std::unique_ptr<uint8_t[]> buffer, size_t capacity) {
  spare_ahead = std::move(buffer);
  spare_ahead_capacity = capacity;
}

}  // namespace

void Stream::EnableReadAhead(size_t bytes) {
  if (tls_ || bytes == 0) return;
  ahead_capacity_ = bytes;
  ahead_begin_ = ahead_end_ = 0;
}

Result<IoProgress> Stream::ReadV(const iovec* iov, int count) {
  if (tls_) return tls_->Read(iov, count);
  if (ahead_capacity_ == 0) {
    ++socket_reads_;
    return net::ReadV(socket_.fd(), iov, count);
  }
  return ReadAhead(iov, count);
}

Result<IoProgress> Stream::ReadAhead(const iovec* iov, int count) {
  IoProgress progress;
  if (ahead_end_ > ahead_begin_) {  // what was read ahead, and nothing more
    for (int i = 0; i < count && ahead_end_ > ahead_begin_; ++i) {
      const size_t n = std::min(iov[i].iov_len, ahead_end_ - ahead_begin_);
      std::memcpy(iov[i].iov_base, ahead_.get() + ahead_begin_, n);
      ahead_begin_ += n;
      progress.bytes += n;
    }
    if (ahead_begin_ == ahead_end_) {
      ahead_begin_ = ahead_end_ = 0;
      GiveBackAheadBuffer(std::move(ahead_), ahead_capacity_);
    }
    return progress;
  }
  if (drained_) {
    progress.would_block = true;
    return progress;
  }
  constexpr int kMaxIovecs = 64;
  ++socket_reads_;
  if (count >= kMaxIovecs) return net::ReadV(socket_.fd(), iov, count);
  iovec with_ahead[kMaxIovecs + 1];
  size_t asked = 0;
  for (int i = 0; i < count; ++i) {
    with_ahead[i] = iov[i];
    asked += iov[i].iov_len;
  }
  ahead_ = TakeAheadBuffer(ahead_capacity_);
  with_ahead[count] = iovec{ahead_.get(), ahead_capacity_};
  Result<IoProgress> read = net::ReadV(socket_.fd(), with_ahead, count + 1);
  if (!read.ok() || read->bytes <= asked) GiveBackAheadBuffer(std::move(ahead_), ahead_capacity_);
  KVPORT_ASSIGN_OR_RETURN(progress, std::move(read));
  // The caller's buffers filled and the read-ahead not: the socket held no more than this.
  // (Short of the caller's own buffers is a large payload still streaming in: the next read asks
  // the socket again, as a plain stream's would; waiting for epoll there cost a quarter of a
  // 4 MiB x16 MSET's rate.)
  if (progress.bytes >= asked && progress.bytes < asked + ahead_capacity_) drained_ = true;
  if (progress.bytes > asked) {
    ahead_end_ = progress.bytes - asked;
    progress.bytes = asked;
  }
  return progress;
}

Result<IoProgress> Stream::WriteV(const iovec* iov, int count) {
  if (!tls_) return net::WriteV(socket_.fd(), iov, count);
  return tls_->Write(iov, count);
}

Result<IoProgress> Stream::Readable(size_t wanted) {
  if (ahead_capacity_ != 0) {
    const size_t kept = ahead_end_ - ahead_begin_;
    if (kept >= wanted || drained_) {
      IoProgress progress;
      progress.bytes = kept;
      progress.would_block = kept == 0;
      return progress;
    }
    Result<IoProgress> in_socket = net::Readable(socket_.fd());
    if (!in_socket.ok() || kept == 0) return in_socket;
    IoProgress progress;
    progress.bytes = kept + in_socket->bytes;
    return progress;
  }
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
  ahead_begin_ = ahead_end_ = 0;
}

}  // namespace kvport::net
