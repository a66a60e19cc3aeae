// SPDX-License-Identifier: Apache-2.0
// RespTestClient: a blocking Redis-protocol client for the tests, reading replies back as a
// readable form ("+OK", ":3", "$hello", "(nil)" for a RESP2 or RESP3 null, "*2[...]" for
// arrays, "%1{k=v}" for maps) so that a test compares one string. Every read is bounded by a
// receive timeout: a node that never answers fails the test instead of hanging it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvport::testing {

class RespTestClient {
 public:
  explicit RespTestClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{20, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RespTestClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RespTestClient(const RespTestClient&) = delete;
  RespTestClient& operator=(const RespTestClient&) = delete;

  // Closes the connection now (unread replies make it a reset).
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  static std::string Encode(const std::vector<std::string>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const std::string& a : args)
      out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    return out;
  }

  bool SendRaw(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  bool Send(const std::vector<std::string>& args) { return SendRaw(Encode(args)); }

  // One reply in the readable form above; "<closed>" when the connection ended first.
  std::string Read() {
    std::optional<std::string> r = ReadReply();
    return r ? *r : "<closed>";
  }
  std::string Call(const std::vector<std::string>& args) {
    if (!Send(args)) return "<send failed>";
    return Read();
  }
  // The raw bytes of the next bulk reply (for large values), nullopt for anything else.
  std::optional<std::string> ReadBulk() {
    std::optional<std::string> line = ReadLine();
    if (!line || line->empty() || (*line)[0] != '$') return std::nullopt;
    const long long n = std::stoll(line->substr(1));
    if (n < 0) return std::nullopt;
    std::optional<std::string> data = ReadExactly(static_cast<size_t>(n) + 2);
    if (!data) return std::nullopt;
    data->resize(static_cast<size_t>(n));
    return data;
  }
  // True when the node closed the connection (EOF) before `limit` more bytes arrived.
  bool ReadsToEof(size_t limit = 1 << 20) {
    size_t seen = buffer_.size();
    buffer_.clear();
    while (seen <= limit) {
      char chunk[4096];
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n == 0) return true;
      if (n < 0) return false;
      seen += static_cast<size_t>(n);
    }
    return false;
  }

 private:
  bool Fill() {
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  std::optional<std::string> ReadLine() {
    while (true) {
      const size_t end = buffer_.find("\r\n");
      if (end != std::string::npos) {
        std::string line = buffer_.substr(0, end);
        buffer_.erase(0, end + 2);
        return line;
      }
      if (!Fill()) return std::nullopt;
    }
  }
  std::optional<std::string> ReadExactly(size_t n) {
    while (buffer_.size() < n) {
      if (!Fill()) return std::nullopt;
    }
    std::string out = buffer_.substr(0, n);
    buffer_.erase(0, n);
    return out;
  }
  std::optional<std::string> ReadReply() {
    std::optional<std::string> line = ReadLine();
    if (!line || line->empty()) return std::nullopt;
    const char type = (*line)[0];
    const std::string rest = line->substr(1);
    switch (type) {
      case '+':
      case '-':
      case ':':
      case ',':
      case '#':
        return *line;
      case '_':
        return "(nil)";
      case '$':
      case '=': {
        const long long n = std::stoll(rest);
        if (n < 0) return "(nil)";
        std::optional<std::string> data = ReadExactly(static_cast<size_t>(n) + 2);
        if (!data) return std::nullopt;
        data->resize(static_cast<size_t>(n));
        return (type == '$' ? "$" : "=") + *data;
      }
      case '*':
      case '~':
      case '%': {
        const long long n = std::stoll(rest);
        if (n < 0) return "(nil)";
        const long long items = type == '%' ? 2 * n : n;
        std::string out = std::string(1, type) + rest + (type == '%' ? "{" : "[");
        for (long long i = 0; i < items; ++i) {
          std::optional<std::string> item = ReadReply();
          if (!item) return std::nullopt;
          if (i > 0) out += (type == '%' && i % 2 == 1) ? "=" : " ";
          out += *item;
        }
        return out + (type == '%' ? "}" : "]");
      }
      default:
        return "<bad reply: " + *line + ">";
    }
  }

  int fd_ = -1;
  std::string buffer_;
};

}  // namespace kvport::testing
