// SPDX-License-Identifier: Apache-2.0
// ForkGuard: tells a client that it is being used in a child process after fork().
//
// fork() copies a client's sockets, request ids, pending calls and reader state into the child,
// but not its threads. Used there, the client would write into connections the parent uses
// (interleaving two processes' frames on one stream), wait for answers that no socket watcher
// will ever deliver, and, when destroyed, join threads that do not exist (a hang) and shut down
// sockets the parent still reads. vLLM's multiprocess executor and Python's multiprocessing
// with the fork start method do exactly this. So a client records the fork generation when it
// connects, and every call made in another generation fails with a clear error; its destruction
// there abandons what it holds instead of touching it (docs/client.md, "Fork").
//
// The generation is a process-wide counter that a pthread_atfork child handler increments: one
// relaxed atomic load per call, where getpid() would be a system call.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "kvport/status.h"

namespace kvport::client {

// How many forks separate this process from the one that first asked (0 there).
uint64_t ForkGeneration();

class ForkGuard {
 public:
  // Belongs to the calling process from now on.
  ForkGuard();
  // True in a child process forked after construction.
  bool forked() const { return ForkGeneration() != generation_; }
  // OK in the constructing process; in a forked child, NotSupported naming `what`.
  Status Check(const char* what) const;

 private:
  uint64_t generation_;
  pid_t pid_;
};

}  // namespace kvport::client
