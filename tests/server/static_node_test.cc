// SPDX-License-Identifier: Apache-2.0
// A node held in a static is destroyed among the process's static destructors, and it logs as it
// stops. This binary has one test so that the node's static is made before anything has logged:
// the log's own statics are then younger than the node and are destroyed first. If the log did
// not outlive every static, the process would die at exit (SIGSEGV) after the test passed, and
// ctest would fail it.
#include <gtest/gtest.h>

#include <memory>

#include "kvport/client.h"
#include "kvport/server.h"

namespace kvport {
namespace {

TEST(StaticNodeTest, ANodeAndAClientInStaticsStopCleanlyAtExit) {
  static std::unique_ptr<Server> node;  // destroyed after main returns
  static Client client;
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.capacity_bytes = uint64_t{16} << 20;
  options.unix_socket = "";
  Result<std::unique_ptr<Server>> started = Server::Start(options);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  node = std::move(started).value();
  ASSERT_TRUE(client.Init("static", node->address()).ok());
  ASSERT_TRUE(client.Ping().ok());
}

}  // namespace
}  // namespace kvport
