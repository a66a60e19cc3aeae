// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kvport/device.h"

namespace kvport {
namespace {

TEST(HostRuntime, IsAlwaysAvailable) {
  auto rt = OpenHostRuntime();
  EXPECT_EQ(rt->state(), RuntimeState::kAvailable);
  EXPECT_EQ(rt->name(), "host");
  EXPECT_TRUE(rt->RequireUsable("anything").ok());
  EXPECT_TRUE(rt->SetDevice(0).ok());
  EXPECT_EQ(rt->SetDevice(1).code(), StatusCode::kInvalidArgument);
}

TEST(HostRuntime, EveryDirectionIsAPlainCopy) {
  auto rt = OpenHostRuntime();
  Result<void*> dev = rt->AllocDevice(1000);
  Result<void*> pinned = rt->AllocPinnedHost(1000);
  ASSERT_TRUE(dev.ok());
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*pinned) % 4096, 0u);
  std::vector<char> in(1000), out(1000);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<char>(i);
  ASSERT_TRUE(rt->CopyToDevice(*dev, in.data(), 1000).ok());
  ASSERT_TRUE(rt->Memcpy(*pinned, *dev, 1000, MemcpyKind::kDeviceToDevice).ok());
  ASSERT_TRUE(rt->CopyToHost(out.data(), *pinned, 1000).ok());
  EXPECT_EQ(in, out);
  EXPECT_TRUE(rt->RegisterHost(out.data(), out.size()).ok());
  EXPECT_TRUE(rt->UnregisterHost(out.data()).ok());
  EXPECT_TRUE(rt->FreeDevice(*dev).ok());
  EXPECT_TRUE(rt->FreePinnedHost(*pinned).ok());
}

TEST(HostRuntime, BadArgumentsAreInvalidArgument) {
  auto rt = OpenHostRuntime();
  char buf[4];
  EXPECT_EQ(rt->CopyToHost(nullptr, buf, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(rt->CopyToHost(nullptr, nullptr, 0).ok());
  EXPECT_EQ(rt->AllocPinnedHost(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt->RegisterHost(buf, 0).code(), StatusCode::kInvalidArgument);
}

TEST(DeviceNames, AreStable) {
  EXPECT_EQ(RuntimeKindName(RuntimeKind::kCuda), "cuda");
  EXPECT_EQ(RuntimeStateName(RuntimeState::kUnusable), "unusable");
  EXPECT_EQ(MemcpyKindName(MemcpyKind::kDeviceToHost), "D2H");
  EXPECT_EQ(static_cast<int>(MemcpyKind::kHostToDevice), 1);  // cudaMemcpyHostToDevice
  EXPECT_EQ(static_cast<int>(MemcpyKind::kDeviceToHost), 2);  // cudaMemcpyDeviceToHost
}

}  // namespace
}  // namespace kvport
