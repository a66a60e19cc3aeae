// SPDX-License-Identifier: Apache-2.0
#include "server/resp_session.h"

#include <fmt/core.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cstring>

#include "kvport/log.h"
#include "server/parting_error.h"
#include "server/request_deadline.h"
#include "server/resp_value_capture.h"

namespace kvport::server {

namespace {

// Per readiness event, as in Session: a fast client cannot hold its loop.
constexpr size_t kMaxBytesPerEvent = 4 << 20;
constexpr int kMaxCommandsPerEvent = 1024;
// The input buffer's first allocation, and what an idle session keeps of a larger one.
constexpr size_t kInitialBuffer = 16 << 10;
constexpr size_t kKeptBuffer = 64 << 10;
constexpr std::chrono::milliseconds kResumeCheck{10};
constexpr std::chrono::milliseconds kShrinkAfter{1000};

}  // namespace

RespSession::RespSession(net::EventLoop* loop, net::Socket socket, uint64_t id,
                         CacheService& service, const SessionOptions& options,
                         std::function<void(Connection*)> on_closed)
    : loop_(loop),
      stream_(std::move(socket)),
      service_(service),
      options_(options),
      on_closed_(std::move(on_closed)),
      peer_(net::PeerName(stream_.fd())),
      budget_(service.counters(), options_),
      last_activity_(loop->Now()),
      accepted_at_(loop->Now()),
      reply_(&out_) {
  client_.id = id;
}

RespSession::~RespSession() {
  if (phase_ != Phase::kClosed) {
    on_closed_ = nullptr;
    Close("server stopped");
  }
}

Status RespSession::Start() {
  // An open node: every client holds the grant of everything at once, no AUTH needed.
  if (!service_.access().required()) {
    Status granted = client_.access.Authenticate(service_.access(), "");
    if (granted.ok()) LeaveUnauthenticated();
  }
  interest_ = EPOLLIN;
  Status watched = loop_->Watch(stream_.fd(), interest_, this);
  if (!watched.ok()) Close("cannot watch the socket: " + watched.ToString());
  return watched;
}

protocol::RespLimits RespSession::Limits() const {
  const protocol::Limits& node = service_.limits();
  protocol::RespLimits limits;
  // An MSET of max_batch_keys pairs, its name, and a few options.
  limits.max_args = node.max_batch_keys * 2 + 8;
  limits.max_bulk_bytes = node.max_value_bytes;
  limits.max_command_bytes = node.max_frame_bytes + node.max_value_bytes;
  if (!authenticated()) {
    limits.max_command_bytes = kMaxUnauthenticatedCommandBytes;
    limits.max_inline_bytes = kMaxUnauthenticatedCommandBytes;
    limits.max_bulk_bytes =
        std::min<uint64_t>(limits.max_bulk_bytes, kMaxUnauthenticatedCommandBytes);
  }
  return limits;
}

void RespSession::OnEvents(uint32_t events) {
  if (closed()) return;
  if (events & EPOLLERR) {
    Close("socket error");
    return;
  }
  if (events & EPOLLOUT) Flush();
  if (closed()) return;
  if (events & (EPOLLIN | EPOLLHUP)) OnReadable();
  if (closed()) return;
  if ((events & EPOLLHUP) && !(interest_ & EPOLLIN) && out_.empty()) Close("peer hung up");
}

void RespSession::OnReadable() {
  if (phase_ == Phase::kLinger) {
    DiscardInput();
    return;
  }
  event_read_bytes_ = 0;
  socket_drained_ = false;
  for (int i = 0; i < 64 && phase_ == Phase::kServing; ++i) {
    if (!ServeBuffered()) break;  // complete commands wait: throttled or out of budget
    // A read that came back short emptied the socket: asking again would only say so.
    if (socket_drained_ || !WantsToRead() || event_read_bytes_ >= kMaxBytesPerEvent) break;
    if (!ReadSome()) break;
  }
  ShrinkInputLater();
  if (phase_ == Phase::kServing && peer_closed_) {
    // Everything the peer sent is run; its replies go out, then the session closes.
    ServeBuffered();
    phase_ = Phase::kClosing;
  }
  reply_.Commit();
  Flush();
}

void RespSession::ShrinkInputLater() {
  if (shrink_timer_ != 0 || CommandUnderWay() || in_capacity_ <= kKeptBuffer) return;
  shrink_timer_ = loop_->RunAfter(kShrinkAfter, [this] {
    shrink_timer_ = 0;
    if (closed()) return;
    if (CommandUnderWay()) {
      ShrinkInputLater();
      return;
    }
    in_.reset();
    in_capacity_ = 0;
    in_begin_ = in_end_ = 0;
    SyncMemory();
  });
}

bool RespSession::MakeInputRoom() {
  if (in_end_ < in_capacity_) return true;
  if (in_begin_ > 0) {
    std::memmove(in_.get(), in_.get() + in_begin_, buffered());
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  if (in_end_ < in_capacity_) return true;
  // Grows with bytes that arrived (doubling), never to a length a command announced.
  const size_t grown = std::max(kInitialBuffer, in_capacity_ * 2);
  if (grown > InputAllowance() && in_capacity_ != 0) return false;  // the node's input cap
  std::unique_ptr<char[]> bigger(new char[grown]);
  if (in_end_ > 0) std::memcpy(bigger.get(), in_.get(), in_end_);
  in_ = std::move(bigger);
  in_capacity_ = grown;
  return true;
}

bool RespSession::ReadSome() {
  // A captured value's bytes go to its reservation; once the room there holds all the value
  // still misses, what follows it (its command's last arguments, the next commands) goes to the
  // input buffer in the same read.
  iovec iov[2];
  int count = 0;
  size_t to_value = 0;
  if (capture_ != nullptr && !capture_->complete()) {
    const std::span<char> room = capture_->Room();
    to_value = room.size();
    iov[count++] = iovec{room.data(), room.size()};
  }
  // Short of the value's last byte, the bytes after the room are value too.
  const bool past_value = capture_ == nullptr || to_value >= capture_->missing();
  if (past_value && MakeInputRoom()) {
    iov[count++] = iovec{in_.get() + in_end_, in_capacity_ - in_end_};
  }
  if (count == 0) return false;
  size_t wanted = 0;
  for (int i = 0; i < count; ++i)
    wanted += iov[i].iov_len;
  Result<net::IoProgress> r = stream_.ReadV(iov, count);
  socket_drained_ = r.ok() && r->bytes < wanted;
  if (!r.ok()) {
    Close(r.status().message());
    return false;
  }
  if (r->bytes > 0) {
    Touch();
    service_.counters().AddBytesReceived(r->bytes);
    if (!CommandUnderWay()) {
      request_arrival_ = loop_->Now();  // a command begins with its first byte
      request_bytes_ = 0;
    }
    request_bytes_ += r->bytes;
    event_read_bytes_ += r->bytes;
    to_value = std::min<size_t>(to_value, r->bytes);
    if (to_value > 0) capture_->Filled(to_value);
    in_end_ += r->bytes - to_value;
  }
  SyncMemory();
  if (r->eof) {
    peer_closed_ = true;
    return false;
  }
  return r->bytes > 0 && !r->would_block;
}

bool RespSession::ServeBuffered() {
  protocol::RespLimits limits = Limits();
  for (int n = 0; n < kMaxCommandsPerEvent; ++n) {
    if (phase_ != Phase::kServing || client_.quit) return false;
    if (capture_ != nullptr) {
      // A captured value's command: its value first, then its last arguments.
      if (!capture_->complete()) {
        incomplete_ = true;
        return true;
      }
      if (QueueThrottle() != Throttle::kNone) {
        reply_.Commit();
        return false;
      }
      if (!FinishCapture(limits)) return phase_ == Phase::kServing;
      continue;
    }
    if (buffered() == 0 || buffered() < needed_) {
      incomplete_ = buffered() > 0;
      return true;
    }
    // Between commands: nothing more runs while the replies queued cost too much.
    if (QueueThrottle() != Throttle::kNone) {
      reply_.Commit();
      return false;
    }
    std::string_view input(in_.get() + in_begin_, buffered());
    size_t consumed = 0;
    size_t needed = 0;
    protocol::RespPartialBulk partial;
    switch (protocol::ParseRespCommand(input, limits, &args_, &consumed, &needed, &parse_error_,
                                       &partial)) {
      case protocol::RespParse::kIncomplete:
        needed_ = needed;
        incomplete_ = true;
        if (partial.length >= RespValueCapture::kMinBytes) BeginCapture(partial);
        return true;
      case protocol::RespParse::kError:
        if (!authenticated() && service_.access().required() &&
            parse_error_.find("over") != std::string::npos) {
          parse_error_ += " (before AUTH a command is at most " +
                          std::to_string(kMaxUnauthenticatedCommandBytes) + " bytes)";
        }
        Fail("ERR " + parse_error_);
        return false;
      case protocol::RespParse::kComplete:
        break;
    }
    // A command pipelined behind an AUTH may be a large SET.
    if (RunCommand(nullptr)) limits = Limits();
    in_begin_ += consumed;
    AfterCommand();
    if (client_.quit) {
      phase_ = Phase::kClosing;
      return false;
    }
  }
  reply_.Commit();
  ScheduleServe();  // out of this event's budget: the rest runs at the loop's next turn
  return false;
}

bool RespSession::RunCommand(RespValueCapture* captured) {
  needed_ = 1;
  incomplete_ = false;
  capture_declined_ = false;
  const bool was_authenticated = authenticated();
  bool error = true;
  if (captured != nullptr && !captured->status().ok()) {
    // The store refused a step of its value while it arrived: the command cannot write it.
    protocol::RespWriter writer(&reply_.text(), client_.version);
    ReplyStatus(writer, captured->status());
  } else {
    error = RunRespCommand(service_, client_, args_, reply_, captured);
  }
  if (error) service_.counters().CountErrorResponse();
  args_.clear();
  if (was_authenticated || !authenticated()) return false;
  LeaveUnauthenticated();
  return true;
}

void RespSession::AfterCommand() {
  if (buffered() == 0) {
    in_begin_ = in_end_ = 0;
  } else {
    request_arrival_ = loop_->Now();  // what follows arrived with this event
    request_bytes_ = buffered();
  }
}

void RespSession::BeginCapture(const protocol::RespPartialBulk& partial) {
  // Once per command: a store that refused the first step is not asked again on every read.
  if (!authenticated() || capture_declined_) return;
  capture_ = RespValueCapture::Begin(service_, client_, args_, partial);
  args_.clear();
  if (capture_ == nullptr) {
    capture_declined_ = true;
    return;
  }
  // The value's bytes already here go to the reservation; the input buffer keeps what follows
  // them (at most part of the value's CRLF: the command was incomplete).
  const char* here = in_.get() + in_begin_ + partial.data_pos;
  const size_t value_bytes =
      std::min<uint64_t>(in_end_ - (in_begin_ + partial.data_pos), partial.length);
  for (size_t copied = 0; copied < value_bytes;) {
    const std::span<char> room = capture_->Room();
    const size_t n = std::min(room.size(), value_bytes - copied);
    std::memcpy(room.data(), here + copied, n);
    capture_->Filled(n);
    copied += n;
  }
  const size_t rest = in_end_ - (in_begin_ + partial.data_pos) - value_bytes;
  std::memmove(in_.get(), here + value_bytes, rest);
  in_begin_ = 0;
  in_end_ = rest;
  needed_ = 1;
}

bool RespSession::FinishCapture(const protocol::RespLimits& limits) {
  std::string_view input(in_.get() + in_begin_, buffered());
  if (input.size() < 2) {
    needed_ = 2;
    incomplete_ = true;
    return false;
  }
  if (input[0] != '\r' || input[1] != '\n') {
    Fail("ERR Protocol error: a bulk string not followed by CRLF");
    return false;
  }
  std::vector<std::string_view> tail;
  size_t consumed = 0;
  size_t needed = 0;
  switch (protocol::ParseRespBulks(input.substr(2), capture_->arguments_after(),
                                   capture_->bytes_through_value() + 2, limits, &tail, &consumed,
                                   &needed, &parse_error_)) {
    case protocol::RespParse::kIncomplete:
      needed_ = needed + 2;
      incomplete_ = true;
      return false;
    case protocol::RespParse::kError:
      Fail("ERR " + parse_error_);
      return false;
    case protocol::RespParse::kComplete:
      break;
  }
  // The capture ends with its command: a value the command did not write is aborted with it.
  const std::unique_ptr<RespValueCapture> capture = std::move(capture_);
  capture->Arguments(tail, &args_);
  RunCommand(capture.get());
  in_begin_ += 2 + consumed;
  AfterCommand();
  if (client_.quit) {
    phase_ = Phase::kClosing;
    return false;
  }
  return true;
}

void RespSession::ScheduleServe() {
  if (serve_timer_ != 0) return;
  serve_timer_ = loop_->RunAfter(std::chrono::milliseconds(0), [this] {
    serve_timer_ = 0;
    if (!closed()) OnReadable();
  });
}

void RespSession::Fail(std::string_view error_line) {
  log::Debug("RESP session {}: {}; closing", peer_, error_line);
  service_.counters().CountErrorResponse();
  service_.counters().client_errors().Warn(
      peer_, "closed RESP protocol error",
      fmt::format("RESP: {}; sent the error and closed the connection", error_line), loop_->Now());
  protocol::RespWriter(&reply_.text(), client_.version).Error(error_line);
  reply_.Commit();
  in_begin_ = in_end_ = 0;
  capture_.reset();  // its reservation is aborted: nothing of it was visible
  incomplete_ = false;
  phase_ = Phase::kClosing;
}

void RespSession::Flush() {
  if (closed()) return;
  SyncMemory();
  if (!out_.empty()) {
    Result<net::IoProgress> r = out_.WriteTo(stream_, kMaxBytesPerEvent);
    if (!r.ok()) {
      Close(r.status().message());
      return;
    }
    if (r->bytes > 0) {
      Touch();
      service_.counters().AddBytesSent(r->bytes);
    }
  }
  SyncMemory();
  if (out_.empty()) AfterOutputDrained();
  if (closed()) return;
  UpdateInterest();
  // Replies drained below the caps: commands already buffered run without a new byte.
  if (phase_ == Phase::kServing && buffered() >= needed_ && buffered() > 0 &&
      QueueThrottle() == Throttle::kNone) {
    ScheduleServe();
  }
}

void RespSession::AfterOutputDrained() {
  if (phase_ == Phase::kClosing) {
    HalfCloseAndLinger();
  } else if (shutting_down_ && !CommandUnderWay()) {
    HalfCloseAndLinger();
  }
}

void RespSession::HalfCloseAndLinger() {
  stream_.ShutdownWrite();
  phase_ = Phase::kLinger;
  linger_timer_ = loop_->RunAfter(options_.linger, [this] {
    linger_timer_ = 0;
    Close("peer did not close after our half-close");
  });
  UpdateInterest();
}

void RespSession::DiscardInput() {
  if (!DiscardLingeringInput(stream_)) Close("closed after half-close");
}

void RespSession::BeginShutdown() {
  if (closed() || shutting_down_) return;
  shutting_down_ = true;
  if (!CommandUnderWay() && out_.empty()) {
    Close("server stopping");
    return;
  }
  UpdateInterest();
}

bool RespSession::InputThrottled() const {
  return in_end_ == in_capacity_ && in_begin_ == 0 && in_capacity_ != 0 &&
         std::max(kInitialBuffer, in_capacity_ * 2) > InputAllowance();
}

bool RespSession::WantsToRead() const {
  if (phase_ != Phase::kServing || peer_closed_ || client_.quit) return false;
  // A captured value's bytes go to its reservation, not the input buffer.
  if (capture_ != nullptr && !capture_->complete()) return true;
  // Complete commands wait to run: read nothing more until they have.
  if (buffered() > 0 && buffered() >= needed_) return false;
  if (InputThrottled()) return false;
  if (CommandUnderWay()) return true;  // finish the command under way
  return !shutting_down_ && QueueThrottle() == Throttle::kNone;
}

void RespSession::UpdateInterest() {
  if (closed()) return;
  uint32_t want = 0;
  if (phase_ == Phase::kLinger || WantsToRead()) want |= EPOLLIN;
  if (!out_.empty()) want |= EPOLLOUT;
  WatchThrottle();
  if (want == interest_) return;
  Status modified = loop_->Modify(stream_.fd(), want, this);
  if (!modified.ok()) {
    Close("cannot update epoll interest: " + modified.ToString());
    return;
  }
  interest_ = want;
}

void RespSession::WatchThrottle() {
  const Throttle throttle =
      phase_ != Phase::kServing ? Throttle::kNone
      : InputThrottled()        ? Throttle::kNode
      : capture_ == nullptr && (buffered() == 0 || buffered() >= needed_) && !shutting_down_
          ? QueueThrottle()
          : Throttle::kNone;
  budget_.SetPaused(throttle != Throttle::kNone);
  // Over the node's caps other connections must drain, which no event of ours tells.
  if (throttle == Throttle::kNode && resume_timer_ == 0) {
    resume_timer_ = loop_->RunAfter(kResumeCheck, [this] {
      resume_timer_ = 0;
      if (closed()) return;
      UpdateInterest();
      if (WantsToRead() || (buffered() > 0 && buffered() >= needed_)) ScheduleServe();
    });
  } else if (throttle != Throttle::kNode && resume_timer_ != 0) {
    loop_->CancelTimer(resume_timer_);
    resume_timer_ = 0;
  }
}

void RespSession::Close(std::string_view reason) {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  for (net::TimerId* timer : {&linger_timer_, &resume_timer_, &serve_timer_, &shrink_timer_}) {
    if (*timer != 0) {
      loop_->CancelTimer(*timer);
      *timer = 0;
    }
  }
  loop_->Unwatch(stream_.fd());
  out_.Clear();      // pins of unsent values are released
  capture_.reset();  // a value under way: its reservation is aborted
  reply_.text().clear();
  in_.reset();
  in_capacity_ = 0;
  in_begin_ = in_end_ = 0;
  budget_.Release();
  if (!authenticated()) LeaveUnauthenticated();
  service_.SessionEnded(client_.id);  // its SCAN cursors
  service_.counters().ConnectionClosed();
  stream_.Close();
  log::Debug("RESP session {} closed: {}", peer_, reason);
  if (on_closed_) on_closed_(this);
}

void RespSession::SyncMemory() {
  budget_.Sync(out_.heap_bytes() + reply_.text().capacity(), in_capacity_);
}

void RespSession::LeaveUnauthenticated() {
  if (options_.unauthenticated != nullptr && options_.unauthenticated->Remove(client_.id)) {
    service_.counters().AddUnauthenticated(-1);
  }
}

bool RespSession::HelloOverdue(MonotonicClock::time_point now) const {
  return options_.hello_timeout.count() > 0 && !authenticated() && !closed() &&
         now - accepted_at_ > options_.hello_timeout;
}

void RespSession::CloseWithError(const Status& status) {
  if (closed()) return;
  if (out_.empty()) SendPartingBytes(stream_, "-ERR " + status.message() + "\r\n");
  Close(status.message());
}

bool RespSession::RequestOverdue(MonotonicClock::time_point now) const {
  if (options_.request_timeout.count() <= 0 || phase_ != Phase::kServing || !incomplete_ ||
      !CommandUnderWay()) {
    return false;
  }
  return now - request_arrival_ >
         AllowedTime(options_.request_timeout, options_.min_request_bytes_per_sec, request_bytes_);
}

void RespSession::AbortOverdueRequest() {
  if (closed() || phase_ != Phase::kServing) return;
  service_.counters().CountRequestTimeout();
  Fail(fmt::format(
      "ERR timeout: the command did not arrive within the node's request deadline ({} bytes "
      "in {} ms; request_timeout {} ms, min_request_bytes_per_sec {})",
      request_bytes_,
      std::chrono::duration_cast<std::chrono::milliseconds>(loop_->Now() - request_arrival_)
          .count(),
      options_.request_timeout.count(), options_.min_request_bytes_per_sec));
  Flush();
}

}  // namespace kvport::server
