// SPDX-License-Identifier: Apache-2.0
// EtcdHttpConnection: one HTTP/1.1 connection to one etcd endpoint, plain or TLS, over
// net::Stream: what EtcdClient's calls to etcd's JSON gateway travel on.
//
// Why not cpp-httplib: TLS to etcd must use the project's one TLS implementation (net/tls.h,
// the same OpenSSL set-up the node's listeners use) rather than httplib's own OpenSSL mode, and
// a watch stream must be cancelable from another thread and read with a silence bound of its
// own. The gateway needs little of HTTP: POST with a Content-Length body, and answers with a
// Content-Length or chunked body (error answers carry a trailer), so the codec here is small.
//
// Blocking calls over a non-blocking socket: every wait is a poll() bounded by a deadline, and
// also wakes when `cancel_fd` (an eventfd, or -1) becomes readable. Not thread-safe: one call
// at a time (EtcdClient keeps one connection per endpoint behind a mutex, and gives every watch
// stream its own).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/status.h"
#include "net/host_port.h"
#include "net/stream.h"
#include "net/tls.h"

namespace kvport::cluster {

using EtcdClock = std::chrono::steady_clock;

// What a response said before its body.
struct EtcdHttpHead {
  int status = 0;
  bool close = false;  // "Connection: close", or a body that ends with the connection
};

// Receives body bytes as they arrive; false stops reading (the connection is then unusable).
using EtcdBodySink = std::function<bool(const char* data, size_t size)>;

class EtcdHttpConnection {
 public:
  // Connects to `endpoint` and, with `tls`, completes the TLS handshake (the endpoint's host is
  // the name its certificate must carry), all before `deadline`. Unavailable naming what failed
  // (connect refused, timed out, TLS handshake); PermissionDenied when etcd's certificate fails
  // verification. With `keepalive`, TCP keepalive probes find a peer that vanished without
  // closing the connection (see etcd_client.cc's watch).
  static Result<std::unique_ptr<EtcdHttpConnection>> Connect(const net::HostPort& endpoint,
                                                             const net::TlsContext* tls,
                                                             EtcdClock::time_point deadline,
                                                             int cancel_fd, bool keepalive);

  // Writes a POST of `body` to `path`, with `authorization` as its Authorization header when
  // not empty, and `extra_headers` ("Name: value\r\n" lines) as they are.
  Status SendPost(std::string_view path, std::string_view body, std::string_view authorization,
                  EtcdClock::time_point deadline, std::string_view extra_headers = {});

  // Reads the response's head (skipping 1xx answers). Timeout when nothing came before
  // `deadline`, Unavailable when the connection ended or broke, Corruption for something that
  // is not HTTP, Aborted when canceled.
  Result<EtcdHttpHead> ReadHead(EtcdClock::time_point deadline);

  // Reads the body to its end, passing it to `sink`. `idle` bounds the wait for each next piece
  // (a silent peer: Timeout), `deadline` the whole read. Ok once the body ended (the connection
  // can carry the next request unless the head said close); Aborted when `sink` refused or the
  // read was canceled. After a Timeout, a further call resumes where this one stopped.
  Status ReadBody(const EtcdBodySink& sink, EtcdClock::time_point deadline,
                  std::chrono::milliseconds idle);

  // Whether the body of the last response was read to its end and the connection may carry the
  // next request.
  bool reusable() const { return reusable_; }
  int fd() const { return stream_.fd(); }
  // Ends the connection now (best effort close_notify for TLS).
  void Close();

 private:
  EtcdHttpConnection(net::Stream stream, int cancel_fd, std::string host_header)
      : stream_(std::move(stream)), cancel_fd_(cancel_fd), host_header_(std::move(host_header)) {}

  // Waits until the stream can be read (or written), the deadline passes (Timeout) or the
  // connection is canceled (Aborted).
  Status Wait(bool for_write, EtcdClock::time_point deadline);
  // Reads what is available into buffer_ (waiting up to `deadline`); Unavailable at EOF.
  Status Fill(EtcdClock::time_point deadline);
  std::string_view pending() const { return std::string_view(buffer_).substr(consumed_); }
  void Consume(size_t bytes);

  net::Stream stream_;
  const int cancel_fd_;
  const std::string host_header_;
  std::string buffer_;  // bytes read and not yet parsed, from consumed_ on
  size_t consumed_ = 0;
  // Where reading the body of the response stands (kept across ReadBody calls).
  enum class BodyState {
    kLength,      // body_left_ bytes of a Content-Length body to go
    kChunkSize,   // a chunk-size line next
    kChunkData,   // body_left_ bytes of the chunk to go
    kChunkEnd,    // the CRLF after a chunk next
    kTrailers,    // trailer lines until an empty one
    kUntilClose,  // everything until the connection ends
    kDone,
  };
  BodyState body_state_ = BodyState::kDone;
  uint64_t body_left_ = 0;
  bool reusable_ = false;
  bool close_after_ = false;
};

}  // namespace kvport::cluster
