// SPDX-License-Identifier: Apache-2.0
#include "store/extent_allocator.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace kvport::store {
namespace {

constexpr uint64_t kBlock = 4096;

std::unique_ptr<ExtentAllocator> Make(uint64_t blocks) {
  auto a = ExtentAllocator::Create(blocks * kBlock, kBlock);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return std::move(a).value();
}

TEST(ExtentAllocatorTest, CreateRejectsBadGeometry) {
  EXPECT_EQ(ExtentAllocator::Create(0, kBlock).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExtentAllocator::Create(kBlock * 3 + 1, kBlock).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ExtentAllocator::Create(kBlock * 3, 3000).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(ExtentAllocator::Create(kBlock * 3, kBlock).ok());
}

TEST(ExtentAllocatorTest, RoundsUpToBlocksAndTracksUsage) {
  auto a = Make(8);
  auto e = a->Allocate(1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->offset, 0u);
  EXPECT_EQ(e->length, kBlock);
  auto f = a->Allocate(kBlock + 1);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->offset, kBlock);
  EXPECT_EQ(f->length, 2 * kBlock);
  EXPECT_EQ(a->used_bytes(), 3 * kBlock);
  EXPECT_EQ(a->Stats().live_extents, 2u);
  ASSERT_TRUE(a->Free(*e).ok());
  ASSERT_TRUE(a->Free(*f).ok());
  AllocatorStats s = a->Stats();
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(s.free_extents, 1u);
  EXPECT_EQ(s.largest_free_bytes, 8 * kBlock);
}

TEST(ExtentAllocatorTest, ZeroBytesIsTheEmptyExtentAndCostsNothing) {
  auto a = Make(1);
  auto all = a->Allocate(kBlock);
  ASSERT_TRUE(all);
  auto empty = a->Allocate(0);  // even when full
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->length, 0u);
  EXPECT_TRUE(a->Free(*empty).ok());
  EXPECT_EQ(a->used_bytes(), kBlock);
}

TEST(ExtentAllocatorTest, RefusesWhatDoesNotFit) {
  auto a = Make(4);
  EXPECT_FALSE(a->Allocate(4 * kBlock + 1));
  EXPECT_FALSE(a->Allocate(UINT64_MAX));  // no overflow in rounding
  ASSERT_TRUE(a->Allocate(3 * kBlock));
  EXPECT_FALSE(a->Allocate(2 * kBlock));
  EXPECT_TRUE(a->Allocate(kBlock));
  EXPECT_FALSE(a->Allocate(1));
}

TEST(ExtentAllocatorTest, FreeCoalescesWithBothNeighbours) {
  auto a = Make(3);
  auto x = a->Allocate(kBlock), y = a->Allocate(kBlock), z = a->Allocate(kBlock);
  ASSERT_TRUE(x && y && z);
  ASSERT_TRUE(a->Free(*x).ok());
  ASSERT_TRUE(a->Free(*z).ok());
  EXPECT_EQ(a->Stats().free_extents, 2u);
  EXPECT_FALSE(a->Allocate(2 * kBlock));  // two holes of one block are not one of two
  ASSERT_TRUE(a->Free(*y).ok());          // the middle joins both
  AllocatorStats s = a->Stats();
  EXPECT_EQ(s.free_extents, 1u);
  EXPECT_EQ(s.largest_free_bytes, 3 * kBlock);
  EXPECT_TRUE(a->Allocate(3 * kBlock));
}

TEST(ExtentAllocatorTest, BestFitKeepsTheLargeHoleWhole) {
  // Layout: [A 2][b 1][C 4][d 1]: free A and C; a 2-block request must take A, not split C.
  auto a = Make(8);
  auto big_a = a->Allocate(2 * kBlock), b = a->Allocate(kBlock);
  auto big_c = a->Allocate(4 * kBlock), d = a->Allocate(kBlock);
  ASSERT_TRUE(big_a && b && big_c && d);
  ASSERT_TRUE(a->Free(*big_c).ok());
  ASSERT_TRUE(a->Free(*big_a).ok());
  auto e = a->Allocate(2 * kBlock);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->offset, big_a->offset);
  EXPECT_EQ(a->Stats().largest_free_bytes, 4 * kBlock);
}

TEST(ExtentAllocatorTest, RejectsDoubleFreeAndForeignExtents) {
  auto a = Make(4);
  auto x = a->Allocate(2 * kBlock);
  ASSERT_TRUE(x);
  ASSERT_TRUE(a->Free(*x).ok());
  EXPECT_EQ(a->Free(*x).code(), StatusCode::kInternal);
  EXPECT_EQ(a->Free({kBlock, 100}).code(), StatusCode::kInternal);                // not blocks
  EXPECT_EQ(a->Free({4 * kBlock, kBlock}).code(), StatusCode::kInternal);         // outside
  EXPECT_EQ(a->Free({UINT64_MAX - 4095, kBlock}).code(), StatusCode::kInternal);  // wraps
  AllocatorStats s = a->Stats();  // nothing changed by the refused frees
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(s.free_extents, 1u);
}

// Random allocate/free: the free list never holds touching holes, and everything adds up.
TEST(ExtentAllocatorTest, RandomWorkloadKeepsInvariants) {
  constexpr uint64_t kBlocks = 1024;
  auto a = Make(kBlocks);
  std::mt19937_64 rng(42);
  std::vector<Extent> live;
  uint64_t live_bytes = 0;
  for (int i = 0; i < 20000; ++i) {
    if (live.empty() || rng() % 2 == 0) {
      uint64_t bytes = 1 + rng() % (64 * kBlock);
      if (auto e = a->Allocate(bytes)) {
        EXPECT_EQ(e->length, a->RoundUp(bytes));
        live.push_back(*e);
        live_bytes += e->length;
      }
    } else {
      size_t idx = rng() % live.size();
      ASSERT_TRUE(a->Free(live[idx]).ok());
      live_bytes -= live[idx].length;
      live[idx] = live.back();
      live.pop_back();
    }
    AllocatorStats s = a->Stats();
    ASSERT_EQ(s.used_bytes, live_bytes);
    ASSERT_LE(s.used_bytes, s.capacity_bytes);
    ASSERT_EQ(s.live_extents, live.size());
  }
  for (const Extent& e : live)
    ASSERT_TRUE(a->Free(e).ok());
  AllocatorStats s = a->Stats();
  EXPECT_EQ(s.free_extents, 1u);  // everything coalesced back into one hole
  EXPECT_EQ(s.largest_free_bytes, kBlocks * kBlock);
}

}  // namespace
}  // namespace kvport::store
