// SPDX-License-Identifier: Apache-2.0
// Stepwise reservations: a value reserved a step at a time as its bytes arrive,
// grown in place or moved with what was written, and counted against max_reserved_bytes only
// for what is not written yet.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "store/extent_allocator.h"
#include "store_test_util.h"

namespace kvport::store {
namespace {

using testing::Get;
using testing::kBlock;
using testing::MakeStore;
using testing::Put;

constexpr uint64_t kMiB = 1 << 20;

std::string Pattern(uint64_t size, char seed) {
  std::string s(size, '\0');
  for (uint64_t i = 0; i < size; ++i)
    s[i] = static_cast<char>(seed + (i * 7) % 251);
  return s;
}

// Writes value[from, to) into the reservation and marks it written.
void WriteRange(WriteHandle& w, const std::string& value, uint64_t from, uint64_t to) {
  ASSERT_LE(to, w.capacity());
  std::memcpy(w.data() + from, value.data() + from, to - from);
  w.MarkWritten(to);
}

TEST(ExtentAllocatorExtendTest, ExtendsIntoFreeBlocksAfterAndNeverMoves) {
  auto allocator = ExtentAllocator::Create(16 * kBlock, kBlock);
  ASSERT_TRUE(allocator.ok());
  ExtentAllocator& a = **allocator;
  std::optional<Extent> e = a.Allocate(kBlock, 8 * kBlock);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(a.Extend(&*e, 4 * kBlock));
  EXPECT_EQ(e->length, 4 * kBlock);
  EXPECT_EQ(a.used_bytes(), 4 * kBlock);
  std::optional<Extent> next = a.Allocate(kBlock);  // right after e: blocks it
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->offset, e->offset + e->length);
  const Extent before = *e;
  EXPECT_FALSE(a.Extend(&*e, 5 * kBlock));
  EXPECT_EQ(e->offset, before.offset);
  EXPECT_EQ(e->length, before.length);
  EXPECT_TRUE(a.Free(*next).ok());
  EXPECT_TRUE(a.Free(*e).ok());
  EXPECT_EQ(a.used_bytes(), 0u);
}

// The room asked for picks a hole the extent can grow into: the best fit for the room, not for
// the first bytes.
TEST(ExtentAllocatorExtendTest, RoomPicksAHoleLargeEnoughForTheWholeValue) {
  auto allocator = ExtentAllocator::Create(32 * kBlock, kBlock);
  ASSERT_TRUE(allocator.ok());
  ExtentAllocator& a = **allocator;
  auto small = a.Allocate(2 * kBlock);  // [0, 2)
  auto wall = a.Allocate(kBlock);       // [2, 3)
  ASSERT_TRUE(small && wall);
  ASSERT_TRUE(a.Free(*small).ok());  // holes: [0, 2) and [3, 32)
  auto with_room = a.Allocate(kBlock, 8 * kBlock);
  ASSERT_TRUE(with_room.has_value());
  EXPECT_EQ(with_room->offset, 24 * kBlock);  // the hole's last 8 blocks: it grows to its end
  auto without = a.Allocate(kBlock);
  ASSERT_TRUE(without.has_value());
  EXPECT_EQ(without->offset, 0u);
  EXPECT_FALSE(a.Allocate(kBlock, 30 * kBlock, /*room_required=*/true).has_value());
}

// Two reservations placed with room in the same hole leave each other room: the second takes
// the end of what the first left, so both grow in place to their whole size. (At the front of
// the hole, the second lay right after the first and blocked its growth.)
TEST(ExtentAllocatorExtendTest, ReservationsPlacedWithRoomDoNotBlockEachOther) {
  auto allocator = ExtentAllocator::Create(32 * kBlock, kBlock);
  ASSERT_TRUE(allocator.ok());
  ExtentAllocator& a = **allocator;
  auto first = a.Allocate(kBlock, 8 * kBlock);
  auto second = a.Allocate(kBlock, 8 * kBlock);
  ASSERT_TRUE(first && second);
  Extent one = *first;
  Extent two = *second;
  EXPECT_TRUE(a.Extend(&one, 8 * kBlock));
  EXPECT_TRUE(a.Extend(&two, 8 * kBlock));
  EXPECT_EQ(a.used_bytes(), 16 * kBlock);
}

// Two values received at once, their steps interleaved as two connections' MSETs are, into an
// empty store and then into a full one (whose objects are evicted step by step): each grows in
// place, nothing is copied. Before, each step of one moved the other (a 32 MiB value was copied
// about once more in all: docs/performance.md).
TEST(StoreStepwiseTest, InterleavedReservationsGrowInPlaceInAnEmptyAndAFullStore) {
  auto store = MakeStore(4096);  // 16 MiB
  const std::string a = Pattern(4 * kMiB, 'a');
  const std::string b = Pattern(4 * kMiB, 'b');
  for (int round = 0; round < 3; ++round) {  // rounds 1 and 2 evict round 0's and 1's values
    const std::string suffix = std::to_string(round);
    Result<WriteHandle> wa = store->Reserve("ns", "a" + suffix, a.size(), "", kNoExpiry, kMiB / 2);
    Result<WriteHandle> wb = store->Reserve("ns", "b" + suffix, b.size(), "", kNoExpiry, kMiB / 2);
    ASSERT_TRUE(wa.ok() && wb.ok());
    for (uint64_t written = kMiB / 2; written < a.size(); written += kMiB / 2) {
      WriteRange(*wa, a, written - kMiB / 2, written);
      ASSERT_TRUE(store->Grow(*wa, written + kMiB / 2).ok());
      WriteRange(*wb, b, written - kMiB / 2, written);
      ASSERT_TRUE(store->Grow(*wb, written + kMiB / 2).ok());
    }
    WriteRange(*wa, a, a.size() - kMiB / 2, a.size());
    WriteRange(*wb, b, b.size() - kMiB / 2, b.size());
    ASSERT_TRUE(store->Commit(std::move(*wa)).ok());
    ASSERT_TRUE(store->Commit(std::move(*wb)).ok());
    // Fill what is left with values of the same size (a model's KV chunks are), so that the
    // next round finds a full store.
    for (int i = 0; store->Stats().used_bytes + 4 * kMiB <= 16 * kMiB; ++i)
      ASSERT_TRUE(Put(*store, "fill" + suffix, std::to_string(i), Pattern(4 * kMiB, 'f')).ok());
    EXPECT_EQ(store->Stats().reservation_moves, 0u) << "round " << round;
    EXPECT_EQ(Get(*store, "ns", "a" + suffix), a);
    EXPECT_EQ(Get(*store, "ns", "b" + suffix), b);
  }
  EXPECT_GT(store->Stats().evictions, 0u);
}

TEST(StoreStepwiseTest, AValueReservedInStepsGrowsInPlaceAndCommitsWhole) {
  auto store = MakeStore(4096);  // 16 MiB
  const std::string value = Pattern(8 * kMiB + 100, 'a');
  Result<WriteHandle> w = store->Reserve("ns", "k", value.size(), "m", kNoExpiry, kMiB);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->capacity(), kMiB);
  EXPECT_EQ(w->size(), value.size());
  EXPECT_EQ(store->Stats().reserved_unwritten_bytes, kMiB);
  uint8_t* const data = w->data();
  WriteRange(*w, value, 0, kMiB);
  EXPECT_EQ(store->Stats().reserved_unwritten_bytes, 0u);
  ASSERT_TRUE(store->Grow(*w, 4 * kMiB).ok());
  EXPECT_EQ(w->data(), data);  // in place
  EXPECT_EQ(w->capacity(), 4 * kMiB);
  EXPECT_EQ(store->Stats().reserved_unwritten_bytes, 3 * kMiB);
  WriteRange(*w, value, kMiB, 4 * kMiB);
  // Not grown to the whole value: it cannot become visible.
  EXPECT_EQ(store->Commit(std::move(*w)).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(w->valid());
  ASSERT_TRUE(store->Grow(*w, value.size()).ok());
  EXPECT_EQ(w->capacity(), value.size());
  WriteRange(*w, value, 4 * kMiB, value.size());
  ASSERT_TRUE(store->Commit(std::move(*w)).ok());
  EXPECT_EQ(Get(*store, "ns", "k"), value);
  const StoreStats s = store->Stats();
  EXPECT_EQ(s.reservation_moves, 0u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.reserved_unwritten_bytes, 0u);
}

// A reservation that cannot grow in place (another one sits right after it) moves, and what
// was marked written moves with it.
TEST(StoreStepwiseTest, AReservationThatCannotGrowInPlaceMovesWithItsWrittenBytes) {
  auto store = MakeStore(4096);
  const std::string value = Pattern(6 * kMiB, 'b');
  Result<WriteHandle> w = store->Reserve("ns", "big", value.size(), "", kNoExpiry, kMiB);
  ASSERT_TRUE(w.ok());
  Result<WriteHandle> neighbour = store->Reserve("ns", "small", kBlock, "", kNoExpiry);
  ASSERT_TRUE(neighbour.ok());
  ASSERT_EQ(neighbour->data(), w->data() + kMiB);  // right after it
  WriteRange(*w, value, 0, kMiB);
  uint8_t* const before = w->data();
  ASSERT_TRUE(store->Grow(*w, value.size()).ok());
  EXPECT_NE(w->data(), before);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(w->data()), kMiB), value.substr(0, kMiB));
  WriteRange(*w, value, kMiB, value.size());
  ASSERT_TRUE(store->Commit(std::move(*w)).ok());
  std::memset(neighbour->data(), 's', kBlock);
  ASSERT_TRUE(store->Commit(std::move(*neighbour)).ok());
  EXPECT_EQ(Get(*store, "ns", "big"), value);
  EXPECT_EQ(Get(*store, "ns", "small"), std::string(kBlock, 's'));
  const StoreStats s = store->Stats();
  EXPECT_EQ(s.reservation_moves, 1u);
  EXPECT_EQ(s.reservation_moved_bytes, kMiB);
}

// A full store evicts for a stepwise reservation's first step only, not for the whole value it
// announces.
TEST(StoreStepwiseTest, AFirstStepEvictsOnlyForItself) {
  auto store = MakeStore(16 * 256);  // 16 MiB, filled with 16 objects of 1 MiB
  for (int i = 0; i < 16; ++i)
    ASSERT_TRUE(Put(*store, "", "o" + std::to_string(i), Pattern(kMiB, 'o')).ok());
  Result<WriteHandle> w = store->Reserve("", "huge", 16 * kMiB, "", kNoExpiry, kMiB);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(store->Stats().evictions, 1u);
  EXPECT_EQ(store->Stats().objects, 15u);
  // The whole value at once (what reserving on a peer's announcement would cost) empties the
  // store.
  w = WriteHandle();
  Result<WriteHandle> whole = store->Reserve("", "huge", 16 * kMiB, "", kNoExpiry);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(store->Stats().objects, 0u);
}

// max_reserved_bytes counts what is reserved and not yet written: a value larger than the cap
// is written step by step, while reserving far ahead of the written bytes is refused.
TEST(StoreStepwiseTest, TheReservedCapCountsOnlyUnwrittenBytes) {
  StoreOptions options;
  options.capacity_bytes = 16 * kMiB;
  options.max_reserved_bytes = 2 * kMiB;
  auto created = ObjectStore::Create(options);
  ASSERT_TRUE(created.ok());
  ObjectStore& store = **created;
  const std::string value = Pattern(8 * kMiB, 'c');
  Result<WriteHandle> w = store.Reserve("", "k", value.size(), "", kNoExpiry, kMiB);
  ASSERT_TRUE(w.ok());
  // Two more MiB ahead of nothing written: over the cap, refused, the handle unchanged.
  EXPECT_EQ(store.Grow(*w, 3 * kMiB).code(), StatusCode::kNoSpace);
  EXPECT_EQ(w->capacity(), kMiB);
  EXPECT_EQ(store.Stats().reserve_cap_refusals, 1u);
  for (uint64_t at = 0; at < value.size(); at += kMiB) {
    ASSERT_TRUE(store.Grow(*w, at + kMiB).ok()) << at;
    WriteRange(*w, value, at, at + kMiB);
    EXPECT_LE(store.Stats().reserved_unwritten_bytes, 2 * kMiB);
  }
  ASSERT_TRUE(store.Commit(std::move(*w)).ok());
  EXPECT_EQ(Get(store, "", "k"), value);
}

// Aborting a stepwise reservation (its writer gone) frees what it grew to and leaves no trace.
TEST(StoreStepwiseTest, AnAbortedStepwiseReservationLeavesNothing) {
  auto store = MakeStore(4096);
  const std::string value = Pattern(4 * kMiB, 'd');
  {
    Result<WriteHandle> w = store->Reserve("", "k", value.size(), "", kNoExpiry, kMiB);
    ASSERT_TRUE(w.ok());
    WriteRange(*w, value, 0, kMiB);
    ASSERT_TRUE(store->Grow(*w, 2 * kMiB).ok());
  }
  const StoreStats s = store->Stats();
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.reserved_unwritten_bytes, 0u);
  EXPECT_FALSE(Get(*store, "", "k").has_value());
}

}  // namespace
}  // namespace kvport::store
