// SPDX-License-Identifier: Apache-2.0
// EtcdHttpConnection's HTTP/1.1 codec against a scripted server: answers split byte by byte,
// chunked bodies with extensions and trailers, keep-alive, malformed answers, a read that gives
// up on silence and resumes, and cancellation.
#include "cluster/etcd_http.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

namespace kvport::cluster {
namespace {

using namespace std::chrono_literals;

// One connection: for each step, reads one request (head and Content-Length body), then waits
// for the step's gate (if any) and writes the step's answer in pieces of `piece` bytes.
class ScriptedServer {
 public:
  struct Step {
    Step(std::string text, bool read = true, std::shared_future<void> wait_for = {})
        : answer(std::move(text)), read_request(read), gate(std::move(wait_for)) {}
    std::string answer;
    bool read_request = true;
    std::shared_future<void> gate;  // valid: wait for it before writing
  };

  explicit ScriptedServer(std::vector<Step> steps, size_t piece = 1) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 4);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, steps = std::move(steps), piece] { Run(steps, piece); });
  }
  ~ScriptedServer() {
    thread_.join();
    ::close(listen_fd_);
  }
  net::HostPort endpoint() const { return {"127.0.0.1", port_}; }
  std::vector<std::string> requests() { return requests_; }  // after the thread ended

 private:
  void Run(const std::vector<Step>& steps, size_t piece) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::string buffer;
    for (const Step& step : steps) {
      if (step.read_request && !ReadRequest(fd, &buffer)) break;
      if (step.gate.valid()) step.gate.wait();
      for (size_t at = 0; at < step.answer.size(); at += piece) {
        const size_t n = std::min(piece, step.answer.size() - at);
        if (::send(fd, step.answer.data() + at, n, MSG_NOSIGNAL) != ssize_t(n)) break;
      }
    }
    // Wait for the client to close (so the answers are not cut by a reset).
    char byte;
    while (::recv(fd, &byte, 1, 0) > 0) {
    }
    ::close(fd);
  }
  bool ReadRequest(int fd, std::string* buffer) {
    char chunk[4096];
    while (true) {
      const size_t head_end = buffer->find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t length = 0;
        const size_t at = buffer->find("Content-Length: ");
        if (at != std::string::npos && at < head_end) length = std::stoul(buffer->substr(at + 16));
        if (buffer->size() >= head_end + 4 + length) {
          requests_.push_back(buffer->substr(0, head_end + 4 + length));
          buffer->erase(0, head_end + 4 + length);
          return true;
        }
      }
      const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) return false;
      buffer->append(chunk, size_t(n));
    }
  }

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::vector<std::string> requests_;
  std::thread thread_;
};

std::unique_ptr<EtcdHttpConnection> ConnectTo(const ScriptedServer& server, int cancel_fd = -1) {
  auto connected = EtcdHttpConnection::Connect(server.endpoint(), nullptr, EtcdClock::now() + 5s,
                                               cancel_fd, false);
  EXPECT_TRUE(connected.ok()) << connected.status().ToString();
  return connected.ok() ? std::move(connected).value() : nullptr;
}

Result<std::string> Body(EtcdHttpConnection& connection, std::chrono::milliseconds idle = 5s) {
  std::string body;
  Status read = connection.ReadBody(
      [&](const char* data, size_t size) {
        body.append(data, size);
        return true;
      },
      EtcdClock::now() + 5s, idle);
  if (!read.ok()) return read;
  return body;
}

TEST(EtcdHttpConnection, ChunkedAndLengthAnswersByteByByteOnOneConnection) {
  ScriptedServer server({
      {"HTTP/1.1 100 Continue\r\n\r\n"
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: Grpc-Trailer-Content-Type\r\n\r\n"
       "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nGrpc-Trailer-Content-Type: "
       "application/grpc\r\n\r\n"},
      {"HTTP/1.1 404 Not Found\r\ncontent-length: 3\r\n\r\nabc"},
  });
  auto connection = ConnectTo(server);
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->SendPost("/v3/kv/range", "{}", "tok", EtcdClock::now() + 5s).ok());
  auto head = connection->ReadHead(EtcdClock::now() + 5s);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->status, 200);
  auto body = Body(*connection);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ(*body, "hello world");
  EXPECT_TRUE(connection->reusable());

  ASSERT_TRUE(connection->SendPost("/v3/kv/put", "{\"a\":1}", "", EtcdClock::now() + 5s).ok());
  head = connection->ReadHead(EtcdClock::now() + 5s);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->status, 404);
  body = Body(*connection);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ(*body, "abc");
  EXPECT_TRUE(connection->reusable());
  connection->Close();

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_NE(requests[0].find("POST /v3/kv/range HTTP/1.1\r\n"), std::string::npos);
  EXPECT_NE(requests[0].find("\r\nAuthorization: tok\r\n"), std::string::npos);
  EXPECT_EQ(requests[1].find("Authorization"), std::string::npos);
  EXPECT_TRUE(requests[1].ends_with("\r\n\r\n{\"a\":1}"));
}

TEST(EtcdHttpConnection, MalformedAnswersAreCorruption) {
  {
    ScriptedServer server({{"SSH-2.0-OpenSSH\r\n\r\n"}}, 64);
    auto connection = ConnectTo(server);
    ASSERT_NE(connection, nullptr);
    ASSERT_TRUE(connection->SendPost("/", "", "", EtcdClock::now() + 5s).ok());
    EXPECT_EQ(connection->ReadHead(EtcdClock::now() + 5s).status().code(), StatusCode::kCorruption);
  }
  {
    ScriptedServer server({{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}}, 64);
    auto connection = ConnectTo(server);
    ASSERT_NE(connection, nullptr);
    ASSERT_TRUE(connection->SendPost("/", "", "", EtcdClock::now() + 5s).ok());
    ASSERT_TRUE(connection->ReadHead(EtcdClock::now() + 5s).ok());
    EXPECT_EQ(Body(*connection).status().code(), StatusCode::kCorruption);
    EXPECT_FALSE(connection->reusable());
  }
  {
    ScriptedServer server({{"HTTP/1.1 200 OK\r\nX: " + std::string(70'000, 'x') + "\r\n\r\n"}},
                          4096);
    auto connection = ConnectTo(server);
    ASSERT_NE(connection, nullptr);
    ASSERT_TRUE(connection->SendPost("/", "", "", EtcdClock::now() + 5s).ok());
    Status head = connection->ReadHead(EtcdClock::now() + 5s).status();
    EXPECT_EQ(head.code(), StatusCode::kCorruption) << head.ToString();
    connection->Close();
  }
}

// A read that gives up on silence in the middle of a chunk resumes where it stopped: what a
// watch stream read in slices relies on.
TEST(EtcdHttpConnection, ASilentReadTimesOutAndTheNextResumes) {
  std::promise<void> release;
  ScriptedServer server(
      {{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"},
       {"lo\r\n3\r\n!!!\r\n0\r\n\r\n", /*read_request=*/false, release.get_future().share()}});
  auto connection = ConnectTo(server);
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->SendPost("/v3/watch", "{}", "", EtcdClock::now() + 5s).ok());
  ASSERT_TRUE(connection->ReadHead(EtcdClock::now() + 5s).ok());
  std::string body;
  auto sink = [&](const char* data, size_t size) {
    body.append(data, size);
    return true;
  };
  // Everything the server sent so far, then silence.
  Status first = Status::Ok();
  do {
    first = connection->ReadBody(sink, EtcdClock::now() + 10s, 20ms);
  } while (first.code() == StatusCode::kTimeout && body != "hel");
  EXPECT_EQ(first.code(), StatusCode::kTimeout) << first.ToString();
  EXPECT_EQ(body, "hel");
  release.set_value();
  Status rest = connection->ReadBody(sink, EtcdClock::now() + 10s, 5s);
  EXPECT_TRUE(rest.ok()) << rest.ToString();
  EXPECT_EQ(body, "hello!!!");
  connection->Close();
}

TEST(EtcdHttpConnection, TheCancelDescriptorEndsAWaitAtOnce) {
  std::promise<void> never_before_cancel;
  ScriptedServer server({{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true,
                          never_before_cancel.get_future().share()}});
  const int cancel_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  auto connection = ConnectTo(server, cancel_fd);
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->SendPost("/v3/watch", "{}", "", EtcdClock::now() + 5s).ok());
  const uint64_t one = 1;
  ASSERT_EQ(::write(cancel_fd, &one, sizeof(one)), ssize_t(sizeof(one)));
  // The deadline is far: only the cancel can end this read.
  EXPECT_EQ(connection->ReadHead(EtcdClock::now() + 600s).status().code(), StatusCode::kAborted);
  never_before_cancel.set_value();
  connection->Close();
  ::close(cancel_fd);
}

}  // namespace
}  // namespace kvport::cluster
