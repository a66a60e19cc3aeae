// SPDX-License-Identifier: Apache-2.0
#include "server/resp_protocol.h"

#include <fmt/core.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cstring>

#include "kvport/log.h"
#include "server/cache_service.h"
#include "server/parting_error.h"
#include "server/request_deadline.h"
#include "server/resp_value_capture.h"

namespace kvport::server {

namespace {

// Commands run per readiness event (the bytes read are bounded by the connection): a fast
// client cannot hold its loop.
constexpr int kMaxCommandsPerEvent = 1024;
// The input buffer's first allocation, and what an idle session keeps of a larger one.
constexpr size_t kInitialBuffer = 16 << 10;
constexpr size_t kKeptBuffer = 64 << 10;
constexpr std::chrono::milliseconds kShrinkAfter{1000};

}  // namespace

RespProtocol::RespProtocol(StreamConnection& connection, net::EventLoop* loop)
    : conn_(connection), service_(connection.service()), loop_(loop), reply_(&connection.output()) {
  client_.id = conn_.id();
  client_.durability = conn_.mailbox();
}

RespProtocol::~RespProtocol() {
  if (shrink_timer_ != 0) loop_->CancelTimer(shrink_timer_);
}

void RespProtocol::Opened() {
  // An open node: every client holds the grant of everything at once, no AUTH needed.
  if (!service_.access().required()) {
    Status granted = client_.access.Authenticate(service_.access(), "");
    if (granted.ok()) conn_.Authenticated();
  }
}

protocol::RespLimits RespProtocol::Limits() const {
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

void RespProtocol::OnReadable() {
  socket_drained_ = false;
  for (int i = 0; i < 64 && conn_.open(); ++i) {
    if (!ServeBuffered()) break;  // complete commands wait: throttled or out of budget
    // A read that came back short emptied the socket: asking again would only say so.
    if (socket_drained_ || !WantsToRead() || !conn_.ReadBudgetLeft()) break;
    if (!ReadSome()) break;
  }
  if (conn_.closed()) return;
  ShrinkInputLater();
  if (conn_.open() && peer_closed_) {
    // Everything the peer sent is run; its replies go out, then the connection ends.
    ServeBuffered();
    conn_.Finish();
  }
  reply_.Commit();
}

void RespProtocol::ShrinkInputLater() {
  if (shrink_timer_ != 0 || CommandUnderWay() || in_capacity_ <= kKeptBuffer) return;
  shrink_timer_ = loop_->RunAfter(kShrinkAfter, [this] {
    shrink_timer_ = 0;
    if (CommandUnderWay()) {
      ShrinkInputLater();
      return;
    }
    in_.reset();
    in_capacity_ = 0;
    in_begin_ = in_end_ = 0;
    conn_.SyncMemory();
  });
}

bool RespProtocol::MakeInputRoom() {
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

bool RespProtocol::ReadSome() {
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
  Result<net::IoProgress> r = conn_.stream().ReadV(iov, count);
  socket_drained_ = r.ok() && r->bytes < wanted;
  if (!r.ok()) {
    conn_.Close(r.status().message());
    return false;
  }
  if (r->bytes > 0) {
    if (!CommandUnderWay()) conn_.BeginRequest();  // a command begins with its first byte
    conn_.Received(r->bytes);
    to_value = std::min<size_t>(to_value, r->bytes);
    if (to_value > 0) capture_->Filled(to_value);
    in_end_ += r->bytes - to_value;
  }
  conn_.SyncMemory();
  if (r->eof) {
    peer_closed_ = true;
    return false;
  }
  // Bytes read are served before the next read, even when the read ended in would_block (a TLS
  // read takes every record the socket holds, then says so).
  return r->bytes > 0;
}

bool RespProtocol::HeldBack() {
  // Replies gathered past a few KiB join the queue first, so that what the throttle weighs is
  // every reply of this connection (a pipeline of large MGETs would otherwise gather them all).
  if (reply_.text().size() >= kGatherBytes) reply_.Commit();
  if (conn_.QueueThrottle() == Throttle::kNone) return false;
  reply_.Commit();
  return true;
}

bool RespProtocol::ServeBuffered() {
  protocol::RespLimits limits = Limits();
  for (int n = 0; n < kMaxCommandsPerEvent; ++n) {
    if (!conn_.open() || client_.quit || waiting_for_disk_) return false;
    if (capture_ != nullptr) {
      // A captured value's command: its value first, then its last arguments.
      if (!capture_->complete()) {
        incomplete_ = true;
        return true;
      }
      if (HeldBack()) return false;
      if (!FinishCapture(limits)) return conn_.open();
      continue;
    }
    if (buffered() == 0 || buffered() < needed_) {
      incomplete_ = buffered() > 0;
      return true;
    }
    // Between commands: nothing more runs while the replies queued cost too much.
    if (HeldBack()) return false;
    std::string_view input(in_.get() + in_begin_, buffered());
    size_t consumed = 0;
    size_t needed = 0;
    protocol::RespPartialBulk partial;
    switch (protocol::ParseRespCommand(input, limits, &args_, &consumed, &needed, &parse_error_,
                                       &partial, &progress_)) {
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
        progress_.Clear();
        break;
    }
    if (WaitForDisk()) {
      reply_.Commit();  // what was gathered goes out meanwhile
      return false;
    }
    // A command pipelined behind an AUTH may be a large SET.
    if (RunCommand(nullptr)) limits = Limits();
    in_begin_ += consumed;
    AfterCommand();
    if (client_.quit) {
      conn_.Finish();
      return false;
    }
  }
  reply_.Commit();
  conn_.ScheduleRead();  // out of this event's budget: the rest runs at the loop's next turn
  return false;
}

bool RespProtocol::RunCommand(RespValueCapture* captured) {
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
  conn_.Authenticated();
  return true;
}

void RespProtocol::AfterCommand() {
  if (buffered() == 0) {
    in_begin_ = in_end_ = 0;
  } else {
    conn_.BeginRequest(buffered());  // what follows arrived with this event
  }
}

void RespProtocol::BeginCapture(const protocol::RespPartialBulk& partial) {
  // Once per command: a store that refused the first step is not asked again on every read.
  if (!authenticated() || capture_declined_) return;
  capture_ = RespValueCapture::Begin(service_, client_, args_, partial);
  args_.clear();
  if (capture_ != nullptr) progress_.Clear();  // the command's bytes move: the capture goes on
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

bool RespProtocol::FinishCapture(const protocol::RespLimits& limits) {
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
    conn_.Finish();
    return false;
  }
  return true;
}

void RespProtocol::Fail(std::string_view error_line) {
  log::Debug("RESP session {}: {}; closing", conn_.peer(), error_line);
  service_.counters().CountErrorResponse();
  service_.counters().client_errors().Warn(
      conn_.peer(), "closed RESP protocol error",
      fmt::format("RESP: {}; sent the error and closed the connection", error_line), conn_.now());
  protocol::RespWriter(&reply_.text(), client_.version).Error(error_line);
  reply_.Commit();
  in_begin_ = in_end_ = 0;
  capture_.reset();  // its reservation is aborted: nothing of it was visible
  progress_.Clear();
  incomplete_ = false;
  conn_.Finish();
}

bool RespProtocol::InputThrottled() const {
  return in_end_ == in_capacity_ && in_begin_ == 0 && in_capacity_ != 0 &&
         std::max(kInitialBuffer, in_capacity_ * 2) > InputAllowance();
}

bool RespProtocol::WantsToRead() const {
  if (peer_closed_ || client_.quit) return false;
  // A captured value's bytes go to its reservation, not the input buffer.
  if (capture_ != nullptr && !capture_->complete()) return true;
  // Complete commands wait to run: read nothing more until they have.
  if (buffered() > 0 && buffered() >= needed_) return false;
  if (InputThrottled()) return false;
  if (CommandUnderWay()) return true;  // finish the command under way
  return !conn_.shutting_down() && conn_.QueueThrottle() == Throttle::kNone;
}

bool RespProtocol::HasServableInput() const {
  return (capture_ == nullptr || capture_->complete()) && !client_.quit && !waiting_for_disk_ &&
         buffered() > 0 && buffered() >= needed_;
}

bool RespProtocol::WaitForDisk() {
  if (disk_ready_) {
    disk_ready_ = false;  // its keys were promoted: it runs now
    return false;
  }
  if (!service_.has_disk() || !authenticated()) return false;
  std::vector<std::string> keys = KeysItReads(service_, client_, args_);
  if (keys.empty()) return false;
  const std::vector<std::string_view> names(keys.begin(), keys.end());
  if (!service_.NeedsDisk(client_.access.grant(), client_.ns, false, names)) return false;
  waiting_for_disk_ = true;
  service_.PromoteInBackground(
      client_.access.shared_grant(), client_.ns, false, std::move(keys),
      [mailbox = conn_.mailbox(), this] { mailbox->Post([this] { DiskReady(); }); });
  return true;
}

void RespProtocol::DiskReady() {
  if (!waiting_for_disk_ || !conn_.open()) return;
  waiting_for_disk_ = false;
  disk_ready_ = true;
  args_.clear();
  conn_.ScheduleRead();  // the command is parsed again and run, then the ones behind it
}

ProtocolHandler::Throttle RespProtocol::Throttled() const {
  if (InputThrottled()) return Throttle::kNode;
  if (capture_ == nullptr && (buffered() == 0 || buffered() >= needed_) && !conn_.shutting_down()) {
    return conn_.QueueThrottle();
  }
  return Throttle::kNone;
}

void RespProtocol::Closed() {
  progress_.Clear();
  if (shrink_timer_ != 0) {
    loop_->CancelTimer(shrink_timer_);
    shrink_timer_ = 0;
  }
  capture_.reset();  // a value under way: its reservation is aborted
  reply_.text().clear();
  in_.reset();
  in_capacity_ = 0;
  in_begin_ = in_end_ = 0;
}

std::string RespProtocol::PartingError(const Status& status) const {
  return "-ERR " + status.message() + "\r\n";
}

void RespProtocol::FailRequest(const Status& status) {
  waiting_for_disk_ = false;
  Fail("ERR timeout: " + status.message());
}

}  // namespace kvport::server
