// SPDX-License-Identifier: Apache-2.0
#include "cluster/etcd_http.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "net/connect.h"

namespace kvport::cluster {
namespace {

// The most bytes of a response head (status line and headers) kept: the gateway's are a few
// hundred bytes.
constexpr size_t kMaxHeadBytes = 64 * 1024;
// The most bytes of one chunk-size line or trailer line.
constexpr size_t kMaxLineBytes = 4096;
constexpr size_t kReadStep = 64 * 1024;

// TCP keepalive of a watch stream: a peer (or a path to it) that vanished without closing the
// connection is found after kKeepIdle of silence plus kKeepCount unanswered probes kKeepInterval
// apart, about 16 s. Probes are empty segments: a quiet watch costs one every few seconds.
constexpr int kKeepIdleSeconds = 10;
constexpr int kKeepIntervalSeconds = 2;
constexpr int kKeepCount = 3;

int PollTimeoutMs(EtcdClock::time_point deadline) {
  const auto now = EtcdClock::now();
  if (deadline <= now) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<int64_t>(ms, 60'000));
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

bool ContainsNoCase(std::string_view haystack, std::string_view needle) {
  if (needle.size() > haystack.size()) return false;
  for (size_t i = 0; i + needle.size() <= haystack.size(); ++i) {
    if (EqualsNoCase(haystack.substr(i, needle.size()), needle)) return true;
  }
  return false;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
    text.remove_suffix(1);
  return text;
}

void SetKeepAlive(int fd) {
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepIdleSeconds, sizeof(kKeepIdleSeconds));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepIntervalSeconds, sizeof(kKeepIntervalSeconds));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepCount, sizeof(kKeepCount));
}

}  // namespace

Result<std::unique_ptr<EtcdHttpConnection>> EtcdHttpConnection::Connect(
    const net::HostPort& endpoint, const net::TlsContext* tls, EtcdClock::time_point deadline,
    int cancel_fd, bool keepalive) {
  KVPORT_ASSIGN_OR_RETURN(net::Socket connected, net::ConnectTcp(endpoint, deadline, cancel_fd));
  if (keepalive) SetKeepAlive(connected.fd());

  std::unique_ptr<EtcdHttpConnection> connection(
      new EtcdHttpConnection(net::Stream(std::move(connected)), cancel_fd, endpoint.ToString()));
  if (tls != nullptr) {
    KVPORT_RETURN_IF_ERROR(connection->stream_.StartTls(*tls, endpoint.host));
    while (true) {
      Result<net::TlsWait> step = connection->stream_.Handshake();
      if (!step.ok()) {
        const Status& error = step.status();
        return Status(error.code() == StatusCode::kPermissionDenied ? StatusCode::kPermissionDenied
                                                                    : StatusCode::kUnavailable,
                      error.message().find("TLS") == std::string::npos
                          ? "TLS handshake failed: " + error.message()
                          : error.message());
      }
      if (*step == net::TlsWait::kNone) break;
      Status waited = connection->Wait(*step == net::TlsWait::kWrite, deadline);
      if (!waited.ok()) {
        if (waited.code() == StatusCode::kTimeout) {
          return Status::Timeout("TLS handshake timed out (is the endpoint serving TLS?)");
        }
        return waited;
      }
    }
  }
  return connection;
}

Status EtcdHttpConnection::Wait(bool for_write, EtcdClock::time_point deadline) {
  while (true) {
    if (!for_write && stream_.buffered() > 0) return Status::Ok();
    pollfd fds[2] = {{stream_.fd(), static_cast<short>(for_write ? POLLOUT : POLLIN), 0},
                     {cancel_fd_, POLLIN, 0}};
    const int n = ::poll(fds, cancel_fd_ >= 0 ? 2 : 1, PollTimeoutMs(deadline));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("poll", errno);
    }
    if (cancel_fd_ >= 0 && (fds[1].revents & POLLIN)) return Status::Aborted("canceled");
    if (fds[0].revents != 0) return Status::Ok();  // ready, or an error the next call reports
    if (EtcdClock::now() >= deadline) return Status::Timeout("no answer before the deadline");
  }
}

Status EtcdHttpConnection::SendPost(std::string_view path, std::string_view body,
                                    std::string_view authorization, EtcdClock::time_point deadline,
                                    std::string_view extra_headers) {
  reusable_ = false;
  std::string head =
      "POST " + std::string(path) + " HTTP/1.1\r\nHost: " + host_header_ +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n";
  if (!authorization.empty()) {
    head += "Authorization: ";
    head += authorization;
    head += "\r\n";
  }
  head += extra_headers;
  head += "\r\n";
  iovec iov[2] = {{head.data(), head.size()}, {const_cast<char*>(body.data()), body.size()}};
  int first = 0;
  while (first < 2) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    Result<net::IoProgress> progress = stream_.WriteV(&iov[first], 2 - first);
    if (!progress.ok()) {
      return Status::Unavailable("sending the request failed: " + progress.status().message());
    }
    size_t moved = progress->bytes;
    while (moved > 0 && first < 2) {
      const size_t step = std::min(moved, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + step;
      iov[first].iov_len -= step;
      moved -= step;
      if (iov[first].iov_len == 0) ++first;
    }
    if (first < 2 && progress->would_block) {
      Status waited = Wait(/*for_write=*/true, deadline);
      if (!waited.ok()) {
        return waited.code() == StatusCode::kTimeout
                   ? Status::Timeout("sending the request timed out")
                   : waited;
      }
    }
  }
  return Status::Ok();
}

Status EtcdHttpConnection::Fill(EtcdClock::time_point deadline) {
  if (consumed_ > 0 && consumed_ >= buffer_.size() / 2) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  while (true) {
    const size_t old_size = buffer_.size();
    buffer_.resize(old_size + kReadStep);
    iovec iov{buffer_.data() + old_size, kReadStep};
    Result<net::IoProgress> progress = stream_.ReadV(&iov, 1);
    buffer_.resize(old_size + (progress.ok() ? progress->bytes : 0));
    if (!progress.ok()) {
      return Status::Unavailable("the connection broke: " + progress.status().message());
    }
    if (progress->bytes > 0) return Status::Ok();
    if (progress->eof) return Status::Unavailable("etcd closed the connection");
    KVPORT_RETURN_IF_ERROR(Wait(/*for_write=*/false, deadline));
  }
}

void EtcdHttpConnection::Consume(size_t bytes) {
  consumed_ += bytes;
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  }
}

Result<EtcdHttpHead> EtcdHttpConnection::ReadHead(EtcdClock::time_point deadline) {
  reusable_ = false;
  while (true) {
    size_t end;
    while ((end = pending().find("\r\n\r\n")) == std::string_view::npos) {
      if (pending().size() > kMaxHeadBytes) {
        return Status::Corruption("the answer's HTTP head is longer than 64 KiB");
      }
      KVPORT_RETURN_IF_ERROR(Fill(deadline));
    }
    if (end > kMaxHeadBytes)
      return Status::Corruption("the answer's HTTP head is longer than 64 KiB");
    const std::string head(pending().substr(0, end));
    Consume(end + 4);

    std::string_view rest = head;
    const size_t line_end = rest.find("\r\n");
    std::string_view status_line = rest.substr(0, line_end);
    rest = line_end == std::string_view::npos ? std::string_view() : rest.substr(line_end + 2);
    // "HTTP/1.1 200 OK"
    if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12 || status_line[8] != ' ') {
      return Status::Corruption("the answer is not HTTP/1.x");
    }
    int status = 0;
    auto [ptr, ec] = std::from_chars(status_line.data() + 9, status_line.data() + 12, status);
    if (ec != std::errc() || ptr != status_line.data() + 12 || status < 100) {
      return Status::Corruption("the answer's HTTP status is malformed");
    }
    EtcdHttpHead out;
    out.status = status;
    out.close = status_line.starts_with("HTTP/1.0");
    bool chunked = false;
    bool has_length = false;
    uint64_t length = 0;
    while (!rest.empty()) {
      const size_t next = rest.find("\r\n");
      std::string_view line = rest.substr(0, next);
      rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 2);
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string_view name = Trim(line.substr(0, colon));
      const std::string_view value = Trim(line.substr(colon + 1));
      if (EqualsNoCase(name, "content-length")) {
        auto [p, e] = std::from_chars(value.data(), value.data() + value.size(), length);
        if (e != std::errc() || p != value.data() + value.size()) {
          return Status::Corruption("the answer's Content-Length is malformed");
        }
        has_length = true;
      } else if (EqualsNoCase(name, "transfer-encoding")) {
        chunked = ContainsNoCase(value, "chunked");
      } else if (EqualsNoCase(name, "connection")) {
        if (ContainsNoCase(value, "close")) out.close = true;
      }
    }
    if (status < 200) continue;  // 100 Continue and the like: the real answer follows
    body_left_ = 0;
    if (chunked) {
      body_state_ = BodyState::kChunkSize;
    } else if (has_length) {
      body_state_ = BodyState::kLength;
      body_left_ = length;
    } else if (status == 204 || status == 304) {
      body_state_ = BodyState::kDone;
    } else {
      body_state_ = BodyState::kUntilClose;
      out.close = true;
    }
    close_after_ = out.close;
    return out;
  }
}

Status EtcdHttpConnection::ReadBody(const EtcdBodySink& sink, EtcdClock::time_point deadline,
                                    std::chrono::milliseconds idle) {
  reusable_ = false;
  // Waits for more bytes, at most `idle` from now and never past `deadline`.
  auto more = [&]() -> Status {
    const auto idle_end = EtcdClock::now() + idle;
    Status filled = Fill(std::min(deadline, idle_end));
    if (filled.code() == StatusCode::kTimeout && idle_end < deadline) {
      return Status::Timeout("etcd sent nothing for " + std::to_string(idle.count()) + " ms");
    }
    return filled;
  };
  // Passes up to `limit` pending bytes to the sink; the count passed.
  auto deliver = [&](uint64_t limit, size_t* passed) -> Status {
    const std::string_view data = pending().substr(0, std::min<uint64_t>(limit, pending().size()));
    *passed = data.size();
    if (data.empty()) return Status::Ok();
    // Consumed before the call: the sink may take long, and the bytes are its own then.
    const bool go_on = sink(data.data(), data.size());
    Consume(data.size());
    return go_on ? Status::Ok() : Status::Aborted("the reader stopped");
  };
  // One line ending in CRLF (a chunk size or a trailer), without the CRLF.
  auto line = [&](std::string* out) -> Status {
    size_t end;
    while ((end = pending().find("\r\n")) == std::string_view::npos) {
      if (pending().size() > kMaxLineBytes) {
        return Status::Corruption("a chunk line of the answer is longer than 4 KiB");
      }
      KVPORT_RETURN_IF_ERROR(more());
    }
    out->assign(pending().substr(0, end));
    Consume(end + 2);
    return Status::Ok();
  };

  // Hands the sink the body_left_ bytes of a length-framed body or a chunk, as they arrive.
  auto deliver_left = [&]() -> Status {
    while (body_left_ > 0) {
      if (pending().empty()) KVPORT_RETURN_IF_ERROR(more());
      size_t passed = 0;
      Status delivered = deliver(body_left_, &passed);
      body_left_ -= passed;
      KVPORT_RETURN_IF_ERROR(delivered);
    }
    return Status::Ok();
  };
  // The framing state lives in the connection: a read that gives up (a silent slice of a watch
  // stream) resumes where it stopped at the next call.
  std::string text;
  while (true) {
    switch (body_state_) {
      case BodyState::kLength:
        KVPORT_RETURN_IF_ERROR(deliver_left());
        body_state_ = BodyState::kDone;
        break;
      case BodyState::kChunkSize: {
        KVPORT_RETURN_IF_ERROR(line(&text));
        const std::string_view size_text = Trim(std::string_view(text).substr(0, text.find(';')));
        uint64_t size = 0;
        auto [p, e] =
            std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
        if (size_text.empty() || e != std::errc() || p != size_text.data() + size_text.size()) {
          return Status::Corruption("a chunk size of the answer is malformed");
        }
        body_left_ = size;
        body_state_ = size == 0 ? BodyState::kTrailers : BodyState::kChunkData;
        break;
      }
      case BodyState::kChunkData:
        KVPORT_RETURN_IF_ERROR(deliver_left());
        body_state_ = BodyState::kChunkEnd;
        break;
      case BodyState::kChunkEnd:
        KVPORT_RETURN_IF_ERROR(line(&text));
        if (!text.empty()) return Status::Corruption("a chunk of the answer is longer than said");
        body_state_ = BodyState::kChunkSize;
        break;
      case BodyState::kTrailers:
        // Trailers (the gateway sends Grpc-Trailer-* after an error answer), then an empty line.
        KVPORT_RETURN_IF_ERROR(line(&text));
        if (text.empty()) body_state_ = BodyState::kDone;
        break;
      case BodyState::kUntilClose: {
        if (pending().empty()) {
          Status filled = more();
          if (filled.code() == StatusCode::kUnavailable) {  // the end of the body
            body_state_ = BodyState::kDone;
            close_after_ = true;
            break;
          }
          KVPORT_RETURN_IF_ERROR(filled);
        }
        size_t passed = 0;
        KVPORT_RETURN_IF_ERROR(deliver(pending().size(), &passed));
        break;
      }
      case BodyState::kDone:
        reusable_ = !close_after_;
        return Status::Ok();
    }
  }
}

void EtcdHttpConnection::Close() {
  reusable_ = false;
  stream_.Close();
}

}  // namespace kvport::cluster
