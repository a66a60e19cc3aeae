// SPDX-License-Identifier: Apache-2.0
#include "store/arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/sealed_memfd.h"
#include "kvport/log.h"

namespace kvport::store {
namespace {

// Returns a memfd whose size can be sealed, or -1 with errno set. memfd_create is in
// glibc >= 2.27; the kernel may still lack it (ENOSYS) or a seccomp policy may refuse it (EPERM).
int CreateMemfd(const std::string& name) {
  // The kernel limits memfd names to 249 bytes; a longer one is EINVAL.
  std::string label = name.substr(0, 200);
  return memfd_create(label.c_str(), kMemfdSealable);
}

}  // namespace

Result<std::unique_ptr<Arena>> Arena::Create(uint64_t capacity_bytes, Backing backing,
                                             const std::string& name) {
  uint64_t size = capacity_bytes & ~(kBlockBytes - 1);
  if (size == 0) {
    return Status::InvalidArgument("arena capacity " + std::to_string(capacity_bytes) +
                                   " bytes is smaller than one " + std::to_string(kBlockBytes) +
                                   "-byte block");
  }
  if (size != capacity_bytes) {
    log::Info("arena: capacity {} bytes rounded down to {} bytes (a multiple of {})",
              capacity_bytes, size, kBlockBytes);
  }
  if (size > static_cast<uint64_t>(SIZE_MAX) || size > static_cast<uint64_t>(INT64_MAX)) {
    return Status::InvalidArgument("arena capacity " + std::to_string(size) +
                                   " bytes exceeds this host's address space");
  }

  int fd = -1;
  std::string unshared_reason = "the arena was asked to be anonymous memory";
  if (backing == Backing::kAuto) {
    fd = CreateMemfd(name);
    if (fd < 0) {
      unshared_reason = std::string("memfd_create failed: ") + std::strerror(errno);
    } else if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      int err = errno;
      close(fd);
      return Status::FromErrno(
          "arena: ftruncate of the memfd to " + std::to_string(size) + " bytes", err);
    } else if (Status sealed = SealMemfdSize(fd, "arena"); !sealed.ok()) {
      // An unsealed arena is never handed out: a client could shrink it under the node, whose
      // next touch of a page past the new end would kill it (common/sealed_memfd.h). The node
      // still serves, over sockets only.
      close(fd);
      fd = -1;
      unshared_reason = sealed.message();
    }
    if (fd < 0) {
      log::Warn(
          "arena: {}; using anonymous memory, so the arena cannot be shared with same-host "
          "clients",
          unshared_reason);
    }
  }

  void* p = nullptr;
  if (fd >= 0) {
    // MAP_SHARED: the same pages are what a client mapping the fd sees.
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  } else {
    // MAP_NORESERVE: like the sparse memfd, pages are committed only when first written.
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
             0);
  }
  if (p == MAP_FAILED) {
    int err = errno;
    if (fd >= 0) close(fd);
    return Status::FromErrno("arena: mmap of " + std::to_string(size) + " bytes", err);
  }
  log::Debug("arena: {} bytes at {} ({})", size, p,
             fd >= 0 ? "memfd, shareable" : "anonymous memory");
  return std::unique_ptr<Arena>(new Arena(static_cast<uint8_t*>(p), size, fd,
                                          fd >= 0 ? std::string() : std::move(unshared_reason)));
}

Arena::~Arena() {
  munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

}  // namespace kvport::store
