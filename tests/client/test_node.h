// SPDX-License-Identifier: Apache-2.0
// Helpers for client tests: a real in-process kvport node on an ephemeral loopback port, and
// byte patterns that tell keys apart.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvport/client.h"
#include "kvport/server.h"

namespace kvport::testing {

inline ServerOptions SmallNodeOptions(uint64_t capacity_bytes = uint64_t{64} << 20) {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.capacity_bytes = capacity_bytes;
  options.threads = 2;
  options.shutdown_grace = std::chrono::seconds(2);
  return options;
}

inline std::unique_ptr<Server> StartNode(const ServerOptions& options) {
  Result<std::unique_ptr<Server>> server = Server::Start(options);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

// `size` bytes that depend on `seed` and the position, so a value read back under the wrong key
// or shifted by one byte does not compare equal.
inline std::vector<char> Pattern(uint64_t seed, size_t size) {
  std::vector<char> bytes(size);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    bytes[i] = static_cast<char>(x);
  }
  return bytes;
}

// Host buffers over `values`, in order.
inline IOBuffers Buffers(std::vector<std::vector<char>>& values) {
  IOBuffers buffers;
  for (auto& v : values)
    buffers.Append(v.data(), v.size());
  return buffers;
}

// Bytes the node moved through its sockets, both ways: what a transport that moves values
// elsewhere (shared memory, UCX) must keep small.
inline uint64_t SocketBytes(const Server& server) {
  ServerStats stats = server.Stats();
  return stats.Get("bytes_sent") + stats.Get("bytes_received");
}

}  // namespace kvport::testing
