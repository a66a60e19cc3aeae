// SPDX-License-Identifier: Apache-2.0
#include "http/http_connection.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <utility>

#include "kvport/log.h"

namespace kvport::http {

HttpConnection::HttpConnection(net::EventLoop* loop, net::Socket socket,
                               std::shared_ptr<const net::TlsContext> tls,
                               HttpConnectionOwner* owner, HttpConnectionLimits limits)
    : loop_(loop),
      stream_(std::move(socket)),
      peer_(net::PeerAddress(stream_.fd())),
      tls_(std::move(tls)),
      owner_(owner),
      limits_(limits) {}

HttpConnection::~HttpConnection() {
  CancelDeadline();
  if (buffered_read_ != 0) loop_->CancelTimer(buffered_read_);
  if (stream_.valid() && watched_ != 0) loop_->Unwatch(stream_.fd());
}

Status HttpConnection::Start() {
  if (tls_ != nullptr) KVPORT_RETURN_IF_ERROR(stream_.StartTls(*tls_, ""));
  KVPORT_RETURN_IF_ERROR(loop_->Watch(stream_.fd(), EPOLLIN, this));
  watched_ = EPOLLIN;
  if (tls_ == nullptr) {
    EnterReading();
    return Status::Ok();
  }
  // The handshake and then the whole first head: within request_timeout of the accept.
  state_ = State::kHandshake;
  idle_since_ = MonotonicClock::now();
  SetDeadline(limits_.request_timeout);
  return Status::Ok();
}

void HttpConnection::OnEvents(uint32_t events) {
  switch (state_) {
    case State::kHandshake:
      AdvanceHandshake();
      break;
    case State::kReading:
      if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) {
        ReadInput();
      } else {
        ServeBuffered();  // EPOLLOUT: resuming pipelined requests after kMaxRequestsPerEvent
      }
      break;
    case State::kWriting:
      if (Flush() && state_ == State::kReading) ServeBuffered();
      break;
    case State::kLingering:
      Discard();
      break;
    case State::kClosed:
      break;  // an event fetched in the batch that closed it
  }
}

void HttpConnection::Close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  CancelDeadline();
  if (buffered_read_ != 0) loop_->CancelTimer(buffered_read_);
  buffered_read_ = 0;
  if (watched_ != 0) loop_->Unwatch(stream_.fd());
  watched_ = 0;
  stream_.Close();
  input_ = std::string();
  output_ = std::string();
  owner_->Closed(this);
}

void HttpConnection::Evict() {
  if (idle()) {
    Close();
  } else {
    Abort();
  }
}

void HttpConnection::AdvanceHandshake() {
  if (!first_byte_checked_) {
    Result<std::optional<bool>> opens_tls = net::FirstByteOpensTls(stream_.fd());
    if (!opens_tls.ok()) {
      Close();  // the peer left (or reset) before its first byte
      return;
    }
    if (!opens_tls->has_value()) return;  // nothing yet
    first_byte_checked_ = true;
    if (!**opens_tls) {
      RefuseCleartext();
      return;
    }
  }
  Result<net::TlsWait> step = stream_.Handshake();
  if (!step.ok()) {
    log::Debug("HTTP endpoint: TLS handshake with {} failed: {}", net::PeerName(stream_.fd()),
               step.status().ToString());
    Close();
    return;
  }
  switch (*step) {
    case net::TlsWait::kRead:
      WatchFor(EPOLLIN);
      return;
    case net::TlsWait::kWrite:
      WatchFor(EPOLLOUT);
      return;
    case net::TlsWait::kNone:
      break;
  }
  // The deadline set at Start runs on: the head must arrive within request_timeout of the
  // accept. It may already be in, behind the client's last handshake record.
  state_ = State::kReading;
  WatchFor(EPOLLIN);
  if (state_ == State::kReading) ReadInput();
}

void HttpConnection::RefuseCleartext() {
  // The answer goes in the clear, where the peer can read it (curl http://... to an HTTPS port).
  net::Socket socket = std::move(stream_.socket());
  stream_ = net::Stream(std::move(socket));
  state_ = State::kReading;
  Refuse(400, "this endpoint requires HTTPS: the node has TLS (tls_cert_file)");
}

void HttpConnection::ReadInput() {
  const size_t old_size = input_.size();
  const size_t room = kMaxRequestHeadBytes - old_size;
  if (room == 0) {
    // Only a hang-up can get here (a full buffer is a complete head or a 431): answer what is
    // buffered first; the hang-up shows again at the next read.
    ServeBuffered();
    return;
  }
  input_.resize(old_size + room);
  iovec iov{input_.data() + old_size, room};
  Result<net::IoProgress> read = stream_.ReadV(&iov, 1);
  input_.resize(old_size + (read.ok() ? read->bytes : 0));
  // TLS reads on past a request to the end of the stream in one call: the bytes read are
  // answered first, and the end shows again at the next read (the socket stays readable).
  if (!read.ok() || (read->eof && read->bytes == 0)) {
    Close();  // the peer left (a head cut short cannot be answered)
    return;
  }
  if (read->bytes == 0) return;  // would_block (TLS: a record not yet whole)
  ServeBuffered();
}

void HttpConnection::ServeBuffered() {
  for (int served = 0; state_ == State::kReading; ++served) {
    const size_t end = FindRequestHeadEnd(input_, &scanned_);
    if (end == 0) {
      if (input_.size() >= kMaxRequestHeadBytes) {
        Refuse(431, "request head larger than 8 KiB");
      } else {
        WaitForInput();
      }
      return;
    }
    if (served == kMaxRequestsPerEvent) {
      // Level-triggered: the writable socket reports at once, after the loop's other events.
      WatchFor(EPOLLOUT);
      return;
    }
    const HeadParse parse = ParseRequestHead(std::string_view(input_).substr(0, end));
    if (!parse.ok) {
      Refuse(parse.status, parse.reason);
      return;
    }
    const bool keep_alive = parse.head.keep_alive;
    std::string bytes = SerializeResponse(owner_->Respond(parse.head, peer_), keep_alive,
                                          parse.head.method == "HEAD");
    input_.erase(0, end);
    scanned_ = 0;
    Send(std::move(bytes), keep_alive);
  }
}

void HttpConnection::Refuse(int status, std::string_view reason) {
  Send(SerializeResponse(TextResponse(status, reason), /*keep_alive=*/false, /*head_only=*/false),
       /*keep_alive=*/false);
}

void HttpConnection::Send(std::string bytes, bool keep_alive) {
  CancelDeadline();
  state_ = State::kWriting;
  output_ = std::move(bytes);
  sent_ = 0;
  keep_alive_ = keep_alive;
  Flush();
}

bool HttpConnection::Flush() {
  while (sent_ < output_.size()) {
    iovec iov{output_.data() + sent_, output_.size() - sent_};
    Result<net::IoProgress> wrote = stream_.WriteV(&iov, 1);
    if (!wrote.ok()) {
      Close();
      return false;
    }
    if (wrote->would_block || wrote->bytes == 0) {
      if (deadline_ == 0) SetDeadline(limits_.write_timeout);
      WatchFor(EPOLLOUT);
      return false;
    }
    sent_ += wrote->bytes;
  }
  CancelDeadline();
  output_ = std::string();  // a page's memory is not kept while the connection waits
  sent_ = 0;
  if (keep_alive_) {
    EnterReading();
  } else {
    StartLingering();
  }
  return true;
}

void HttpConnection::EnterReading() {
  state_ = State::kReading;
  idle_since_ = MonotonicClock::now();
  SetDeadline(limits_.request_timeout);
  WaitForInput();
}

void HttpConnection::StartLingering() {
  state_ = State::kLingering;
  idle_since_ = MonotonicClock::now();
  input_ = std::string();
  scanned_ = 0;
  discarded_ = 0;
  stream_.ShutdownWrite();  // TLS: close_notify first
  SetDeadline(kLingerTimeout);
  WatchFor(EPOLLIN);
}

void HttpConnection::Discard() {
  char scratch[16 * 1024];
  iovec iov{scratch, sizeof(scratch)};
  Result<net::IoProgress> read = stream_.ReadV(&iov, 1);
  if (!read.ok() || (read->eof && read->bytes == 0)) {
    Close();
    return;
  }
  discarded_ += read->bytes;
  if (discarded_ > kLingerBytes) {
    Close();
    return;
  }
  if (stream_.buffered() > 0) ScheduleBufferedRead();
}

void HttpConnection::OnDeadline() {
  switch (state_) {
    case State::kHandshake:
      Close();  // no request was made: nothing to answer
      break;
    case State::kReading:
      if (input_.empty()) {
        Close();  // idle: nothing to answer
      } else {
        Refuse(408, "request head not received in time");
      }
      break;
    case State::kWriting:
      Abort();
      break;
    case State::kLingering:
      Close();
      break;
    case State::kClosed:
      break;
  }
}

void HttpConnection::Abort() {
  if (state_ == State::kClosed) return;
  const linger reset{1, 0};
  ::setsockopt(stream_.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  Close();
}

void HttpConnection::SetDeadline(std::chrono::milliseconds delay) {
  CancelDeadline();
  deadline_ = loop_->RunAfter(delay, [this] {
    deadline_ = 0;
    OnDeadline();
  });
}

void HttpConnection::CancelDeadline() {
  if (deadline_ == 0) return;
  loop_->CancelTimer(deadline_);
  deadline_ = 0;
}

void HttpConnection::WatchFor(uint32_t events) {
  if (events == watched_ || state_ == State::kClosed) return;
  if (!loop_->Modify(stream_.fd(), events, this).ok()) {
    Close();
    return;
  }
  watched_ = events;
}

void HttpConnection::WaitForInput() {
  WatchFor(EPOLLIN);
  if (state_ != State::kClosed && stream_.buffered() > 0) ScheduleBufferedRead();
}

void HttpConnection::ScheduleBufferedRead() {
  if (buffered_read_ != 0) return;
  buffered_read_ = loop_->RunAfter(std::chrono::milliseconds(0), [this] {
    buffered_read_ = 0;
    // As if epoll had reported the bytes TLS holds (kWriting: Flush, which finds its state).
    OnEvents(EPOLLIN);
  });
}

}  // namespace kvport::http
