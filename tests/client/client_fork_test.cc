// SPDX-License-Identifier: Apache-2.0
// A client used in a child process after fork() (vLLM's multiprocess executor, Python's fork
// start method): the parent's sockets are not open in the child; every call there fails naming
// the fork, without a byte written into the parent's connections; destroying it there returns (no
// join of reader threads the child does not have); the parent's client goes on; a client created in
// the child works. A binary of its own: ThreadSanitizer does not support threads started after a
// multi-threaded fork.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "client/socket_watcher.h"
#include "kvport/client.h"
#include "test_node.h"

namespace kvport {
namespace {

using testing::SmallNodeOptions;
using testing::StartNode;

// The child's findings, one bit each (its exit code).
enum ChildFailure : int {
  kSetWorked = 1,
  kGetWorked = 2,
  kPingWorked = 4,
  kNoForkInMessage = 8,
  kFreshInitFailed = 16,
  kFreshGetFailed = 32,
  kParentSocketOpen = 64,
};

// Whether this process has a socket open whose peer is 127.0.0.1:port (a connection to the
// node, not one of the node's own sockets, whose peers are the clients).
bool HasSocketTo(uint16_t port) {
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_in peer{};
    socklen_t length = sizeof(peer);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) == 0 &&
        peer.sin_family == AF_INET && ntohs(peer.sin_port) == port) {
      return true;
    }
  }
  return false;
}

uint16_t PortOf(const std::string& address) {
  return static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

std::string GetValue(Client& client, const std::string& key) {
  std::string out(64, '\0');
  IOBuffers buffers;
  buffers.Append(out.data(), out.size());
  Result<GetResult> got = client.MGet({key}, GetOptions{}, buffers);
  if (!got.ok() || got->codes[0] != KeyCode::kSuccess) return "(miss)";
  out.resize(got->value_sizes[0]);
  return out;
}

bool PutValue(Client& client, const std::string& key, const std::string& value) {
  IOBuffers buffers;
  buffers.Append(value.data(), value.size());
  Result<BatchResult> put = client.MSet({key}, buffers);
  return put.ok() && put->status == BatchCode::kSuccess;
}

int InChild(std::unique_ptr<Client> inherited, const std::string& address) {
  int failures = 0;
  // The parent's connections are not the child's to keep open: while a copy is, the node
  // cannot see the parent's sessions end.
  if (HasSocketTo(PortOf(address))) failures |= kParentSocketOpen;
  const std::string value = "child bytes";
  IOBuffers buffers;
  buffers.Append(value.data(), value.size());
  Result<BatchResult> put = inherited->MSet({"child"}, buffers);
  if (put.ok()) failures |= kSetWorked;
  if (!put.ok() && (put.status().code() != StatusCode::kNotSupported ||
                    put.status().message().find("after fork") == std::string::npos)) {
    failures |= kNoForkInMessage;
  }
  std::string out(64, '\0');
  IOBuffers into;
  into.Append(out.data(), out.size());
  if (inherited->MGet({"k"}, GetOptions{}, into).ok()) failures |= kGetWorked;
  if (inherited->Ping().ok()) failures |= kPingWorked;
  inherited.reset();  // must return: the parent's reader threads are not here

  Client fresh;
  if (!fresh.Init("fork-child", address).ok()) return failures | kFreshInitFailed;
  if (GetValue(fresh, "k") != "parent bytes") failures |= kFreshGetFailed;
  return failures;
}

// The child's exit code, or -1 when it did not exit within the bound (a hang).
int WaitForChild(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

TEST(ClientForkTest, AClientUsedAfterForkFailsThereAndTheParentsGoesOn) {
  std::unique_ptr<Server> server = StartNode(SmallNodeOptions());
  ASSERT_NE(server, nullptr);
  auto client = std::make_unique<Client>();
  ASSERT_TRUE(client->Init("fork-parent", server->address()).ok());
  ASSERT_TRUE(PutValue(*client, "k", "parent bytes"));

  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(InChild(std::move(client), server->address()));
  EXPECT_EQ(WaitForChild(pid), 0)
      << "bits: 1 set, 2 get, 4 ping worked in the child; 8 no fork in the message; 16/32 a new "
         "client failed; 64 the parent's socket was open in the child; -1 hung";

  // The parent's connections carry nothing of the child's: its calls go on.
  EXPECT_EQ(GetValue(*client, "k"), "parent bytes");
  ASSERT_TRUE(PutValue(*client, "after", "still fine"));
  EXPECT_EQ(GetValue(*client, "after"), "still fine");
  EXPECT_EQ(GetValue(*client, "child"), "(miss)");
  EXPECT_TRUE(client->Ping().ok());
}

// A fork while another thread is getting the process's socket watcher (opening a connection:
// it holds the watcher's lock): the child's first connection still gets a watcher of its own.
// Before, the child waited forever for a lock whose holder does not exist in the child.
TEST(ClientForkTest, AForkWhileAnotherThreadOpensAConnectionLeavesTheChildAWatcher) {
  std::mutex mu;
  std::condition_variable cv;
  bool inside = false;
  bool release = false;
  client::SocketWatcher::SetCreateHookForTesting([&] {
    std::unique_lock lock(mu);
    inside = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  std::thread opener([] { EXPECT_TRUE(client::SocketWatcher::Shared().ok()); });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return inside; }));
  }
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Result<std::shared_ptr<client::SocketWatcher>> watcher = client::SocketWatcher::Shared();
    ::_exit(watcher.ok() && *watcher != nullptr ? 0 : 1);
  }
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  opener.join();
  client::SocketWatcher::SetCreateHookForTesting(nullptr);
  EXPECT_EQ(WaitForChild(pid), 0) << "-1: the child hung on the parent's lock";
}

}  // namespace
}  // namespace kvport
