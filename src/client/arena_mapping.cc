// SPDX-License-Identifier: Apache-2.0
#include "client/arena_mapping.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>

namespace kvport::client {

Result<std::shared_ptr<ArenaMapping>> ArenaMapping::Map(net::Socket memfd,
                                                        uint64_t announced_bytes) {
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
  // The mappings keep the memfd alive; the descriptor closes here.
  return std::shared_ptr<ArenaMapping>(new ArenaMapping(
      static_cast<const uint8_t*>(read), static_cast<uint8_t*>(write), announced_bytes, st.st_ino));
}

ArenaMapping::~ArenaMapping() {
  ::munmap(const_cast<uint8_t*>(read_), size_);
  ::munmap(write_, size_);
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

Result<std::shared_ptr<ArenaMapping>> ArenaMapper::Map(net::Socket memfd,
                                                       uint64_t announced_bytes) {
  struct stat st {};
  if (::fstat(memfd.fd(), &st) < 0) return Status::FromErrno("fstat of the node's arena", errno);
  std::lock_guard lock(mu_);
  if (std::shared_ptr<ArenaMapping> last = last_.lock();
      last != nullptr && last->inode() == st.st_ino && last->size() == announced_bytes) {
    return last;  // `memfd` closes: the mapping we have is of the same arena
  }
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<ArenaMapping> mapped,
                          ArenaMapping::Map(std::move(memfd), announced_bytes));
  last_ = mapped;
  return mapped;
}

}  // namespace kvport::client
