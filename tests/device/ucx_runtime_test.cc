// SPDX-License-Identifier: Apache-2.0
// UCX found at run time (kvport/ucx.h): a missing file, a library that is not libucp, and the
// host's own libucp (Debian's libucx0, which scripts/bootstrap installs) with its transports, its
// memory types, and a context its UCX_* environment does not allow.
#include "kvport/ucx.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "test_support.h"

namespace kvport {
namespace {

using ::testing::Contains;
using testing::FakeCudart;
using ::testing::HasSubstr;
using testing::ScopedEnv;
using ::testing::StartsWith;

// The libucp CMake found for this target when the tests were built ("" when none: the aarch64
// lane cross-builds without an arm64 UCX).
constexpr const char* kHostUcp = KVPORT_TEST_UCP_LIBRARY;

bool HasResource(const UcxInfo& info, std::string_view transport, std::string_view device) {
  return std::any_of(info.resources.begin(), info.resources.end(), [&](const UcxResource& r) {
    return r.transport == transport && r.device == device;
  });
}

TEST(UcxRuntime, AMissingFileIsAbsentAndNamed) {
  auto ucx = OpenUcxRuntime("/nonexistent/libucp.so.0");
  EXPECT_EQ(ucx->state(), RuntimeState::kAbsent);
  if (UcxBuildApiVersion().empty()) {
    EXPECT_THAT(ucx->reason(), HasSubstr("no UCX support"));
  } else {
    EXPECT_THAT(ucx->reason(), HasSubstr("/nonexistent/libucp.so.0 (No such file or directory)"));
  }
  EXPECT_EQ(ucx->RequireUsable("eic_trans_type 2").code(), StatusCode::kNotSupported);
  EXPECT_THAT(ucx->RequireUsable("eic_trans_type 2").message(),
              StartsWith("eic_trans_type 2 needs a usable UCX; "));
  EXPECT_FALSE(ucx->SupportsMemoryType("host"));
}

TEST(UcxRuntime, ALibraryThatIsNotLibucpIsUnusableNamingWhatItLacks) {
  if (UcxBuildApiVersion().empty()) GTEST_SKIP() << "this build has no UCX";
  auto ucx = OpenUcxRuntime(FakeCudart());
  EXPECT_EQ(ucx->state(), RuntimeState::kUnusable);
  EXPECT_THAT(ucx->reason(), HasSubstr("loaded but lacks ucp_get_version, ucp_config_read"));
  EXPECT_EQ(ucx->info().library, FakeCudart());
  EXPECT_TRUE(ucx->info().version.empty());
}

TEST(UcxRuntime, TheHostsUcxReportsItsVersionTransportsAndMemoryTypes) {
  if (UcxBuildApiVersion().empty()) GTEST_SKIP() << "this build has no UCX";
  if (std::string(kHostUcp).empty()) GTEST_SKIP() << "no libucp for this target at build time";
  // The search finds the same library the build saw, and so does naming the file.
  for (const std::string& library : {std::string(), std::string(kHostUcp)}) {
    auto ucx = OpenUcxRuntime(library);
    ASSERT_TRUE(ucx->usable()) << ucx->reason();
    EXPECT_EQ(ucx->info().library, library.empty() ? "libucp.so.0" : library);
    EXPECT_THAT(ucx->info().library_path, HasSubstr("libucp.so"));
    EXPECT_THAT(ucx->info().version, StartsWith("1."));
    // UCT's own list: loopback TCP, and POSIX shared memory, on every Linux host.
    EXPECT_TRUE(HasResource(ucx->info(), "tcp", "lo"));
    EXPECT_TRUE(HasResource(ucx->info(), "posix", "memory"));
    EXPECT_THAT(ucx->info().memory_types, Contains("host"));
    EXPECT_TRUE(ucx->SupportsMemoryType("host"));
    EXPECT_TRUE(ucx->RequireUsable("eic_trans_type 2").ok());
  }
}

TEST(UcxRuntime, AContextItsEnvironmentForbidsIsUnusableWithUcxsMessage) {
  if (UcxBuildApiVersion().empty()) GTEST_SKIP() << "this build has no UCX";
  if (std::string(kHostUcp).empty()) GTEST_SKIP() << "no libucp for this target at build time";
  // A transport name UCX does not know leaves the context no transport at all.
  ScopedEnv tls("UCX_TLS", "no_such_transport");
  auto ucx = OpenUcxRuntime(kHostUcp);
  EXPECT_EQ(ucx->state(), RuntimeState::kUnusable);
  EXPECT_THAT(ucx->reason(), HasSubstr("loaded but ucp_init failed: "));
  EXPECT_FALSE(ucx->info().version.empty());
}

}  // namespace
}  // namespace kvport
