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
//
// The same handler takes the parent's sockets to nodes away from the child. A node ends a
// session (releasing its leases, aborting its reservations, freeing its connection slot) when it
// reads end-of-file, which comes only once every copy of the client's socket is closed: a child
// that kept its copies (a worker that outlives a crashed parent) would hold the dead parent's
// sessions for as long as it lives. So every socket a Connection opens is listed here
// (KeepFromForkedChildren) and, in a forked child, replaced by a descriptor of nothing. A socket
// still being connected by another thread at the moment of the fork is not listed yet and stays
// in the child.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "kvport/status.h"
#include "net/stream.h"

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

// Lists `fd`, a socket to a node this process owns: a child forked from now on does not keep
// it open (its number there holds a descriptor on which every read and write fails).
void KeepFromForkedChildren(int fd);
// Closes `stream` and takes its socket off the list in one step, so that a fork in between
// cannot leave a child a copy, nor the list a number that the process may reuse for a file of
// its own.
void CloseKeptFromForkedChildren(net::Stream& stream);

}  // namespace kvport::client
