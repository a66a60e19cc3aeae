// SPDX-License-Identifier: Apache-2.0
// bench/cpu_split.h: where `kvport bench --resp` runs the servers and the load.
#include "bench/cpu_split.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace kvport::bench {
namespace {

TEST(CpuSplitTest, ServersGetTheLowerPartAndTheLoadTheUpperHalf) {
  CpuSplit two = SplitCpus({0, 1});
  EXPECT_TRUE(two.split);
  EXPECT_EQ(two.servers, std::vector<int>({0}));
  EXPECT_EQ(two.clients, std::vector<int>({1}));

  CpuSplit five = SplitCpus({0, 2, 3, 4, 7});
  EXPECT_TRUE(five.split);
  EXPECT_EQ(five.servers, std::vector<int>({0, 2, 3}));
  EXPECT_EQ(five.clients, std::vector<int>({4, 7}));
}

TEST(CpuSplitTest, OneCpuIsNotSplit) {
  CpuSplit one = SplitCpus({3});
  EXPECT_FALSE(one.split);
  EXPECT_EQ(one.servers, std::vector<int>({3}));
  EXPECT_EQ(one.clients, std::vector<int>({3}));
}

TEST(CpuSplitTest, FormatsRanges) {
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({1}), "1");
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(FormatCpuList({0, 2, 5, 6, 7}), "0,2,5-7");
}

TEST(CpuSplitTest, ScopedAffinityHoldsForThreadsStartedInsideAndIsRestored) {
  Result<std::vector<int>> before = AllowedCpus();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  if (before->size() < 2) GTEST_SKIP() << "one CPU: nothing to split";
  const std::vector<int> last = {before->back()};
  std::vector<int> seen_by_thread;
  {
    ScopedCpuAffinity scoped(last);
    ASSERT_TRUE(scoped.status().ok()) << scoped.status().ToString();
    Result<std::vector<int>> inside = AllowedCpus();
    ASSERT_TRUE(inside.ok());
    EXPECT_EQ(*inside, last);
    std::thread([&] { seen_by_thread = AllowedCpus().value(); }).join();
  }
  EXPECT_EQ(seen_by_thread, last);  // inherited by a thread started in the scope
  Result<std::vector<int>> after = AllowedCpus();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *before);
}

}  // namespace
}  // namespace kvport::bench
