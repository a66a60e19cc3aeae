// SPDX-License-Identifier: Apache-2.0
// A shared-memory client killed with SIGKILL (no chance to release anything) leaves no lease
// and no reservation on the node: the kernel closes its Unix socket, and the session's end
// takes every arena range the session held.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "kvport/client.h"
#include "kvport/server.h"
#include "kvport/ucx.h"
#include "test_node.h"

namespace kvport {
namespace {

using testing::Pattern;
using testing::SmallNodeOptions;
using testing::StartNode;

// A running shm_holder child; killed (SIGKILL) and reaped by Kill() or the destructor.
class Holder {
 public:
  explicit Holder(std::vector<std::string> args) {
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<char*> argv;
      static std::string binary = KVPORT_SHM_HOLDER;
      argv.push_back(binary.data());
      for (std::string& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    stdout_ = ::fdopen(out[0], "r");
  }
  ~Holder() {
    Kill();
    if (forked_ > 0) {
      ::kill(forked_, SIGKILL);
      ::waitpid(forked_, nullptr, 0);  // ours once its parent died: the test is a subreaper
    }
  }

  // Blocks until the child printed "ready" (true) or exited (false). With --fork-child, the
  // pid of the child it forked follows "ready" (forked()).
  bool WaitReady() {
    if (stdout_ == nullptr) return false;
    char line[64] = {};
    if (std::fgets(line, sizeof(line), stdout_) == nullptr) return false;
    if (std::string(line) == "ready\n") return true;
    int pid = 0;
    if (std::sscanf(line, "ready %d", &pid) != 1 || pid <= 0) return false;
    forked_ = pid;
    return true;
  }
  pid_t forked() const { return forked_; }
  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    if (stdout_ != nullptr) {
      std::fclose(stdout_);
      stdout_ = nullptr;
    }
  }

 private:
  pid_t pid_ = -1;
  pid_t forked_ = -1;
  FILE* stdout_ = nullptr;
};

// Whether process `pid` is alive: it exists and has not exited (a zombie has).
bool Alive(pid_t pid) {
  FILE* stat = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (stat == nullptr) return false;
  char state = 'X';
  // "PID (COMM) STATE ...": the holder's command name has no spaces or parentheses.
  const bool read = std::fscanf(stat, "%*d %*s %c", &state) == 1;
  std::fclose(stat);
  return read && state != 'Z' && state != 'X';
}

// Waits (bounded) until the node's counter `name` reads `want`: the node notices the closed
// socket on its own loop thread, shortly after the kill.
bool EventuallyEquals(const Server& server, const char* name, uint64_t want) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    if (server.Stats().Get(name) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return server.Stats().Get(name) == want;
}

ServerOptions ShmNode() {
  ServerOptions options = SmallNodeOptions();
  options.unix_socket = "auto";
  return options;
}

TEST(ShmProcessTest, AKilledClientLeavesNoLease) {
  auto server = StartNode(ShmNode());
  ASSERT_NE(server, nullptr);
  Client writer;
  ASSERT_TRUE(writer.Init("writer", server->address()).ok());
  std::vector<char> value = Pattern(1, 1 << 20);
  IOBuffers buffers;
  buffers.Append(value.data(), value.size());
  ASSERT_TRUE(writer.MSet({"held"}, buffers).ok());

  Holder holder({"lease", server->unix_socket_path(), "held"});
  ASSERT_TRUE(holder.WaitReady());
  EXPECT_EQ(server->Stats().Get("leases"), 1u);
  EXPECT_EQ(server->Stats().Get("leased_bytes"), uint64_t{1} << 20);
  holder.Kill();
  EXPECT_TRUE(EventuallyEquals(*server, "leases", 0));
  EXPECT_EQ(server->Stats().Get("leased_bytes"), 0u);
  // The object itself is untouched.
  std::vector<char> out(1 << 20);
  IOBuffers into;
  into.Append(out.data(), out.size());
  ASSERT_TRUE(writer.MGet({"held"}, {}, into).ok());
  EXPECT_EQ(out, value);
}

TEST(ShmProcessTest, AKilledClientsReservationIsAbortedAndNeverVisible) {
  auto server = StartNode(ShmNode());
  ASSERT_NE(server, nullptr);
  Holder holder({"reserve", server->unix_socket_path(), "half-written", std::to_string(1 << 20)});
  ASSERT_TRUE(holder.WaitReady());
  EXPECT_EQ(server->Stats().Get("reserved_bytes"), uint64_t{1} << 20);
  holder.Kill();
  EXPECT_TRUE(EventuallyEquals(*server, "reserved_bytes", 0));
  EXPECT_EQ(server->Stats().Get("aborted_msets"), 1u);
  Client reader;
  ASSERT_TRUE(reader.Init("reader", server->address()).ok());
  Result<BatchResult> exists = reader.MExist({"half-written"});
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(exists->codes[0], KeyCode::kKeyNotExist);
}

// A client that forked a child (a worker process) and then died: the child, still alive, does
// not keep the dead client's sessions open. A forked child's copies of the client's sockets are
// closed in it, so the node sees the sessions end when the client dies, and their lease,
// reservation and connection slots go with them.
TEST(ShmProcessTest, AForkedChildDoesNotKeepADeadClientsSessions) {
  // The holders' children become this process's when their parents are killed, to be reaped.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  auto server = StartNode(ShmNode());
  ASSERT_NE(server, nullptr);
  Client writer;
  ASSERT_TRUE(writer.Init("writer", server->address()).ok());
  std::vector<char> value = Pattern(3, 1 << 20);
  IOBuffers buffers;
  buffers.Append(value.data(), value.size());
  ASSERT_TRUE(writer.MSet({"held"}, buffers).ok());
  const uint64_t writers_connections = server->Stats().Get("connections");

  Holder leasing({"--fork-child", "lease", server->unix_socket_path(), "held"});
  ASSERT_TRUE(leasing.WaitReady());
  ASSERT_GT(leasing.forked(), 0);
  Holder reserving({"--fork-child", "reserve", server->unix_socket_path(), "half-written",
                    std::to_string(1 << 20)});
  ASSERT_TRUE(reserving.WaitReady());
  ASSERT_GT(reserving.forked(), 0);
  EXPECT_EQ(server->Stats().Get("leases"), 1u);
  EXPECT_EQ(server->Stats().Get("reserved_bytes"), uint64_t{1} << 20);
  EXPECT_GT(server->Stats().Get("connections"), writers_connections);

  leasing.Kill();
  reserving.Kill();
  EXPECT_TRUE(EventuallyEquals(*server, "leases", 0));
  EXPECT_TRUE(EventuallyEquals(*server, "reserved_bytes", 0));
  EXPECT_TRUE(EventuallyEquals(*server, "connections", writers_connections));
  // The sessions ended while the children lived on.
  EXPECT_TRUE(Alive(leasing.forked()));
  EXPECT_TRUE(Alive(reserving.forked()));
  Result<BatchResult> exists = writer.MExist({"held", "half-written"});
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(exists->codes, (std::vector<KeyCode>{KeyCode::kSuccess, KeyCode::kKeyNotExist}));
}

// The same over UCX: a client whose TCP session attached the node's UCX is killed holding a
// lease and, in another process, a reservation; the session's end takes both.
TEST(ShmProcessTest, AKilledUcxClientLeavesNoLeaseAndNoReservation) {
  ::setenv("UCX_TLS", "tcp", 1);  // the children inherit it
  if (!ProcessUcxRuntime().usable()) {
    ::unsetenv("UCX_TLS");
    GTEST_SKIP() << "no usable UCX here: " << ProcessUcxRuntime().reason();
  }
  ServerOptions options = SmallNodeOptions();
  options.ucx = true;
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  Client writer;
  ASSERT_TRUE(writer.Init("writer", server->address()).ok());
  std::vector<char> value = Pattern(2, 1 << 20);
  IOBuffers buffers;
  buffers.Append(value.data(), value.size());
  ASSERT_TRUE(writer.MSet({"held"}, buffers).ok());

  Holder leasing({"ucx-lease", server->address(), "held"});
  ASSERT_TRUE(leasing.WaitReady());
  Holder reserving({"ucx-reserve", server->address(), "half-written", std::to_string(1 << 20)});
  ASSERT_TRUE(reserving.WaitReady());
  EXPECT_EQ(server->Stats().Get("leases"), 1u);
  EXPECT_EQ(server->Stats().Get("reserved_bytes"), uint64_t{1} << 20);
  leasing.Kill();
  reserving.Kill();
  ::unsetenv("UCX_TLS");
  EXPECT_TRUE(EventuallyEquals(*server, "leases", 0));
  EXPECT_TRUE(EventuallyEquals(*server, "reserved_bytes", 0));
  Result<BatchResult> exists = writer.MExist({"held", "half-written"});
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(exists->codes, (std::vector<KeyCode>{KeyCode::kSuccess, KeyCode::kKeyNotExist}));
}

// A client that stalls between ARENA_RESERVE and ARENA_COMMIT, alive and connected, loses its
// reservation once the node's request deadline for its bytes passes: the key never appears and
// the connection stays open. The space stays reserved (quarantined) while the client, which has
// the arena mapped and may still be copying into it, is connected, and is free once it is gone.
TEST(ShmProcessTest, AStalledClientsReservationIsAbortedAtTheRequestDeadline) {
  ServerOptions options = ShmNode();
  options.request_timeout = std::chrono::milliseconds(200);
  options.min_request_bytes_per_sec = 0;  // the timeout alone
  auto server = StartNode(options);
  ASSERT_NE(server, nullptr);
  Holder holder({"reserve", server->unix_socket_path(), "stalled", std::to_string(1 << 20)});
  ASSERT_TRUE(holder.WaitReady());
  EXPECT_TRUE(EventuallyEquals(*server, "aborted_msets", 1));
  EXPECT_EQ(server->Stats().Get("reserved_bytes"), uint64_t{1} << 20);  // quarantined
  EXPECT_EQ(server->Stats().Get("connections"), 1u);  // the holder is still connected
  Client reader;
  ASSERT_TRUE(reader.Init("reader", server->address()).ok());
  Result<BatchResult> exists = reader.MExist({"stalled"});
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(exists->codes[0], KeyCode::kKeyNotExist);
  holder.Kill();
  EXPECT_TRUE(EventuallyEquals(*server, "reserved_bytes", 0));
}

}  // namespace
}  // namespace kvport
