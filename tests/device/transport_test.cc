// SPDX-License-Identifier: Apache-2.0
#include "kvport/transport.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "test_support.h"

namespace kvport {
namespace {

using testing::FakeCudart;
using ::testing::HasSubstr;
using testing::ScopedEnv;

TransportEnvironment EnvWith(const DeviceRuntime* cuda, std::vector<std::string> rdma = {}) {
  TransportEnvironment env;
  env.cuda = cuda;
  env.rdma_devices = std::move(rdma);
  return env;
}

TEST(ResolveTransport, TcpAlwaysWorks) {
  auto absent = OpenCudaRuntime("/nonexistent/libcudart.so");
  Result<TransportChoice> c = ResolveTransport(1, EnvWith(absent.get()));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->requested, TransportKind::kTcp);
  EXPECT_EQ(c->resolved, TransportKind::kTcp);
  EXPECT_FALSE(c->fallback);
  EXPECT_EQ(c->reason, "eic_trans_type 1 (TCP): using TCP");
}

TEST(ResolveTransport, RdmaInitializesOverTcpAndSaysWhy) {
  auto absent = OpenCudaRuntime("/nonexistent/libcudart.so");
  Result<TransportChoice> c = ResolveTransport(2, EnvWith(absent.get(), {"mlx5_0", "mlx5_1"}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->requested, TransportKind::kRdma);
  EXPECT_EQ(c->resolved, TransportKind::kTcp);
  EXPECT_TRUE(c->fallback);
  EXPECT_THAT(c->reason, HasSubstr("no RDMA transport is built into kvport yet"));
  EXPECT_THAT(c->reason, HasSubstr("mlx5_0, mlx5_1"));

  Result<TransportChoice> none = ResolveTransport(2, EnvWith(nullptr));
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(none->reason, HasSubstr("no RDMA devices seen"));
}

TEST(ResolveTransport, GpuDirectWithoutCudaNamesTheMissingPiece) {
  auto absent = OpenCudaRuntime("/nonexistent/libcudart.so.13");
  Result<TransportChoice> c = ResolveTransport(3, EnvWith(absent.get()));
  EXPECT_EQ(c.status().code(), StatusCode::kNotSupported);
  EXPECT_EQ(c.status().message(),
            "eic_trans_type 3 (GPUDirect RDMA) needs a usable CUDA runtime; " + absent->reason());
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/libcudart.so.13"));

  ScopedEnv fail("FAKE_CUDA_FAIL", "cudaGetDeviceCount");
  ScopedEnv code("FAKE_CUDA_FAIL_CODE", "35");
  auto unusable = OpenCudaRuntime(FakeCudart());
  Result<TransportChoice> u = ResolveTransport(3, EnvWith(unusable.get()));
  EXPECT_EQ(u.status().code(), StatusCode::kNotSupported);
  EXPECT_THAT(u.status().message(),
              HasSubstr("needs a usable CUDA runtime; " + std::string(FakeCudart()) +
                        " loaded but cudaGetDeviceCount failed: error 35 (CUDA driver version is "
                        "insufficient for CUDA runtime version)"));
}

TEST(ResolveTransport, GpuDirectWithUsableCudaIsNotBuiltYet) {
  auto cuda = OpenCudaRuntime(FakeCudart());
  ASSERT_TRUE(cuda->usable()) << cuda->reason();
  Result<TransportChoice> c = ResolveTransport(3, EnvWith(cuda.get()));
  EXPECT_EQ(c.status().code(), StatusCode::kNotSupported);
  EXPECT_THAT(c.status().message(), HasSubstr("the CUDA runtime is usable (1 devices)"));
  EXPECT_THAT(c.status().message(), HasSubstr("no GPUDirect RDMA transport built yet"));
}

TEST(ResolveTransport, AutoPicksTcpAndExplainsEachSkip) {
  auto absent = OpenCudaRuntime("/nonexistent/libcudart.so");
  Result<TransportChoice> c = ResolveTransport(0, EnvWith(absent.get()));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->requested, TransportKind::kAuto);
  EXPECT_EQ(c->resolved, TransportKind::kTcp);
  EXPECT_THAT(c->reason, HasSubstr("using TCP"));
  EXPECT_THAT(c->reason, HasSubstr("skipped GPUDirect RDMA"));
  EXPECT_THAT(c->reason, HasSubstr("/nonexistent/libcudart.so"));
  EXPECT_THAT(c->reason, HasSubstr("skipped RDMA (not built"));
}

TEST(ResolveTransport, OutOfRangeValueIsInvalidArgument) {
  for (int bad : {-1, 4, 99}) {
    Result<TransportChoice> c = ResolveTransport(bad, EnvWith(nullptr));
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr("use 0 (auto), 1 (TCP), 2 (RDMA)"));
  }
}

TEST(ListRdmaDevices, ListsSortedNamesAndToleratesAMissingFolder) {
  EXPECT_TRUE(ListRdmaDevices("/nonexistent/sys/class/infiniband").empty());
  char dir_template[] = "/tmp/kvport_ib_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::filesystem::path dir(dir_template);
  std::filesystem::create_directory(dir / "mlx5_1");
  std::filesystem::create_directory(dir / "mlx5_0");
  EXPECT_EQ(ListRdmaDevices(dir.string()), (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvport
