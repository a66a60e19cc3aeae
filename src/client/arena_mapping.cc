// SPDX-License-Identifier: Apache-2.0
#include "client/arena_mapping.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <string>

namespace kvport::client {

Result<std::shared_ptr<ArenaMapping>> ArenaMapping::Map(net::Socket memfd, uint64_t announced_bytes,
                                                        net::Socket lease_words) {
  struct stat st {};
  if (::fstat(memfd.fd(), &st) < 0) return Status::FromErrno("fstat of the node's arena", errno);
  if (announced_bytes == 0 || static_cast<uint64_t>(st.st_size) != announced_bytes) {
    return Status::Corruption("the node announced an arena of " + std::to_string(announced_bytes) +
                              " bytes, but the descriptor it passed holds " +
                              std::to_string(st.st_size));
  }
  void* read = ::mmap(nullptr, announced_bytes, PROT_READ, MAP_SHARED, memfd.fd(), 0);
  if (read == MAP_FAILED) return Status::FromErrno("mapping the node's arena read-only", errno);
  void* write = ::mmap(nullptr, announced_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd.fd(), 0);
  if (write == MAP_FAILED) {
    Status failed = Status::FromErrno("mapping the node's arena read-write", errno);
    ::munmap(read, announced_bytes);
    return failed;
  }
  void* words = nullptr;
  uint64_t words_bytes = 0;
  if (lease_words.valid()) {
    struct stat ws {};
    Status failed = Status::Ok();
    if (::fstat(lease_words.fd(), &ws) < 0) {
      failed = Status::FromErrno("fstat of the node's lease words", errno);
    } else if (ws.st_size <= 0 || ws.st_size % sizeof(uint64_t) != 0) {
      failed = Status::Corruption("the node's lease words are " + std::to_string(ws.st_size) +
                                  " bytes, not a positive multiple of 8");
    } else {
      words_bytes = static_cast<uint64_t>(ws.st_size);
      words = ::mmap(nullptr, words_bytes, PROT_READ, MAP_SHARED, lease_words.fd(), 0);
      if (words == MAP_FAILED) failed = Status::FromErrno("mapping the node's lease words", errno);
    }
    if (!failed.ok()) {
      ::munmap(read, announced_bytes);
      ::munmap(write, announced_bytes);
      return failed;
    }
  }
  // The mappings keep the memfds alive; the descriptors close here.
  return std::shared_ptr<ArenaMapping>(new ArenaMapping(
      static_cast<const uint8_t*>(read), static_cast<uint8_t*>(write), announced_bytes, st.st_ino,
      static_cast<const uint64_t*>(words), words_bytes));
}

ArenaMapping::~ArenaMapping() {
  ::munmap(const_cast<uint8_t*>(read_), size_);
  ::munmap(write_, size_);
  if (lease_words_ != nullptr) ::munmap(const_cast<uint64_t*>(lease_words_), lease_words_bytes_);
}

Result<const uint64_t*> ArenaMapping::LeaseWord(uint64_t offset) const {
  if (lease_words_ == nullptr) {
    return Status::NotSupported("the node passed no lease words (protocol version below 6)");
  }
  if (offset % sizeof(uint64_t) != 0 || offset >= lease_words_bytes_) {
    return Status::Corruption("the node named lease word " + std::to_string(offset) +
                              ", not an aligned word of its " + std::to_string(lease_words_bytes_) +
                              " bytes of lease words");
  }
  return lease_words_ + offset / sizeof(uint64_t);
}

bool ArenaMapping::LeaseWordHeld(const uint64_t* word, uint64_t generation) {
  // A seqlock reader's check: the leased bytes were read before this fence, the word after it.
  // The node moves the word on before it frees any of the session's leased bytes, so a copy that
  // read a byte written after that free finds the word moved.
#if defined(__SANITIZE_THREAD__)
// GCC warns that ThreadSanitizer does not model fences (-Wtsan). The fence is still emitted and
// still orders the reads; TSan has nothing to check across it (the word is written through the
// node's own mapping, which TSan cannot tell is the same memory).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
  std::atomic_thread_fence(std::memory_order_acquire);
#if defined(__SANITIZE_THREAD__)
#pragma GCC diagnostic pop
#endif
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(word)).load(std::memory_order_relaxed) ==
         generation;
}

Status ArenaMapping::CheckRange(uint64_t offset, uint64_t length) const {
  if (offset > size_ || length > size_ - offset) {
    return Status::Corruption("the node named arena bytes [" + std::to_string(offset) + ", +" +
                              std::to_string(length) + ") outside its " + std::to_string(size_) +
                              "-byte arena");
  }
  return Status::Ok();
}

Result<const uint8_t*> ArenaMapping::ReadRange(uint64_t offset, uint64_t length) const {
  KVPORT_RETURN_IF_ERROR(CheckRange(offset, length));
  return read_ + offset;
}

Result<uint8_t*> ArenaMapping::WriteRange(uint64_t offset, uint64_t length) const {
  KVPORT_RETURN_IF_ERROR(CheckRange(offset, length));
  return write_ + offset;
}

Result<std::shared_ptr<ArenaMapping>> ArenaMapper::Map(net::Socket memfd, uint64_t announced_bytes,
                                                       net::Socket lease_words) {
  struct stat st {};
  if (::fstat(memfd.fd(), &st) < 0) return Status::FromErrno("fstat of the node's arena", errno);
  std::lock_guard lock(mu_);
  if (std::shared_ptr<ArenaMapping> last = last_.lock();
      last != nullptr && last->inode() == st.st_ino && last->size() == announced_bytes &&
      last->has_lease_words() == lease_words.valid()) {
    return last;  // the descriptors close: the mapping we have is of the same arena
  }
  KVPORT_ASSIGN_OR_RETURN(
      std::shared_ptr<ArenaMapping> mapped,
      ArenaMapping::Map(std::move(memfd), announced_bytes, std::move(lease_words)));
  last_ = mapped;
  return mapped;
}

}  // namespace kvport::client
