// SPDX-License-Identifier: Apache-2.0
// FakeNode: a raw-socket stand-in for a kvport node on an ephemeral loopback port, whose every
// connection runs a script the test writes, for the client's behaviour against nodes that answer
// late, in pieces, never, out of turn, or with sizes that lie. Latch lets a script and the test
// wait for each other (bounded waits, no sleeps).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "protocol/frame.h"
#include "protocol/limits.h"
#include "protocol/messages.h"

namespace kvport::testing {

// A count that threads raise and wait for, each wait bounded (a broken client fails the test
// instead of hanging it).
class Latch {
 public:
  void Raise() {
    std::lock_guard lock(mu_);
    ++count_;
    cv_.notify_all();
  }
  // True once the count reached `n`; false after `bound`.
  bool WaitFor(int n, std::chrono::milliseconds bound = std::chrono::seconds(20)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, bound, [&] { return count_ >= n; });
  }
  int count() {
    std::lock_guard lock(mu_);
    return count_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
};

// One request as the fake node read it.
struct FakeFrame {
  protocol::FrameHeader header;
  std::string descriptor;
  std::string payload;
};

// The node's end of one accepted connection.
class FakeConn {
 public:
  explicit FakeConn(int fd) : fd_(fd) {}

  // Reads one whole request frame; false when the client closed (or the node is stopping).
  bool Read(FakeFrame* out) {
    char head[protocol::kFrameHeaderSize];
    if (!ReadExact(head, sizeof(head))) return false;
    const protocol::Limits limits;
    if (!protocol::DecodeFrameHeader(std::string_view(head, sizeof(head)), limits, &out->header)
             .ok()) {
      return false;
    }
    out->descriptor.assign(out->header.descriptor_length, '\0');
    out->payload.assign(out->header.payload_length, '\0');
    return ReadExact(out->descriptor.data(), out->descriptor.size()) &&
           ReadExact(out->payload.data(), out->payload.size());
  }

  // Reads the HELLO and answers it with `limits` at protocol `version`.
  bool Hello(const protocol::Limits& limits = {}, uint8_t version = protocol::kMaxProtocolVersion) {
    FakeFrame hello;
    if (!Read(&hello) || hello.header.opcode != protocol::Opcode::kHello) return false;
    return AnswerHello(hello, limits, version);
  }
  bool AnswerHello(const FakeFrame& hello, const protocol::Limits& limits,
                   uint8_t version = protocol::kMaxProtocolVersion) {
    protocol::HelloResponse response;
    response.version = version;
    response.limits = limits;
    response.server_name = "fake";
    protocol::EncodedFrame frame;
    if (!protocol::EncodeResponse(hello.header.request_id, response, limits, &frame).ok()) {
      return false;
    }
    return Write(frame.Flatten());
  }

  bool Write(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Ends the connection (the client sees end-of-file).
  void Close() { ::shutdown(fd_, SHUT_RDWR); }

 private:
  bool ReadExact(char* p, size_t n) {
    while (n > 0) {
      ssize_t r = ::read(fd_, p, n);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }

  int fd_;
};

// A listening socket on 127.0.0.1 and an ephemeral port (in *port).
inline int ListenOnLoopback(uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

class FakeNode {
 public:
  // `script(conn, index)` runs on a thread of its own for each accepted connection, index 0
  // for the first; the connection is shut down when it returns.
  using Script = std::function<void(FakeConn& conn, int index)>;

  explicit FakeNode(Script script) : script_(std::move(script)) {
    listener_ = ListenOnLoopback(&port_);
    acceptor_ = std::thread([this] { Accept(); });
  }

  // Stops accepting, shuts every connection down (so scripts blocked on a read return) and
  // joins every thread.
  ~FakeNode() {
    ::shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard lock(mu_);
      for (int fd : fds_)
        ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : scripts_)
      t.join();
    for (int fd : fds_)
      ::close(fd);
    ::close(listener_);
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Connections accepted so far: a client that reconnected has more than one.
  int accepted() const { return accepted_.load(); }

  // Unblocks every script waiting on a read (their connections end), without stopping the
  // node.
  void ShutdownConnections() {
    std::lock_guard lock(mu_);
    for (int fd : fds_)
      ::shutdown(fd, SHUT_RDWR);
  }

 private:
  void Accept() {
    for (int index = 0;; ++index) {
      int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      accepted_.fetch_add(1);
      std::lock_guard lock(mu_);
      fds_.push_back(fd);
      scripts_.emplace_back([this, fd, index] {
        FakeConn conn(fd);
        script_(conn, index);
        conn.Close();
      });
    }
  }

  Script script_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> scripts_;
  std::thread acceptor_;
};

// Header + descriptor + payload of one response, as bytes: for scripts that write it in pieces.
template <typename Response>
std::string ResponseBytes(uint64_t request_id, const Response& response,
                          const protocol::Limits& limits = {},
                          uint8_t version = protocol::kMaxProtocolVersion) {
  protocol::EncodedFrame frame;
  Status encoded = protocol::EncodeResponse(request_id, response, limits, &frame, version);
  EXPECT_TRUE(encoded.ok()) << encoded.ToString();
  return frame.Flatten();
}

}  // namespace kvport::testing
