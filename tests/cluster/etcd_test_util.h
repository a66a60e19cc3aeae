// SPDX-License-Identifier: Apache-2.0
// Helpers of the etcd tests: a suite sharing one etcd, waiting for a condition with a deadline
// (never a fixed sleep), and a loopback port where nothing listens.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "etcd_process.h"

namespace kvport::testing {

// Polls `condition` every few milliseconds until it holds or `timeout` passes; whether it held.
// The timeout is a bound on a broken build, not an expectation: tests never assert durations.
inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// "127.0.0.1:P" where P was free a moment ago (bound, then closed): connecting is refused.
inline std::string DeadEndpoint() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

// A suite of tests sharing one etcd (started once per suite): each test uses keys or cluster
// names of its own, so they do not see each other.
class SharedEtcdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = EtcdProcess::Start();
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    etcd_ = std::move(started).value().release();
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(etcd_, nullptr); }

  static inline EtcdProcess* etcd_ = nullptr;
};

}  // namespace kvport::testing
