// SPDX-License-Identifier: Apache-2.0
// The process-wide runtimes: configured once, opened once, shared by every thread, and
// invisible to other code's dlopen. This binary configures them with the fakes, so it runs in a
// process of its own (see CMakeLists.txt).
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <barrier>
#include <cmath>
#include <thread>
#include <vector>

#include "kvport/device.h"
#include "kvport/transport.h"
#include "kvport/ucx.h"
#include "test_support.h"

namespace kvport {
namespace {

using ::testing::HasSubstr;

RuntimeOptions FakeOptions() {
  RuntimeOptions options;
  options.cuda_runtime_library = testing::FakeCudart();
  options.ascend_runtime_library = testing::FakeAscendcl();
  return options;
}

// Every test configures the same options first, so the order the tests run in does not matter.
class ProcessRuntimes : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(ConfigureDeviceRuntimes(FakeOptions()).ok()); }
};

// The regression the project exists for, inverted: many threads asking for the runtimes at once
// while another thread loads an unrelated library. All get one object per runtime; the other
// dlopen works and sees none of the runtime's symbols.
TEST_F(ProcessRuntimes, ConcurrentFirstUseYieldsOneObjectAndLeavesOtherDlopenAlone) {
  constexpr int kThreads = 16;
  constexpr std::array<RuntimeKind, 3> kKinds = {RuntimeKind::kHost, RuntimeKind::kCuda,
                                                 RuntimeKind::kAscend};
  std::barrier start(kThreads + 1);
  std::vector<std::array<const DeviceRuntime*, 3>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      for (int k = 0; k < 3; ++k) {  // each thread starts with a different runtime
        const int which = (i + k) % 3;
        seen[i][which] = &ProcessRuntime(kKinds[which]);
      }
    });
  }
  bool other_dlopen_ok = false;
  double cos_zero = 0.0;
  std::string other_error;
  std::thread other([&] {
    start.arrive_and_wait();
    void* lib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    const char* symbol = "zlibVersion";
    if (lib == nullptr) {  // a host without zlib: libm is always there
      lib = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
      symbol = "cos";
    }
    if (lib == nullptr) {
      other_error = dlerror();
      return;
    }
    void* fn = dlsym(lib, symbol);
    other_dlopen_ok = fn != nullptr;
    if (other_dlopen_ok && std::string(symbol) == "cos") {
      cos_zero = reinterpret_cast<double (*)(double)>(fn)(0.0);
    } else {
      cos_zero = 1.0;
    }
    dlclose(lib);
  });
  for (auto& t : threads)
    t.join();
  other.join();

  EXPECT_TRUE(other_dlopen_ok) << other_error;
  EXPECT_EQ(cos_zero, 1.0);
  for (int i = 0; i < kThreads; ++i) {
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(seen[i][k], seen[0][k]) << "thread " << i << " runtime " << k;
    }
  }
  EXPECT_EQ(seen[0][0], &HostRuntime());
  EXPECT_EQ(seen[0][1], &CudaRuntime());
  EXPECT_EQ(seen[0][2], &AscendRuntime());
  EXPECT_TRUE(CudaRuntime().usable()) << CudaRuntime().reason();
  EXPECT_EQ(CudaRuntime().info().library, testing::FakeCudart());
  EXPECT_TRUE(AscendRuntime().usable()) << AscendRuntime().reason();

  // RTLD_LOCAL: the runtimes' symbols are not in the global namespace, so they cannot satisfy
  // (or shadow) anyone else's lookups.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "cudaMemcpy"), nullptr);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "aclrtMemcpy"), nullptr);
}

TEST_F(ProcessRuntimes, FirstConfigurationWins) {
  EXPECT_TRUE(ConfigureDeviceRuntimes(FakeOptions()).ok());  // the same again: fine
  RuntimeOptions other = FakeOptions();
  other.cuda_runtime_library = "/somewhere/else/libcudart.so";
  Status s = ConfigureDeviceRuntimes(other);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("first configuration wins"));
  EXPECT_THAT(s.message(), HasSubstr("/somewhere/else/libcudart.so"));
  EXPECT_EQ(DeviceRuntimeOptions(), FakeOptions());
  EXPECT_EQ(CudaRuntime().info().library, testing::FakeCudart());
}

TEST_F(ProcessRuntimes, UsableRuntimeAndSelectTransport) {
  Result<const DeviceRuntime*> cuda = UsableRuntime(RuntimeKind::kCuda);
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
  EXPECT_EQ(*cuda, &CudaRuntime());
  ASSERT_TRUE(UsableRuntime(RuntimeKind::kHost).ok());

  // RDMA follows this host's UCX (present here, absent in the aarch64 lane).
  const bool ucx = ProcessUcxRuntime().usable();
  Result<TransportChoice> rdma = SelectTransport(2);
  ASSERT_TRUE(rdma.ok()) << rdma.status().ToString();
  EXPECT_EQ(rdma->resolved, ucx ? TransportKind::kRdma : TransportKind::kTcp) << rdma->reason;
  EXPECT_EQ(rdma->ucx, ucx);
  // The configured (fake) CUDA runtime is usable: GPUDirect works, staged.
  Result<TransportChoice> gdr = SelectTransport(3);
  ASSERT_TRUE(gdr.ok()) << gdr.status().ToString();
  EXPECT_EQ(gdr->resolved, TransportKind::kGpuDirectRdma);
  EXPECT_THAT(gdr->reason, HasSubstr("device buffers are staged through pinned host memory"));
}

}  // namespace
}  // namespace kvport
