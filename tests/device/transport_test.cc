// SPDX-License-Identifier: Apache-2.0
#include "kvport/transport.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "kvport/ucx.h"

#include "test_support.h"

namespace kvport {
namespace {

using testing::FakeCudart;
using ::testing::HasSubstr;
using testing::ScopedEnv;

TransportEnvironment EnvWith(const DeviceRuntime* cuda, std::vector<std::string> rdma = {},
                             const UcxRuntime* ucx = nullptr) {
  TransportEnvironment env;
  env.cuda = cuda;
  env.ucx = ucx;
  env.rdma_devices = std::move(rdma);
  return env;
}

// A UCX runtime in a given state, as OpenUcxRuntime reports one.
class StaticUcx final : public UcxRuntime {
 public:
  explicit StaticUcx(UcxInfo info) : info_(std::move(info)) {}
  const UcxInfo& info() const override { return info_; }

 private:
  UcxInfo info_;
};

StaticUcx UsableUcx(std::vector<UcxResource> resources,
                    std::vector<std::string> memory = {"host"}) {
  UcxInfo info;
  info.state = RuntimeState::kAvailable;
  info.version = "1.13.1";
  info.resources = std::move(resources);
  info.memory_types = std::move(memory);
  return StaticUcx(std::move(info));
}

StaticUcx UnusableUcx() {
  UcxInfo info;
  info.state = RuntimeState::kUnusable;
  info.reason = "libucp.so.0 lacks ucp_put_nbx";
  return StaticUcx(std::move(info));
}

const UcxResource kTcpLo{"tcp", "lo", "tcp"};
const UcxResource kRcMlx5{"rc_mlx5", "mlx5_0:1", "mlx5_0"};

TEST(ResolveTransport, TcpAlwaysWorks) {
  auto absent = OpenCudaRuntime("/nonexistent/libcudart.so");
  StaticUcx ucx = UsableUcx({kRcMlx5});
  Result<TransportChoice> c = ResolveTransport(1, EnvWith(absent.get(), {"mlx5_0"}, &ucx));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->requested, TransportKind::kTcp);
  EXPECT_EQ(c->resolved, TransportKind::kTcp);
  EXPECT_FALSE(c->fallback);
  EXPECT_FALSE(c->ucx);
  EXPECT_EQ(c->reason, "eic_trans_type 1 (TCP): using TCP");
}

TEST(ResolveTransport, RdmaUsesAUsableUcxWhateverItsDevices) {
  StaticUcx verbs = UsableUcx({kTcpLo, kRcMlx5});
  Result<TransportChoice> c = ResolveTransport(2, EnvWith(nullptr, {"mlx5_0"}, &verbs));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->resolved, TransportKind::kRdma);
  EXPECT_TRUE(c->ucx);
  EXPECT_FALSE(c->fallback);
  EXPECT_THAT(
      c->reason,
      HasSubstr(
          "UCX 1.13.1 (tcp, rc_mlx5), node-checked UCX messages with a node that offers UCX"));

  // Without RDMA hardware UCX is still used, as asked, with a warning: it is slower than TCP.
  StaticUcx tcp_only = UsableUcx({kTcpLo});
  Result<TransportChoice> slow = ResolveTransport(2, EnvWith(nullptr, {}, &tcp_only));
  ASSERT_TRUE(slow.ok());
  EXPECT_EQ(slow->resolved, TransportKind::kRdma);
  EXPECT_TRUE(slow->ucx);
  EXPECT_TRUE(slow->fallback);
  EXPECT_THAT(slow->reason, HasSubstr("UCX has no RDMA transport here"));
}

TEST(ResolveTransport, RdmaWithoutAUsableUcxIsServedOverTcpAndSaysWhy) {
  StaticUcx unusable = UnusableUcx();
  Result<TransportChoice> c =
      ResolveTransport(2, EnvWith(nullptr, {"mlx5_0", "mlx5_1"}, &unusable));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->requested, TransportKind::kRdma);
  EXPECT_EQ(c->resolved, TransportKind::kTcp);
  EXPECT_TRUE(c->fallback);
  EXPECT_FALSE(c->ucx);
  EXPECT_THAT(c->reason, HasSubstr("UCX is not usable here: libucp.so.0 lacks ucp_put_nbx"));
  EXPECT_THAT(c->reason, HasSubstr("mlx5_0, mlx5_1"));

  Result<TransportChoice> none = ResolveTransport(2, EnvWith(nullptr));
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(none->reason, HasSubstr("no RDMA devices seen"));
}

TEST(ResolveTransport, GpuDirectWithoutCudaNamesTheMissingPiece) {
  auto absent = OpenCudaRuntime("/nonexistent/libcudart.so.13");
  StaticUcx ucx = UsableUcx({kRcMlx5}, {"host", "cuda"});
  Result<TransportChoice> c = ResolveTransport(3, EnvWith(absent.get(), {}, &ucx));
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

// With a usable CUDA runtime type 3 works everywhere: device buffers are staged, and the reason
// says why they are not moved directly.
TEST(ResolveTransport, GpuDirectWithUsableCudaStagesAndSaysWhy) {
  auto cuda = OpenCudaRuntime(FakeCudart());
  ASSERT_TRUE(cuda->usable()) << cuda->reason();
  Result<TransportChoice> tcp = ResolveTransport(3, EnvWith(cuda.get()));
  ASSERT_TRUE(tcp.ok()) << tcp.status().ToString();
  EXPECT_EQ(tcp->resolved, TransportKind::kGpuDirectRdma);
  EXPECT_TRUE(tcp->fallback);
  EXPECT_FALSE(tcp->ucx);
  EXPECT_THAT(tcp->reason, HasSubstr("the CUDA runtime is usable (1 devices)"));
  EXPECT_THAT(tcp->reason, HasSubstr("staged through pinned host memory (UCX was not looked for)"));
  EXPECT_THAT(tcp->reason, HasSubstr("values go over TCP"));

  StaticUcx host_only = UsableUcx({kRcMlx5});
  Result<TransportChoice> staged = ResolveTransport(3, EnvWith(cuda.get(), {}, &host_only));
  ASSERT_TRUE(staged.ok());
  EXPECT_TRUE(staged->ucx);
  EXPECT_THAT(staged->reason, HasSubstr("this UCX lists no cuda memory"));
  EXPECT_THAT(staged->reason, HasSubstr("values go over UCX 1.13.1 (rc_mlx5)"));

  StaticUcx with_cuda = UsableUcx({kRcMlx5}, {"host", "cuda"});
  Result<TransportChoice> not_yet = ResolveTransport(3, EnvWith(cuda.get(), {}, &with_cuda));
  ASSERT_TRUE(not_yet.ok());
  EXPECT_THAT(not_yet->reason, HasSubstr("does not register device memory with UCX yet"));
}

TEST(ResolveTransport, AutoPicksRdmaHardwareThroughUcxElseTcpAndExplainsEachSkip) {
  Result<TransportChoice> c = ResolveTransport(0, EnvWith(nullptr));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->requested, TransportKind::kAuto);
  EXPECT_EQ(c->resolved, TransportKind::kTcp);
  EXPECT_FALSE(c->ucx);
  EXPECT_THAT(c->reason, HasSubstr("using TCP"));
  EXPECT_THAT(c->reason, HasSubstr("skipped GPUDirect RDMA (ask for it: eic_trans_type 3)"));
  EXPECT_THAT(c->reason, HasSubstr("skipped RDMA (UCX was not looked for; no RDMA devices"));

  // UCX over TCP alone is no better than kvport's own TCP.
  StaticUcx tcp_only = UsableUcx({kTcpLo});
  Result<TransportChoice> no_hw = ResolveTransport(0, EnvWith(nullptr, {}, &tcp_only));
  ASSERT_TRUE(no_hw.ok());
  EXPECT_EQ(no_hw->resolved, TransportKind::kTcp);
  EXPECT_THAT(no_hw->reason, HasSubstr("UCX 1.13.1 (tcp) has no RDMA transport here"));

  StaticUcx verbs = UsableUcx({kTcpLo, kRcMlx5});
  Result<TransportChoice> rdma = ResolveTransport(0, EnvWith(nullptr, {"mlx5_0"}, &verbs));
  ASSERT_TRUE(rdma.ok());
  EXPECT_EQ(rdma->resolved, TransportKind::kRdma);
  EXPECT_TRUE(rdma->ucx);
  EXPECT_FALSE(rdma->fallback);
  EXPECT_THAT(rdma->reason, HasSubstr("RDMA over UCX 1.13.1 (tcp, rc_mlx5)"));
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
