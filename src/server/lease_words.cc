// SPDX-License-Identifier: Apache-2.0
#include "server/lease_words.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "common/sealed_memfd.h"

namespace kvport::server {

Result<std::unique_ptr<LeaseWords>> LeaseWords::Create(uint32_t slots) {
  if (slots == 0) return Status::InvalidArgument("lease words: 0 slots");
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t bytes = (uint64_t{slots} * sizeof(uint64_t) + page - 1) / page * page;
  const int fd = ::memfd_create("kvport-lease-words", kMemfdSealable);
  if (fd < 0) return Status::FromErrno("lease words: memfd_create", errno);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    Status failed = Status::FromErrno("lease words: ftruncate to " + std::to_string(bytes), errno);
    ::close(fd);
    return failed;
  }
  // Every shared-memory client gets this memfd: unsealed, one could shrink it and the node's
  // next write of a word past the new end would kill it (common/sealed_memfd.h). Without the
  // seals the node offers no shared memory, and SHM_ATTACH says why.
  if (Status sealed = SealMemfdSize(fd, "lease words"); !sealed.ok()) {
    ::close(fd);
    return sealed;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    Status failed = Status::FromErrno("lease words: mmap of " + std::to_string(bytes), errno);
    ::close(fd);
    return failed;
  }
  return std::unique_ptr<LeaseWords>(new LeaseWords(fd, static_cast<uint64_t*>(p), bytes, slots));
}

LeaseWords::LeaseWords(int fd, uint64_t* words, uint64_t bytes, uint32_t slots)
    : fd_(fd), words_(words), bytes_(bytes) {
  free_.reserve(slots);
  for (uint32_t slot = slots; slot > 0; --slot)
    free_.push_back(slot - 1);  // slot 0 is taken first
}

LeaseWords::~LeaseWords() {
  ::munmap(words_, bytes_);
  ::close(fd_);
}

Result<LeaseWords::Word> LeaseWords::Take() {
  uint32_t slot = 0;
  {
    MutexLock lock(mu_);
    if (free_.empty()) {
      return Status::NoSpace("every lease word is taken (one per connection the node allows)");
    }
    slot = free_.back();
    free_.pop_back();
  }
  // Only the session holding the slot writes its word: a plain atomic load is enough.
  const uint64_t generation =
      std::atomic_ref<uint64_t>(words_[slot]).load(std::memory_order_relaxed);
  return Word{uint64_t{slot} * sizeof(uint64_t), generation};
}

void LeaseWords::End(const Word& word) {
  const size_t slot = word.offset / sizeof(uint64_t);
  // Sequentially consistent, not just release: the new generation must be visible before what
  // the caller does next (freeing the leased extents, which another session may then
  // overwrite), and a release store alone would let later accesses move ahead of it.
  std::atomic_ref<uint64_t>(words_[slot]).store(word.generation + 1, std::memory_order_seq_cst);
  MutexLock lock(mu_);
  free_.push_back(static_cast<uint32_t>(slot));
}

}  // namespace kvport::server
