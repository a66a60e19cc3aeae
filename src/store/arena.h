// SPDX-License-Identifier: Apache-2.0
// Arena: the one block of memory that holds every value of a cache node.
//
// It is mapped once, up front, from a memfd (memfd_create + ftruncate + mmap MAP_SHARED) so
// that it can later be shared with same-host clients by passing fd() over a Unix socket, and
// registered once for RDMA (base(), size()). The memfd's size is sealed (common/sealed_memfd.h):
// a client holding the descriptor cannot shrink it under the node (a SIGBUS in the node) or
// grow it. When memfd_create is unavailable (old kernel, seccomp) or the seals are refused, the
// arena falls back to an anonymous private mapping and says so in a log line; fd() is then -1,
// same-host sharing is not possible, and unshared_reason() says why.
//
// Pages are not touched up front (no MAP_POPULATE, no memset): a 512 GiB node starts in
// milliseconds and its memory is committed by the kernel as values are first written. The
// cost is one page fault per page on first write, paid by the thread that receives the value.
// A host that overcommits may therefore run out of memory later than startup; size capacity
// below the host's free memory (see docs/store.md).
//
// Not copyable or movable: the address is handed out. Destroying the Arena unmaps it (and
// closes the fd); every pointer into it is then invalid. Thread-safe: immutable after Create.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "kvport/status.h"

namespace kvport::store {

class Arena {
 public:
  // Every Arena's size is a multiple of this, and base() is aligned to it (and to the page).
  static constexpr uint64_t kBlockBytes = 4096;

  enum class Backing {
    kAuto,       // memfd if the kernel has it, else anonymous memory (logged)
    kAnonymous,  // anonymous memory only (tests of the fallback; no fd)
  };

  // Maps an arena of `capacity_bytes` rounded DOWN to a multiple of kBlockBytes, so that used
  // bytes never exceed the configured capacity (the rounding is logged when it happens).
  // Errors: InvalidArgument when capacity_bytes < kBlockBytes (0 included); IoError (with
  // strerror) when the kernel refuses the mapping, e.g. a capacity beyond the address space.
  // `name` labels the memfd (visible in /proc/PID/fd); it is truncated to what the kernel allows.
  static Result<std::unique_ptr<Arena>> Create(uint64_t capacity_bytes,
                                               Backing backing = Backing::kAuto,
                                               const std::string& name = "kvport-arena");

  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  uint8_t* base() const { return base_; }
  uint64_t size() const { return size_; }
  // The memfd backing the arena (owned by the Arena; dup() it to keep it), or -1 if anonymous.
  int fd() const { return fd_; }
  bool shareable() const { return fd_ >= 0; }
  // Why the arena is not shareable (memfd_create failed, the seals were refused, anonymous
  // backing was asked for); empty when it is.
  const std::string& unshared_reason() const { return unshared_reason_; }

 private:
  Arena(uint8_t* base, uint64_t size, int fd, std::string unshared_reason)
      : base_(base), size_(size), fd_(fd), unshared_reason_(std::move(unshared_reason)) {}

  uint8_t* const base_;
  const uint64_t size_;
  const int fd_;
  const std::string unshared_reason_;
};

}  // namespace kvport::store
