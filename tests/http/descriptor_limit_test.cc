// SPDX-License-Identifier: Apache-2.0
// `kvport serve`'s descriptor check: what a node needs, the warning when the limit is short of
// it, and the soft limit raised to the hard one.
#include "http/descriptor_limit.h"

#include <sys/resource.h>

#include <gtest/gtest.h>

namespace kvport::http {
namespace {

TEST(DescriptorLimit, ANodeNeedsOneDescriptorPerConnectionAndAMargin) {
  EXPECT_EQ(DescriptorsNeeded(4096, 64), 4096u + 64u + kDescriptorMargin);
  EXPECT_EQ(DescriptorsNeeded(4096, 0), 4096u + kDescriptorMargin);
}

TEST(DescriptorLimit, AShortLimitIsAWarningThatNamesTheNumbers) {
  EXPECT_EQ(DescriptorLimitWarning(8192, 4096, 64), "");
  EXPECT_EQ(DescriptorLimitWarning(4096 + 64 + kDescriptorMargin, 4096, 64), "");
  const std::string warning = DescriptorLimitWarning(1024, 4096, 64);
  for (const char* part : {"RLIMIT_NOFILE", "is 1024", "4224", "4096 data connections",
                           "max_connections", "64 HTTP connections", "LimitNOFILE=4224"}) {
    EXPECT_NE(warning.find(part), std::string::npos) << part << " in: " << warning;
  }
  EXPECT_EQ(DescriptorLimitWarning(1024, 4096, 0).find("HTTP"), std::string::npos);
}

TEST(DescriptorLimit, TheSoftLimitIsRaisedToTheHardOne) {
  rlimit original{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &original), 0);
  if (original.rlim_max == RLIM_INFINITY || original.rlim_max < 128) {
    GTEST_SKIP() << "hard RLIMIT_NOFILE " << original.rlim_max << ": nothing to raise to";
  }
  rlimit lowered = original;
  lowered.rlim_cur = 100;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  Result<DescriptorLimit> raised = RaiseDescriptorLimit();
  rlimit now{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &now), 0);
  ::setrlimit(RLIMIT_NOFILE, &original);  // as it was, for the tests after this one
  ASSERT_TRUE(raised.ok()) << raised.status().ToString();
  EXPECT_EQ(now.rlim_cur, original.rlim_max);
  EXPECT_EQ(raised->soft, original.rlim_max);
  EXPECT_EQ(raised->hard, original.rlim_max);
  // What `kvport serve` logs: nothing when the raised limit is enough.
  EXPECT_EQ(CheckDescriptorLimit(1, 1), "");
}

}  // namespace
}  // namespace kvport::http
