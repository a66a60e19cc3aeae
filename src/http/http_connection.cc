// SPDX-License-Identifier: Apache-2.0
#include "http/http_connection.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <utility>

namespace kvport::http {

HttpConnection::HttpConnection(net::EventLoop* loop, net::Socket socket, HttpConnectionOwner* owner,
                               HttpConnectionLimits limits)
    : loop_(loop), socket_(std::move(socket)), owner_(owner), limits_(limits) {}

HttpConnection::~HttpConnection() {
  CancelDeadline();
  if (socket_.valid() && watched_ != 0) loop_->Unwatch(socket_.fd());
}

Status HttpConnection::Start() {
  KVPORT_RETURN_IF_ERROR(loop_->Watch(socket_.fd(), EPOLLIN, this));
  watched_ = EPOLLIN;
  EnterReading();
  return Status::Ok();
}

void HttpConnection::OnEvents(uint32_t events) {
  switch (state_) {
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
  if (watched_ != 0) loop_->Unwatch(socket_.fd());
  watched_ = 0;
  socket_.Close();
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
  Result<net::IoProgress> read = net::ReadV(socket_.fd(), &iov, 1);
  input_.resize(old_size + (read.ok() ? read->bytes : 0));
  if (!read.ok() || read->eof) {
    Close();  // the peer left (a head cut short cannot be answered)
    return;
  }
  if (read->would_block) return;
  ServeBuffered();
}

void HttpConnection::ServeBuffered() {
  for (int served = 0; state_ == State::kReading; ++served) {
    const size_t end = FindRequestHeadEnd(input_, &scanned_);
    if (end == 0) {
      if (input_.size() >= kMaxRequestHeadBytes) {
        Refuse(431, "request head larger than 8 KiB");
      } else {
        WatchFor(EPOLLIN);
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
    std::string bytes =
        SerializeResponse(owner_->Respond(parse.head), keep_alive, parse.head.method == "HEAD");
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
    Result<net::IoProgress> wrote = net::WriteV(socket_.fd(), &iov, 1);
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
  WatchFor(EPOLLIN);
}

void HttpConnection::StartLingering() {
  state_ = State::kLingering;
  idle_since_ = MonotonicClock::now();
  input_ = std::string();
  scanned_ = 0;
  discarded_ = 0;
  ::shutdown(socket_.fd(), SHUT_WR);
  SetDeadline(kLingerTimeout);
  WatchFor(EPOLLIN);
}

void HttpConnection::Discard() {
  char scratch[16 * 1024];
  iovec iov{scratch, sizeof(scratch)};
  Result<net::IoProgress> read = net::ReadV(socket_.fd(), &iov, 1);
  if (!read.ok() || read->eof) {
    Close();
    return;
  }
  discarded_ += read->bytes;
  if (discarded_ > kLingerBytes) Close();
}

void HttpConnection::OnDeadline() {
  switch (state_) {
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
  ::setsockopt(socket_.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
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
  if (!loop_->Modify(socket_.fd(), events, this).ok()) {
    Close();
    return;
  }
  watched_ = events;
}

}  // namespace kvport::http
