// SPDX-License-Identifier: Apache-2.0
// LeaseWords: the words that tell a shared-memory client its leases have ended.
//
// A client reads a leased value through its own mapping of the arena (ARENA_GET), with no lock
// the node can see. The node frees a lease's bytes when the client releases it or when the
// session ends (the client closed, was killed, broke the protocol, or the node stopped), and
// the second kind can come while the client is still copying. Checking the connection before
// the copy cannot catch that; a word the client checks *after* it copied can, the way a seqlock
// reader does: each session with shared memory has a word in a memfd every attached client
// maps read-only, holding the generation the session was given at SHM_ATTACH; the node writes
// the next generation into it before it frees any of the session's leased bytes. A copy that
// the client finds the word unchanged after (an acquire fence, then the load) read no byte the
// node had freed. docs/protocol.md, "Version 6".
//
// One word per session (a slot, taken at SHM_ATTACH, given back when the session ends); a slot
// keeps counting up across the sessions that use it, so a client holding an old session's
// generation never sees it again. There are as many slots as the node has connections.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/thread_annotations.h"
#include "kvport/status.h"

namespace kvport::server {

class LeaseWords {
 public:
  // A memfd of `slots` words (rounded up to whole pages), its size sealed (no holder can shrink
  // or grow it), mapped read-write here. IoError when the kernel refuses the memfd, the seals or
  // the mapping; InvalidArgument for 0 slots.
  static Result<std::unique_ptr<LeaseWords>> Create(uint32_t slots);
  ~LeaseWords();
  LeaseWords(const LeaseWords&) = delete;
  LeaseWords& operator=(const LeaseWords&) = delete;

  // The memfd clients map (owned; valid while this object lives), and its size.
  int fd() const { return fd_; }
  uint64_t bytes() const { return bytes_; }

  struct Word {
    uint64_t offset = 0;      // byte offset of the word in the memfd (8-byte aligned)
    uint64_t generation = 0;  // the value the word holds while the session's leases may stand
  };
  // A slot for a new session. NoSpace when every slot is taken.
  Result<Word> Take() EXCLUDES(mu_);
  // The session that took `word` is ending: the word moves to the next generation, visible
  // before anything the caller does after (freeing the session's leased bytes), and its slot is
  // free again.
  void End(const Word& word) EXCLUDES(mu_);

 private:
  LeaseWords(int fd, uint64_t* words, uint64_t bytes, uint32_t slots);

  const int fd_;
  uint64_t* const words_;
  const uint64_t bytes_;
  Mutex mu_;
  std::vector<uint32_t> free_ GUARDED_BY(mu_);  // slots no session holds
};

}  // namespace kvport::server
