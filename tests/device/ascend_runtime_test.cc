// SPDX-License-Identifier: Apache-2.0
// The Ascend runtime (ACL) in every state, driven by fake_ascendcl (tests/fakes).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <thread>
#include <vector>

#include "kvport/device.h"
#include "test_support.h"

namespace kvport {
namespace {

using testing::FakeAscendcl;
using testing::FakeAscendclNoHostRegister;
using testing::FakeFunction;
using ::testing::HasSubstr;
using testing::ScopedEnv;

TEST(AscendRuntime, MissingFileIsAbsentWithThePathInTheReason) {
  auto rt = OpenAscendRuntime("/nonexistent/Ascend/lib64/libascendcl.so");
  EXPECT_EQ(rt->state(), RuntimeState::kAbsent);
  EXPECT_EQ(rt->kind(), RuntimeKind::kAscend);
  EXPECT_THAT(rt->reason(), HasSubstr("/nonexistent/Ascend/lib64/libascendcl.so"));
}

TEST(AscendRuntime, SearchLooksUnderAscendHomePath) {
  {
    ScopedEnv no_home("ASCEND_HOME_PATH", "");
    if (OpenAscendRuntime("")->state() != RuntimeState::kAbsent)
      GTEST_SKIP() << "this host has a libascendcl.so on the loader's path";
  }
  char dir_template[] = "/tmp/kvport_ascend_home_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::filesystem::path home(dir_template);
  ScopedEnv home_env("ASCEND_HOME_PATH", home.string());

  auto before = OpenAscendRuntime("");
  EXPECT_EQ(before->state(), RuntimeState::kAbsent);
  EXPECT_THAT(before->reason(), HasSubstr("libascendcl.so (not in the loader's search path)"));
  EXPECT_THAT(before->reason(), HasSubstr(home.string() + "/lib64/libascendcl.so"));

  std::filesystem::create_directories(home / "lib64");
  std::filesystem::create_symlink(FakeAscendcl(), home / "lib64" / "libascendcl.so");
  auto after = OpenAscendRuntime("");
  EXPECT_EQ(after->state(), RuntimeState::kAvailable) << after->reason();
  EXPECT_EQ(after->info().library, home.string() + "/lib64/libascendcl.so");
  std::filesystem::remove_all(home);
}

TEST(AscendRuntime, FakeIsAvailableAndRepeatInitializeIsSuccess) {
  ScopedEnv count("FAKE_ACL_DEVICE_COUNT", "8");
  // The fake, like ACL, answers a second aclInit with ACL_ERROR_REPEAT_INITIALIZE (100002).
  auto first = OpenAscendRuntime(FakeAscendcl());
  auto second = OpenAscendRuntime(FakeAscendcl());
  for (const auto* rt : {first.get(), second.get()}) {
    EXPECT_EQ(rt->state(), RuntimeState::kAvailable) << rt->reason();
    EXPECT_EQ(rt->device_count(), 8);
    EXPECT_EQ(rt->info().version, "1.0.0");
    EXPECT_EQ(rt->name(), "ascend");
  }
}

TEST(AscendRuntime, InjectedRepeatInitializeIsSuccess) {
  ScopedEnv fail("FAKE_ACL_FAIL", "aclInit");
  ScopedEnv code("FAKE_ACL_FAIL_CODE", "100002");
  auto rt = OpenAscendRuntime(FakeAscendcl());
  EXPECT_EQ(rt->state(), RuntimeState::kAvailable) << rt->reason();
}

TEST(AscendRuntime, FailingInitIsUnusableWithTheCode) {
  ScopedEnv fail("FAKE_ACL_FAIL", "aclInit");
  ScopedEnv code("FAKE_ACL_FAIL_CODE", "500000");
  auto rt = OpenAscendRuntime(FakeAscendcl());
  EXPECT_EQ(rt->state(), RuntimeState::kUnusable);
  EXPECT_THAT(rt->reason(), HasSubstr(FakeAscendcl()));
  EXPECT_THAT(rt->reason(), HasSubstr("aclInit failed: error 500000"));
}

TEST(AscendRuntime, ZeroOrFailingDeviceCountIsUnusable) {
  {
    ScopedEnv count("FAKE_ACL_DEVICE_COUNT", "0");
    auto rt = OpenAscendRuntime(FakeAscendcl());
    EXPECT_EQ(rt->state(), RuntimeState::kUnusable);
    EXPECT_THAT(rt->reason(), HasSubstr("aclrtGetDeviceCount reports 0 devices"));
  }
  {
    ScopedEnv fail("FAKE_ACL_FAIL", "aclrtGetDeviceCount");
    ScopedEnv code("FAKE_ACL_FAIL_CODE", "507033");
    auto rt = OpenAscendRuntime(FakeAscendcl());
    EXPECT_EQ(rt->state(), RuntimeState::kUnusable);
    EXPECT_THAT(rt->reason(), HasSubstr("aclrtGetDeviceCount failed: error 507033"));
  }
}

TEST(AscendRuntime, CopyWithoutACurrentDeviceFailsWithTheRuntimesCode) {
  auto rt = OpenAscendRuntime(FakeAscendcl());
  ASSERT_TRUE(rt->usable()) << rt->reason();
  Status s;
  std::thread fresh([&] {  // a thread that never called SetDevice
    std::vector<char> a(64), b(64);
    s = rt->Memcpy(a.data(), b.data(), 64, MemcpyKind::kHostToHost);
  });
  fresh.join();
  EXPECT_EQ(s.code(), StatusCode::kDeviceError);
  EXPECT_THAT(s.message(), HasSubstr("aclrtMemcpy(H2H, 64 bytes) failed: error 107002"));
}

TEST(AscendRuntime, CopiesRoundTripAndErrorsCarryTheCode) {
  auto rt = OpenAscendRuntime(FakeAscendcl());
  ASSERT_TRUE(rt->usable()) << rt->reason();
  std::thread worker([&] {
    ASSERT_TRUE(rt->SetDevice(0).ok());
    Result<void*> dev = rt->AllocDevice(4096);
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    std::vector<unsigned char> in(4096), out(4096);
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = static_cast<unsigned char>(i ^ 0x5a);
    ASSERT_TRUE(rt->CopyToDevice(*dev, in.data(), in.size()).ok());
    ASSERT_TRUE(rt->CopyToHost(out.data(), *dev, out.size()).ok());
    EXPECT_EQ(in, out);

    Status s = rt->CopyToHost(out.data(), in.data(), 4096);  // source is not device memory
    EXPECT_EQ(s.code(), StatusCode::kDeviceError);
    EXPECT_EQ(s.message(),
              "aclrtMemcpy(D2H, 4096 bytes) failed: error 100000 (fake ACL: pointers do not "
              "match the copy kind)");
    EXPECT_TRUE(rt->FreeDevice(*dev).ok());
    EXPECT_EQ(rt->SetDevice(1).code(), StatusCode::kInvalidArgument);
  });
  worker.join();
}

// Staging copies (CopyOnDevice) run on a stream kvport owns on the buffer's device and leave the
// calling thread's current device as it was; a thread with none is left on the copy's device
// (ACL cannot take a thread's device away).
TEST(AscendRuntime, CopyOnDeviceUsesItsOwnStreamAndLeavesTheCallersDevice) {
  ScopedEnv count("FAKE_ACL_DEVICE_COUNT", "2");
  auto rt = OpenAscendRuntime(FakeAscendcl());
  ASSERT_TRUE(rt->usable()) << rt->reason();
  const auto copies = FakeFunction<long (*)(int)>(FakeAscendcl(), "fake_acl_copies");
  const auto get_device = FakeFunction<int (*)(int32_t*)>(FakeAscendcl(), "aclrtGetDevice");
  ASSERT_NE(copies, nullptr);
  ASSERT_NE(get_device, nullptr);
  std::thread worker([&] {
    ASSERT_TRUE(rt->SetDevice(0).ok());
    Result<void*> dev = rt->AllocDevice(4096);
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    std::vector<unsigned char> in(4096, 0x3c), out(4096, 0);
    ASSERT_TRUE(rt->SetDevice(1).ok());  // the caller works on device 1
    const long on_default = copies(0);
    const long on_streams = copies(1);
    ASSERT_TRUE(rt->CopyOnDevice(0, *dev, in.data(), in.size(), MemcpyKind::kHostToDevice).ok());
    ASSERT_TRUE(rt->CopyOnDevice(0, out.data(), *dev, out.size(), MemcpyKind::kDeviceToHost).ok());
    EXPECT_EQ(in, out);
    EXPECT_EQ(copies(0), on_default);
    EXPECT_EQ(copies(1), on_streams + 2);
    int32_t device = -1;
    ASSERT_EQ(get_device(&device), 0);
    EXPECT_EQ(device, 1);
    {
      ScopedEnv fail("FAKE_ACL_FAIL", "aclrtMemcpyAsync");
      Status s = rt->CopyOnDevice(0, *dev, in.data(), in.size(), MemcpyKind::kHostToDevice);
      EXPECT_EQ(s.code(), StatusCode::kDeviceError);
      EXPECT_THAT(s.message(), HasSubstr("aclrtMemcpyAsync(H2D, 4096 bytes) failed"));
    }
    ASSERT_EQ(get_device(&device), 0);
    EXPECT_EQ(device, 1);
    ASSERT_TRUE(rt->SetDevice(0).ok());
    EXPECT_TRUE(rt->FreeDevice(*dev).ok());
  });
  worker.join();
  std::thread fresh([&] {  // never set a device: the copy works, and leaves device 1 set
    std::vector<unsigned char> a(64, 1), b(64, 0);
    EXPECT_TRUE(rt->CopyOnDevice(1, b.data(), a.data(), 64, MemcpyKind::kHostToHost).ok());
    EXPECT_EQ(a, b);
    int32_t device = -1;
    EXPECT_EQ(get_device(&device), 0);
    EXPECT_EQ(device, 1);
  });
  fresh.join();
}

TEST(AscendRuntime, PinnedHostMemoryAndRegistration) {
  auto rt = OpenAscendRuntime(FakeAscendcl());
  ASSERT_TRUE(rt->usable()) << rt->reason();
  std::thread worker([&] {
    ASSERT_TRUE(rt->SetDevice(0).ok());
    Result<void*> pinned = rt->AllocPinnedHost(1 << 16);
    ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
    EXPECT_TRUE(rt->FreePinnedHost(*pinned).ok());
    {
      ScopedEnv fail("FAKE_ACL_FAIL", "aclrtMallocHost");
      ScopedEnv code("FAKE_ACL_FAIL_CODE", "207001");
      Result<void*> failed = rt->AllocPinnedHost(1 << 16);
      EXPECT_EQ(failed.status().code(), StatusCode::kDeviceError);
      EXPECT_THAT(failed.status().message(),
                  HasSubstr("aclrtMallocHost(65536 bytes) failed: error 207001"));
    }
    std::vector<char> buf(4096);
    ASSERT_TRUE(rt->RegisterHost(buf.data(), buf.size()).ok());
    EXPECT_EQ(rt->RegisterHost(buf.data(), buf.size()).code(), StatusCode::kDeviceError);
    EXPECT_TRUE(rt->UnregisterHost(buf.data()).ok());
  });
  worker.join();
}

TEST(AscendRuntime, OlderCannWithoutHostRegisterIsUsableButCannotRegister) {
  auto rt = OpenAscendRuntime(FakeAscendclNoHostRegister());
  ASSERT_TRUE(rt->usable()) << rt->reason();
  std::vector<char> buf(4096);
  Status s = rt->RegisterHost(buf.data(), buf.size());
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_THAT(s.message(), HasSubstr("has no aclrtHostRegister"));
}

}  // namespace
}  // namespace kvport
