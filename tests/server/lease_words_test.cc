// SPDX-License-Identifier: Apache-2.0
// Lease words (server/lease_words.h): a session's word moves on when the session's leases end,
// as a client mapping the memfd sees it.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "server/arena_holdings.h"
#include "server/lease_words.h"
#include "store/object_store.h"

namespace kvport::server {
namespace {

// The words as a client sees them: the memfd mapped read-only, apart from the node's mapping.
class ClientView {
 public:
  explicit ClientView(const LeaseWords& words) : bytes_(words.bytes()) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, words.fd(), 0);
    EXPECT_NE(p, MAP_FAILED);
    words_ = static_cast<const uint64_t*>(p);
  }
  ~ClientView() { ::munmap(const_cast<uint64_t*>(words_), bytes_); }
  uint64_t at(uint64_t offset) const {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(words_ + offset / 8)).load();
  }

 private:
  const uint64_t bytes_;
  const uint64_t* words_ = nullptr;
};

TEST(LeaseWordsTest, AnEndedSessionsWordMovesOnAndItsSlotNeverShowsAnOldGenerationAgain) {
  Result<std::unique_ptr<LeaseWords>> created = LeaseWords::Create(2);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  LeaseWords& words = **created;
  EXPECT_GE(words.bytes(), 2 * sizeof(uint64_t));
  ClientView client(words);

  Result<LeaseWords::Word> a = words.Take();
  Result<LeaseWords::Word> b = words.Take();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->offset, b->offset);
  EXPECT_EQ(a->offset % 8, 0u);
  EXPECT_EQ(client.at(a->offset), a->generation);
  EXPECT_EQ(words.Take().status().code(), StatusCode::kNoSpace);  // one per allowed connection

  words.End(*a);
  EXPECT_NE(client.at(a->offset), a->generation);  // what a's client checks after a copy
  EXPECT_EQ(client.at(b->offset), b->generation);  // b's session goes on

  // The slot serves the next session from where it stands; ending that one moves it again,
  // never back to a's generation.
  Result<LeaseWords::Word> c = words.Take();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->offset, a->offset);
  EXPECT_NE(c->generation, a->generation);
  words.End(*c);
  EXPECT_NE(client.at(c->offset), c->generation);
  EXPECT_NE(client.at(c->offset), a->generation);
}

// Every shared-memory client holds the lease words' memfd: its ftruncate must fail (EPERM)
// rather than shrink the words under the node, whose next End() past the new end would be a
// SIGBUS, or grow them.
TEST(LeaseWordsTest, AClientCannotResizeTheLeaseWords) {
  Result<std::unique_ptr<LeaseWords>> created = LeaseWords::Create(1024);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  LeaseWords& words = **created;
  const int fd = ::dup(words.fd());  // as a client gets it: the same open file
  ASSERT_GE(fd, 0);
  // Shrinking last: unsealed, the End() calls below would then die of SIGBUS.
  for (off_t size :
       {static_cast<off_t>(words.bytes() * 2), static_cast<off_t>(words.bytes() / 2), off_t{0}}) {
    errno = 0;
    EXPECT_EQ(::ftruncate(fd, size), -1) << "to " << size << " bytes";
    EXPECT_EQ(errno, EPERM) << "to " << size << " bytes";
  }
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), words.bytes());
  ::close(fd);
  // The node still writes every word, the last one included.
  ClientView client(words);
  std::vector<LeaseWords::Word> taken;
  for (int i = 0; i < 1024; ++i) {
    Result<LeaseWords::Word> word = words.Take();
    ASSERT_TRUE(word.ok());
    taken.push_back(*word);
  }
  for (const LeaseWords::Word& word : taken) {
    words.End(word);
    EXPECT_EQ(client.at(word.offset), word.generation + 1);
  }
}

TEST(LeaseWordsTest, ZeroSlotsAreRefused) {
  EXPECT_EQ(LeaseWords::Create(0).status().code(), StatusCode::kInvalidArgument);
}

// A session's end (ArenaHoldings::Clear) moves its word and frees what its leases pinned; a
// session that never attached has no word to move.
TEST(ArenaHoldingsTest, ASessionsEndMovesItsLeaseWordAndFreesItsLeasedBytes) {
  store::StoreOptions options;
  options.capacity_bytes = 1 << 20;
  Result<std::unique_ptr<store::ObjectStore>> created = store::ObjectStore::Create(options);
  ASSERT_TRUE(created.ok());
  store::ObjectStore& store = **created;
  auto put = [&](char fill) {
    Result<store::WriteHandle> w = store.Reserve("", "k", 4096, "", 0);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    std::memset(w->data(), fill, 4096);
    ASSERT_TRUE(store.Commit(std::move(w).value()).ok());
  };
  put('a');
  Result<store::ReadHandle> pin = store.Lookup("", "k");
  ASSERT_TRUE(pin.ok());
  put('b');  // the lease's pin is now all that keeps the first value's bytes
  const uint64_t with_lease = store.Stats().used_bytes;

  Result<std::unique_ptr<LeaseWords>> words = LeaseWords::Create(4);
  ASSERT_TRUE(words.ok());
  ClientView client(**words);
  ArenaHoldings holdings;
  Result<LeaseWords::Word> word = holdings.TakeLeaseWord(words->get());
  ASSERT_TRUE(word.ok());
  Result<LeaseWords::Word> again = holdings.TakeLeaseWord(words->get());  // a second attach
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->offset, word->offset);
  std::vector<store::ReadHandle> pins;
  pins.push_back(std::move(pin).value());
  holdings.AddLease(std::move(pins));

  EXPECT_EQ(client.at(word->offset), word->generation);
  holdings.Clear();
  EXPECT_NE(client.at(word->offset), word->generation);
  EXPECT_LT(store.Stats().used_bytes, with_lease);
  EXPECT_EQ(holdings.leases(), 0u);

  // The slot is free again for the next session.
  ArenaHoldings next;
  Result<LeaseWords::Word> reused = next.TakeLeaseWord(words->get());
  ASSERT_TRUE(reused.ok());
  EXPECT_EQ(client.at(reused->offset), reused->generation);
}

}  // namespace
}  // namespace kvport::server
