// SPDX-License-Identifier: Apache-2.0
// ArenaMapping: a same-host node's arena, mapped into this process.
//
// The node passes its arena's memfd over the Unix socket (SHM_ATTACH). The client maps it twice:
// read-only for reading values (ARENA_GET leases, and the read-in-place API, whose views a caller
// cannot write through by mistake: a stray write faults instead of corrupting a shared value),
// and read-write for filling the extents the node reserved for this client's puts (ARENA_RESERVE).
// Nothing checks in the kernel that a client writes only its reservations: the whole arena is
// writable through the descriptor, which is why the node hands it only to processes of its own
// user (docs/security.md). This class is where kvport's client keeps to the rule: every range
// it reads or writes is checked against the mapping's size, and offsets come only from the
// node's answers.
//
// With protocol version 6 the node passes a second memfd with the arena's: its sessions' lease
// words (server/lease_words.h), mapped here read-only beside the arena. A session's word holds
// the generation SHM_ATTACH named until the node ends that session's leases; LeaseWordHeld says,
// after a copy out of the arena, whether it still does.
//
// Thread-safe: immutable after Map.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>

#include "kvport/status.h"
#include "net/socket.h"

namespace kvport::client {

class ArenaMapping {
 public:
  // Maps `memfd` (adopted) of `announced_bytes`, and `lease_words` (adopted; invalid: the node
  // speaks a version without them). Corruption when the node's announcement does not match the
  // descriptor's size (reading past a memfd's end would fault); IoError when a mapping fails.
  static Result<std::shared_ptr<ArenaMapping>> Map(net::Socket memfd, uint64_t announced_bytes,
                                                   net::Socket lease_words);
  ~ArenaMapping();
  ArenaMapping(const ArenaMapping&) = delete;
  ArenaMapping& operator=(const ArenaMapping&) = delete;

  uint64_t size() const { return size_; }
  // Which arena this is: the memfd's inode (a restarted node has another one).
  ino_t inode() const { return inode_; }

  // [offset, offset + length) through the read-only / read-write mapping; Corruption when the
  // range is not inside the arena (a node that broke the protocol).
  Result<const uint8_t*> ReadRange(uint64_t offset, uint64_t length) const;
  Result<uint8_t*> WriteRange(uint64_t offset, uint64_t length) const;

  bool has_lease_words() const { return lease_words_ != nullptr; }
  // The lease word at byte `offset` of the lease words' memfd; Corruption when it is not inside
  // it or not 8-byte aligned, NotSupported without lease words.
  Result<const uint64_t*> LeaseWord(uint64_t offset) const;
  // Whether `word` (from LeaseWord) still holds `generation`: called after reading leased bytes
  // (an acquire fence orders those reads before the load), true means none of them had been
  // freed by the node when they were read.
  static bool LeaseWordHeld(const uint64_t* word, uint64_t generation);

 private:
  ArenaMapping(const uint8_t* read, uint8_t* write, uint64_t size, ino_t inode,
               const uint64_t* lease_words, uint64_t lease_words_bytes)
      : read_(read),
        write_(write),
        size_(size),
        inode_(inode),
        lease_words_(lease_words),
        lease_words_bytes_(lease_words_bytes) {}
  Status CheckRange(uint64_t offset, uint64_t length) const;

  const uint8_t* const read_;
  uint8_t* const write_;
  const uint64_t size_;
  const ino_t inode_;
  const uint64_t* const lease_words_;  // read-only; null without lease words
  const uint64_t lease_words_bytes_;
};

// Maps each arena once per process: every connection to a node attaches on its own and gets a
// descriptor of the same memfd, which this turns into the one shared mapping.
class ArenaMapper {
 public:
  Result<std::shared_ptr<ArenaMapping>> Map(net::Socket memfd, uint64_t announced_bytes,
                                            net::Socket lease_words);

 private:
  std::mutex mu_;
  std::weak_ptr<ArenaMapping> last_;  // guarded by mu_
};

}  // namespace kvport::client
