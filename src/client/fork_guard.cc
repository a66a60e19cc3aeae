// SPDX-License-Identifier: Apache-2.0
#include "client/fork_guard.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace kvport::client {

namespace {

std::atomic<uint64_t> g_generation{0};

// The sockets this process's connections own. Locked across fork() (the prepare handler), so
// the list the child handler walks is whole, never one another thread was changing.
std::mutex g_sockets_mu;
std::vector<int>& Sockets() {
  static auto* sockets = new std::vector<int>();  // never destroyed: atfork handlers outlive exit
  return *sockets;
}

void BeforeFork() {
  g_sockets_mu.lock();
}

void AfterForkInParent() {
  g_sockets_mu.unlock();
}

void AfterForkInChild() {
  g_generation.fetch_add(1, std::memory_order_relaxed);
  // The child's copies of the parent's sockets go: while one is open the node never sees the
  // session end, and keeps its leases, reservations and connection slot for as long as the
  // child lives, past the parent's death. Each number is taken over by a descriptor of nothing
  // (O_PATH: reads and writes on it fail with EBADF) rather than closed, so that a leftover
  // object the child destroys closes that placeholder, never a descriptor the child opened
  // since under the same number. Only async-signal-safe calls here (the parent may have had
  // threads).
  std::vector<int>& sockets = Sockets();
  const int nothing = ::open("/", O_PATH | O_CLOEXEC);
  for (int fd : sockets) {
    if (nothing < 0 || ::dup3(nothing, fd, O_CLOEXEC) < 0) ::close(fd);
  }
  if (nothing >= 0) ::close(nothing);
  sockets.clear();  // keeps its memory: no free() in the child handler
  g_sockets_mu.unlock();
}

void RegisterForkHandlers() {
  static std::once_flag registered;
  std::call_once(registered,
                 [] { ::pthread_atfork(BeforeFork, AfterForkInParent, AfterForkInChild); });
}

}  // namespace

uint64_t ForkGeneration() {
  RegisterForkHandlers();
  return g_generation.load(std::memory_order_relaxed);
}

ForkGuard::ForkGuard() : generation_(ForkGeneration()), pid_(::getpid()) {}

Status ForkGuard::Check(const char* what) const {
  if (!forked()) return Status::Ok();
  return Status::NotSupported(fmt::format(
      "{}: client used after fork(): it was created in process {} and its connections are "
      "that process's; create a new client in this one (pid {}; docs/client.md, \"Fork\")",
      what, pid_, ::getpid()));
}

void KeepFromForkedChildren(int fd) {
  RegisterForkHandlers();
  std::lock_guard lock(g_sockets_mu);
  Sockets().push_back(fd);
}

void CloseKeptFromForkedChildren(net::Stream& stream) {
  std::lock_guard lock(g_sockets_mu);
  std::vector<int>& sockets = Sockets();
  if (auto it = std::find(sockets.begin(), sockets.end(), stream.fd()); it != sockets.end()) {
    *it = sockets.back();
    sockets.pop_back();
  }
  stream.Close();
}

}  // namespace kvport::client
