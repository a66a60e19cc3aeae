// SPDX-License-Identifier: Apache-2.0
#include "store/arena.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kvport::store {
namespace {

TEST(ArenaTest, RejectsLessThanOneBlock) {
  EXPECT_EQ(Arena::Create(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Arena::Create(Arena::kBlockBytes - 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(ArenaTest, RoundsCapacityDownToBlocks) {
  auto arena = Arena::Create(3 * Arena::kBlockBytes + 123);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  EXPECT_EQ((*arena)->size(), 3 * Arena::kBlockBytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*arena)->base()) % Arena::kBlockBytes, 0u);
}

TEST(ArenaTest, MemfdArenaIsVisibleThroughItsFd) {
  auto arena = Arena::Create(16 * Arena::kBlockBytes);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  Arena& a = **arena;
  if (!a.shareable()) GTEST_SKIP() << "memfd_create unavailable here";
  std::memcpy(a.base() + 5000, "kvport", 6);
  // What a same-host client would do with the fd: map it and see the same bytes.
  void* view = mmap(nullptr, a.size(), PROT_READ, MAP_SHARED, a.fd(), 0);
  ASSERT_NE(view, MAP_FAILED);
  EXPECT_EQ(std::memcmp(static_cast<uint8_t*>(view) + 5000, "kvport", 6), 0);
  munmap(view, a.size());
}

// A same-host client holds the arena's memfd: its ftruncate must fail (EPERM) rather than
// shrink the arena under the node, whose next touch of a page past the new end would be a
// SIGBUS, or grow it. No holder can add seals of its own either.
TEST(ArenaTest, AShareableArenaCannotBeResizedThroughItsFd) {
  auto arena = Arena::Create(16 * Arena::kBlockBytes);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  Arena& a = **arena;
  if (!a.shareable()) GTEST_SKIP() << "not shareable here: " << a.unshared_reason();
  EXPECT_TRUE(a.unshared_reason().empty());
  // A descriptor of its own, as a client gets one over SCM_RIGHTS: the same open file.
  const int fd = ::dup(a.fd());
  ASSERT_GE(fd, 0);
  // Shrinking last: unsealed, the write below would then die of SIGBUS.
  for (off_t size : {static_cast<off_t>(a.size() + Arena::kBlockBytes),
                     static_cast<off_t>(a.size() / 2), off_t{0}}) {
    errno = 0;
    EXPECT_EQ(::ftruncate(fd, size), -1) << "to " << size << " bytes";
    EXPECT_EQ(errno, EPERM) << "to " << size << " bytes";
  }
  errno = 0;
  EXPECT_EQ(::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
  EXPECT_EQ(errno, EPERM);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), a.size());
  // Every byte is still the node's to use, the last page included.
  a.base()[a.size() - 1] = 42;
  EXPECT_EQ(a.base()[a.size() - 1], 42);
  ::close(fd);
}

TEST(ArenaTest, AnonymousBackingWorksWithoutFd) {
  auto arena = Arena::Create(4 * Arena::kBlockBytes, Arena::Backing::kAnonymous);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  EXPECT_FALSE((*arena)->shareable());
  EXPECT_EQ((*arena)->fd(), -1);
  EXPECT_FALSE((*arena)->unshared_reason().empty());
  (*arena)->base()[(*arena)->size() - 1] = 7;  // writable to the last byte
  EXPECT_EQ((*arena)->base()[(*arena)->size() - 1], 7);
}

TEST(ArenaTest, ImpossibleCapacityIsAnErrorNotACrash) {
  // 2^62 bytes: beyond any user address space today.
  auto arena = Arena::Create(uint64_t{1} << 62);
  EXPECT_FALSE(arena.ok());
  auto anon = Arena::Create(uint64_t{1} << 62, Arena::Backing::kAnonymous);
  EXPECT_FALSE(anon.ok());
}

}  // namespace
}  // namespace kvport::store
