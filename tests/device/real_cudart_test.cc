// SPDX-License-Identifier: Apache-2.0
// The real libcudart of this host, when there is one. On the development machines it is
// present (libcudart.so.13) without a driver, so cudaGetDeviceCount fails (error 35) and the
// runtime must read as present-but-unusable with the runtime's own message. On a host with a
// GPU the same test copies through real device memory; without libcudart it is skipped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "kvport/device.h"
#include "kvport/transport.h"

namespace kvport {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(RealCudart, ReportsItsStateWithTheRuntimesOwnMessage) {
  auto rt = OpenCudaRuntime("");
  std::printf("real libcudart: %s: %s %s\n", std::string(RuntimeStateName(rt->state())).c_str(),
              rt->info().library_path.c_str(), rt->reason().c_str());
  if (rt->state() == RuntimeState::kAbsent) {
    GTEST_SKIP() << "no libcudart on this host: " << rt->reason();
  }
  ASSERT_FALSE(rt->info().library.empty());
  EXPECT_THAT(rt->info().library, StartsWith("libcudart.so"));
  EXPECT_FALSE(rt->info().library_path.empty());
  if (rt->state() == RuntimeState::kUnusable) {
    EXPECT_THAT(rt->reason(), HasSubstr(rt->info().library_path));
    EXPECT_THAT(rt->reason(), HasSubstr("loaded but cudaGetDeviceCount"));
    // A transport that needs CUDA fails naming exactly this reason.
    TransportEnvironment env;
    env.cuda = rt.get();
    Result<TransportChoice> gdr = ResolveTransport(3, env);
    EXPECT_EQ(gdr.status().code(), StatusCode::kNotSupported);
    EXPECT_EQ(gdr.status().message(),
              "eic_trans_type 3 (GPUDirect RDMA) needs a usable CUDA runtime; " + rt->reason());
    return;
  }
  // A host with a GPU: copy through real device memory.
  ASSERT_GT(rt->device_count(), 0);
  ASSERT_TRUE(rt->SetDevice(0).ok());
  Result<void*> dev = rt->AllocDevice(1 << 16);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  Result<void*> pinned = rt->AllocPinnedHost(1 << 16);
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  std::vector<unsigned char> in(1 << 16), out(1 << 16);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<unsigned char>(i * 13);
  ASSERT_TRUE(rt->CopyToDevice(*dev, in.data(), in.size()).ok());
  ASSERT_TRUE(rt->CopyToHost(*pinned, *dev, in.size()).ok());
  ASSERT_TRUE(rt->Memcpy(out.data(), *pinned, in.size(), MemcpyKind::kHostToHost).ok());
  EXPECT_EQ(in, out);
  ASSERT_TRUE(rt->RegisterHost(out.data(), out.size()).ok());
  EXPECT_TRUE(rt->UnregisterHost(out.data()).ok());
  EXPECT_TRUE(rt->FreePinnedHost(*pinned).ok());
  EXPECT_TRUE(rt->FreeDevice(*dev).ok());
}

}  // namespace
}  // namespace kvport
