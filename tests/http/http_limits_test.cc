// SPDX-License-Identifier: Apache-2.0
// The HTTP endpoint against hostile and careless peers: idle and
// half-sent connections never delay /health, the connection cap holds, oversized heads and
// bodies are refused, idle and slow connections are closed at their deadlines, keep-alive and
// pipelining work. Peers are raw sockets, doing what an HTTP client library would not. Every
// wait is bounded and every assertion is about behaviour, never about how long it took.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http_test_util.h"

namespace kvport::testing {
namespace {

using namespace std::chrono_literals;
using http::HttpOptions;

constexpr auto kWait = 10s;  // the most any step waits: generous, never expected

struct RawResponse {
  int status = 0;
  std::string head;
  std::string body;
};

// A TCP connection to the endpoint that sends and reads exactly what the test says.
class RawConnection {
 public:
  // Connects (blocking) to 127.0.0.1:port; `receive_buffer` > 0 shrinks SO_RCVBUF first.
  explicit RawConnection(uint16_t port, int receive_buffer = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (receive_buffer > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // The next response (for a HEAD request, `head_only`: no body), or nullopt when the
  // connection closed or nothing came within kWait.
  std::optional<RawResponse> ReadResponse(bool head_only = false) {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return std::nullopt;
    }
    RawResponse response;
    response.head = buffer_.substr(0, end + 4);
    if (response.head.rfind("HTTP/1.1 ", 0) != 0) return std::nullopt;
    response.status = std::stoi(response.head.substr(9, 3));
    size_t length = 0;
    const size_t field = response.head.find("Content-Length: ");
    if (field != std::string::npos) length = std::stoul(response.head.substr(field + 16));
    if (head_only) length = 0;
    while (buffer_.size() < end + 4 + length) {
      if (!Fill(deadline)) return std::nullopt;
    }
    response.body = buffer_.substr(end + 4, length);
    buffer_.erase(0, end + 4 + length);
    return response;
  }

  // Reads (and drops) until the server closes the connection (end of stream or reset): true, or
  // false when it is still open after kWait.
  bool WaitClosed() {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (Fill(deadline)) {
      buffer_.clear();
    }
    return closed_;
  }

  // Whether the server has closed the connection, found without reading or waiting: a reset, or
  // the end of the stream (POLLRDHUP).
  bool ClosedNow() { return Poll(POLLRDHUP, 0) != 0; }

  // Waits (at most kWait) until the server resets or ends the connection, without reading.
  bool WaitHangUpWithoutReading() {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (std::chrono::steady_clock::now() < deadline) {
      if (Poll(POLLRDHUP, 100) != 0) return true;
    }
    return false;
  }

  // Waits (at most kWait) until the first byte of an answer arrives, without reading it.
  bool WaitReadable() { return (Poll(POLLIN, static_cast<int>(kWait / 1ms)) & POLLIN) != 0; }

 private:
  short Poll(short events, int timeout_ms) {
    pollfd p{fd_, events, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return 0;
    return static_cast<short>(p.revents & (events | POLLHUP | POLLERR));
  }

  // Reads what arrives before `deadline` into buffer_; false at the end of the stream, a reset
  // (closed_ then true) or the deadline.
  bool Fill(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char chunk[16 * 1024];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      closed_ = n == 0 || errno == ECONNRESET;
      return false;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
  bool closed_ = false;
};

httplib::Result GetWithClient(const http::HttpServer& server, const std::string& path,
                              const httplib::Headers& headers = {}) {
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(kWait);
  client.set_read_timeout(kWait);
  return client.Get(path.c_str(), headers);
}

// Waits (at most kWait) until no more than `most` of `peers` are still open; whether they are.
bool WaitUntilOpen(const std::vector<std::unique_ptr<RawConnection>>& peers, size_t most) {
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  for (;;) {
    std::vector<pollfd> fds;
    for (const auto& peer : peers)
      fds.push_back({peer->fd(), POLLRDHUP, 0});
    // A hang-up stays reported, so this returns at once while any peer is closed: the loop
    // rechecks until enough are, or the deadline.
    const int closed = ::poll(fds.data(), fds.size(), 100);
    const size_t open = peers.size() - static_cast<size_t>(closed > 0 ? closed : 0);
    if (open <= most) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
  }
}

constexpr std::string_view kHealthRequest = "GET /health HTTP/1.1\r\nHost: node\r\n\r\n";

// The endpoint before this one (cpp-httplib, a pool of 2 threads each waiting out an idle
// connection's 5 s read timeout) answered this /health after the 200 idle connections ahead of
// it, minutes later; the client below gave up after 10 s (checked against the old code).
TEST(HttpLimits, HealthAnswersBesideManyIdleAndHalfSentConnections) {
  HttpOptions options;
  options.max_connections = 512;  // above the 201 used: this is about blocking, not the cap
  options.request_timeout = 60s;  // nor about deadlines: every idle connection stays open
  NodeWithHttp n = NodeWithHttp::Start(options);
  ASSERT_TRUE(n.node && n.http);
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 200; ++i) {
    idle.push_back(std::make_unique<RawConnection>(n.http->port()));
    ASSERT_TRUE(idle.back()->connected());
    if (i % 4 == 0) {
      ASSERT_TRUE(idle.back()->Send("GET /health HTTP/1.1\r\nHo"));
    }
  }
  auto r = GetWithClient(*n.http, "/health");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  // The half-sent heads were waiting, not lost: finishing one gets its answer.
  ASSERT_TRUE(idle[0]->Send("st: node\r\n\r\n"));
  auto finished = idle[0]->ReadResponse();
  ASSERT_TRUE(finished);
  EXPECT_EQ(finished->status, 200);
  for (const auto& c : idle) {
    EXPECT_FALSE(c->ClosedNow());
  }
}

// the endpoint holds at most max_connections. Over the cap, a new connection takes the
// place of the one idle longest, so a probe still gets in.
TEST(HttpLimits, TheCapHoldsAndAProbeStillGetsIn) {
  HttpOptions options;
  options.max_connections = 16;
  options.request_timeout = 60s;  // only the cap closes connections here
  NodeWithHttp n = NodeWithHttp::Start(options);
  ASSERT_TRUE(n.node && n.http);
  const size_t extra = 20;
  std::vector<std::unique_ptr<RawConnection>> peers;
  for (size_t i = 0; i < options.max_connections + extra; ++i) {
    peers.push_back(std::make_unique<RawConnection>(n.http->port()));
    ASSERT_TRUE(peers.back()->connected());
  }
  // A probe behind them all is answered (and was accepted after them: they are all admitted).
  auto r = GetWithClient(*n.http, "/health");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);

  // The server closed the extra ones (and one more for the probe's connection): at most the cap
  // of them are open.
  EXPECT_TRUE(WaitUntilOpen(peers, options.max_connections - 1));
  // Those still open are served.
  for (auto& peer : peers) {
    if (peer->ClosedNow()) continue;
    ASSERT_TRUE(peer->Send(kHealthRequest));
    auto answer = peer->ReadResponse();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->status, 200);
  }
}

// The most a TCP socket's send buffer grows to (tcp_wmem's maximum); 4 MiB by default.
size_t MaxSendBufferBytes() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_wmem");
  size_t low = 0, initial = 0, most = 0;
  if (!(in >> low >> initial >> most)) return 4 << 20;
  return most;
}

// A context whose /health body is larger than the server's socket buffers can hold: a peer
// whose own receive buffer is small, that sends one request and never reads, holds its
// connection in the middle of an answer.
HttpOptions WithAHugeHealthPage(HttpOptions options) {
  options.context.version.assign(std::max<size_t>(16 << 20, 2 * MaxSendBufferBytes()), 'v');
  return options;
}

// A peer can hold a connection busy (reading its answers a trickle at a time, or not at all
// until the write deadline): when every connection is busy, a new one replaces the oldest.
TEST(HttpLimits, WhenEveryConnectionIsBusyANewOneReplacesTheOldest) {
  HttpOptions options;
  options.max_connections = 1;
  options.write_timeout = 60s;  // the reader is not cut off by its deadline here
  auto http = http::HttpServer::Start(WithAHugeHealthPage(options));
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  RawConnection reader((*http)->port(), 4096);
  ASSERT_TRUE(reader.Send(kHealthRequest));
  ASSERT_TRUE(reader.WaitReadable());  // its answer has started: the one connection is busy

  RawConnection probe((*http)->port());
  ASSERT_TRUE(probe.Send("GET /absent HTTP/1.1\r\n\r\n"));
  auto answer = probe.ReadResponse();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 404);
  EXPECT_TRUE(reader.WaitHangUpWithoutReading());
}

TEST(HttpLimits, AReaderTooSlowIsCutOffAtTheWriteDeadline) {
  HttpOptions options;
  options.write_timeout = 200ms;
  auto http = http::HttpServer::Start(WithAHugeHealthPage(options));
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  RawConnection reader((*http)->port(), 4096);
  ASSERT_TRUE(reader.Send(kHealthRequest));
  EXPECT_TRUE(reader.WaitHangUpWithoutReading());
  // The endpoint goes on serving.
  auto r = GetWithClient(**http, "/nothing");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 404);
}

TEST(HttpLimits, AHeadOverTheBoundGets431AndTheEndpointGoesOn) {
  NodeWithHttp n = NodeWithHttp::Start();
  ASSERT_TRUE(n.node && n.http);
  {
    RawConnection peer(n.http->port());
    ASSERT_TRUE(peer.Send("GET /health HTTP/1.1\r\nX-Filler: " + std::string(16 << 10, 'a')));
    auto r = peer.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 431);
    EXPECT_NE(r->head.find("Connection: close"), std::string::npos);
    EXPECT_TRUE(peer.WaitClosed());
  }
  // The same through a client library, with a header of 16 KiB.
  auto big = GetWithClient(*n.http, "/health", {{"X-Filler", std::string(16 << 10, 'b')}});
  ASSERT_TRUE(big) << httplib::to_string(big.error());
  EXPECT_EQ(big->status, 431);
  auto r = GetWithClient(*n.http, "/health");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
}

TEST(HttpLimits, RequestBodiesAndOtherMethodsAreRefused) {
  NodeWithHttp n = NodeWithHttp::Start();
  ASSERT_TRUE(n.node && n.http);
  {
    RawConnection peer(n.http->port());
    ASSERT_TRUE(peer.Send("POST /health HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"));
    auto r = peer.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
    EXPECT_TRUE(peer.WaitClosed());
  }
  {
    RawConnection peer(n.http->port());
    ASSERT_TRUE(peer.Send("GET /health HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"));
    auto r = peer.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
    EXPECT_TRUE(peer.WaitClosed());
  }
  {
    // A method without a body is answered, and the connection goes on.
    RawConnection peer(n.http->port());
    ASSERT_TRUE(peer.Send("DELETE /stats HTTP/1.1\r\n\r\n"));
    auto r = peer.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 405);
    EXPECT_NE(r->head.find("Allow: GET, HEAD"), std::string::npos);
    ASSERT_TRUE(peer.Send(kHealthRequest));
    auto next = peer.ReadResponse();
    ASSERT_TRUE(next);
    EXPECT_EQ(next->status, 200);
  }
  {
    RawConnection peer(n.http->port());
    ASSERT_TRUE(peer.Send("GET /health HTTP/1.1\r\nBad header\r\n\r\n"));
    auto r = peer.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_TRUE(peer.WaitClosed());
  }
}

TEST(HttpLimits, IdleAndSlowConnectionsAreClosedAtTheirDeadline) {
  HttpOptions options;
  options.request_timeout = 1s;
  NodeWithHttp n = NodeWithHttp::Start(options);
  ASSERT_TRUE(n.node && n.http);
  RawConnection silent(n.http->port());  // never sends a byte
  RawConnection kept(n.http->port());    // keep-alive, idle after one request
  ASSERT_TRUE(kept.Send(kHealthRequest));
  auto r = kept.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->head.find("Connection: keep-alive"), std::string::npos);
  RawConnection slow(n.http->port());  // part of a head, then nothing
  ASSERT_TRUE(slow.Send("GET /health HTTP/1.1\r\nHo"));

  EXPECT_TRUE(silent.WaitClosed());
  EXPECT_TRUE(kept.WaitClosed());
  auto timed_out = slow.ReadResponse();
  ASSERT_TRUE(timed_out);
  EXPECT_EQ(timed_out->status, 408);
  EXPECT_TRUE(slow.WaitClosed());
}

TEST(HttpLimits, KeepAliveServesRequestAfterRequest) {
  NodeWithHttp n = NodeWithHttp::Start();
  ASSERT_TRUE(n.node && n.http);
  {
    RawConnection peer(n.http->port());
    ASSERT_TRUE(peer.Send(kHealthRequest));
    auto first = peer.ReadResponse();
    ASSERT_TRUE(first);
    EXPECT_EQ(first->status, 200);
    ASSERT_TRUE(peer.Send("GET /stats HTTP/1.1\r\nHost: node\r\n\r\n"));
    auto second = peer.ReadResponse();
    ASSERT_TRUE(second);
    EXPECT_EQ(second->status, 200);
    EXPECT_NE(second->head.find("Content-Type: application/json"), std::string::npos);
    // HEAD: the head of the GET answer, without its body.
    ASSERT_TRUE(peer.Send("HEAD /health HTTP/1.1\r\n\r\n"));
    auto head = peer.ReadResponse(/*head_only=*/true);
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 200);
    EXPECT_TRUE(head->body.empty());
    // Connection: close is honoured after the answer.
    ASSERT_TRUE(peer.Send("GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"));
    auto last = peer.ReadResponse();
    ASSERT_TRUE(last);
    EXPECT_EQ(last->status, 200);
    EXPECT_NE(last->head.find("Connection: close"), std::string::npos);
    EXPECT_TRUE(peer.WaitClosed());
  }
  {
    // A client library's keep-alive connection.
    httplib::Client client("127.0.0.1", n.http->port());
    client.set_keep_alive(true);
    client.set_read_timeout(kWait);
    for (int i = 0; i < 3; ++i) {
      auto r = client.Get("/health");
      ASSERT_TRUE(r) << httplib::to_string(r.error());
      EXPECT_EQ(r->status, 200);
    }
  }
  {
    // HTTP/1.0 closes unless asked not to.
    RawConnection peer(n.http->port());
    ASSERT_TRUE(peer.Send("GET /health HTTP/1.0\r\n\r\n"));
    auto r = peer.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_TRUE(peer.WaitClosed());
  }
}

// Pipelined requests (more than one turn of the loop answers) come back whole and in order.
TEST(HttpLimits, PipelinedRequestsAreAnsweredInOrder) {
  NodeWithHttp n = NodeWithHttp::Start();
  ASSERT_TRUE(n.node && n.http);
  RawConnection peer(n.http->port());
  std::string burst;
  const int count = 40;
  for (int i = 0; i < count; ++i) {
    burst += i % 2 == 0 ? "GET /health HTTP/1.1\r\n\r\n" : "GET /absent HTTP/1.1\r\n\r\n";
  }
  ASSERT_TRUE(peer.Send(burst));
  for (int i = 0; i < count; ++i) {
    auto r = peer.ReadResponse();
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, i % 2 == 0 ? 200 : 404) << i;
  }
}

TEST(HttpLimits, OptionsThatCouldServeNothingAreRefused) {
  HttpOptions options;
  options.max_connections = 0;
  EXPECT_EQ(http::HttpServer::Start(options).status().code(), StatusCode::kInvalidArgument);
  options.max_connections = 1;
  options.request_timeout = 0ms;
  EXPECT_EQ(http::HttpServer::Start(options).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvport::testing
