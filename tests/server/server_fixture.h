// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the server tests: an in-process node on an ephemeral loopback port.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "kvport/server.h"
#include "test_client.h"

namespace kvport::testing {

inline ServerOptions SmallNodeOptions() {
  ServerOptions options;  // 127.0.0.1:0
  options.capacity_bytes = 8 << 20;
  options.threads = 2;
  options.shutdown_grace = std::chrono::seconds(30);
  return options;
}

inline std::unique_ptr<Server> StartNode(const ServerOptions& options) {
  auto server = Server::Start(options);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

inline TestClient MustConnect(const Server& server) {
  auto client = TestClient::Connect(server.port());
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return std::move(client).value();
}

// Polls `condition` until it holds, for state the server changes asynchronously (a closed
// connection, an aborted reservation) and exposes no event for. Bounded: gives up after a
// generous bound so a bug fails the test instead of hanging it; the result is what matters.
inline bool Eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 20000; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return condition();
}

// Deterministic, key-specific bytes so a value returned for the wrong key is noticed.
inline std::string ValueFor(const std::string& key, size_t size) {
  std::string v(size, '\0');
  uint32_t h = 2166136261u;
  for (char c : key)
    h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  for (size_t i = 0; i < size; ++i) {
    h = h * 1103515245u + 12345u;
    v[i] = static_cast<char>(h >> 16);
  }
  return v;
}

}  // namespace kvport::testing
