// SPDX-License-Identifier: Apache-2.0
// TcpProxy: a loopback TCP relay to one port that a test can cut and heal, to put a network
// partition between a node and etcd while both keep running. Cut closes every relayed
// connection and closes new ones as soon as they are accepted (the peer sees its connection
// end, as after a reset); Heal relays again. Freeze stops relaying the connections open now while
// keeping them open (a peer that hangs without closing: TCP keepalive still gets answered); new
// connections relay as usual. One thread, poll(), small blocking writes: for
// etcd's few small requests, not for bulk data.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kvport::testing {

class TcpProxy {
 public:
  // Relays 127.0.0.1:endpoint() to 127.0.0.1:`target_port`.
  explicit TcpProxy(uint16_t target_port) : target_port_(target_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = Loopback(0);
    socklen_t len = sizeof(addr);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 64);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~TcpProxy() {
    stop_ = true;
    thread_.join();
    CloseAll();
    ::close(listen_fd_);
  }
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  void Cut() { cut_ = true; }
  void Heal() { cut_ = false; }
  // Stops relaying the connections open now, keeping them open; returns once they are frozen.
  void Freeze() {
    freeze_ = true;
    while (freeze_)
      std::this_thread::yield();
  }
  // Connections relayed so far (those accepted while cut are not counted).
  size_t relayed() const { return relayed_.load(); }

 private:
  static sockaddr_in Loopback(uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
  }

  void CloseAll() {
    for (auto* list : {&pairs_, &frozen_}) {
      for (auto [a, b] : *list) {
        ::close(a);
        ::close(b);
      }
      list->clear();
    }
  }

  // Copies what `from` has to `to`; false when either side is done.
  static bool Relay(int from, int to) {
    char buffer[64 * 1024];
    const ssize_t n = ::read(from, buffer, sizeof(buffer));
    if (n <= 0) return false;
    for (ssize_t sent = 0; sent < n;) {
      const ssize_t w = ::send(to, buffer + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
      if (w <= 0) return false;
      sent += w;
    }
    return true;
  }

  void Run() {
    while (!stop_) {
      if (cut_) CloseAll();
      if (freeze_) {
        frozen_.insert(frozen_.end(), pairs_.begin(), pairs_.end());
        pairs_.clear();
        freeze_ = false;
      }
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (auto [a, b] : pairs_) {
        fds.push_back({a, POLLIN, 0});
        fds.push_back({b, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 10) <= 0) continue;
      std::vector<std::pair<int, int>> kept;
      for (size_t i = 0; i < pairs_.size(); ++i) {
        auto [a, b] = pairs_[i];
        const short ra = fds[1 + 2 * i].revents;
        const short rb = fds[2 + 2 * i].revents;
        const bool alive = (!ra || Relay(a, b)) && (!rb || Relay(b, a));
        if (alive) {
          kept.emplace_back(a, b);
        } else {
          ::close(a);
          ::close(b);
        }
      }
      pairs_ = std::move(kept);
      if (fds[0].revents & POLLIN) Accept();  // after the pairs `fds` describes
    }
  }

  void Accept() {
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) return;
    if (cut_) {
      ::close(client);
      return;
    }
    const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in target = Loopback(target_port_);
    if (::connect(upstream, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
      ::close(upstream);
      ::close(client);
      return;
    }
    // Relayed as they come: no Nagle delay added to a request written in two parts.
    const int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    pairs_.emplace_back(client, upstream);
    relayed_.fetch_add(1);
  }

  const uint16_t target_port_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> cut_{false};
  std::atomic<bool> freeze_{false};
  std::atomic<size_t> relayed_{0};
  std::vector<std::pair<int, int>> pairs_;   // (accepted, upstream); the thread's alone
  std::vector<std::pair<int, int>> frozen_;  // open, not relayed; the thread's alone
  std::thread thread_;
};

}  // namespace kvport::testing
