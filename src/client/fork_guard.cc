// SPDX-License-Identifier: Apache-2.0
#include "client/fork_guard.h"

#include <pthread.h>
#include <unistd.h>

#include <fmt/core.h>

#include <atomic>
#include <mutex>

namespace kvport::client {

namespace {
std::atomic<uint64_t> g_generation{0};
void OnForkChild() {
  g_generation.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

uint64_t ForkGeneration() {
  static std::once_flag registered;
  std::call_once(registered, [] { ::pthread_atfork(nullptr, nullptr, OnForkChild); });
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

}  // namespace kvport::client
