// SPDX-License-Identifier: Apache-2.0
// The report `kvport doctor` prints, built from fake and absent runtimes.
#include "device/doctor_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvport/host_info.h"
#include "test_support.h"

namespace kvport {
namespace {

using testing::FakeAscendcl;
using testing::FakeCudart;
using ::testing::HasSubstr;
using testing::ScopedEnv;

TEST(DoctorReport, CpuOnlyHostWithAnAbsentCudaPathAndAFakeAscend) {
  RuntimeOptions options;
  options.cuda_runtime_library = "/nonexistent/libcudart.so.13";
  options.ascend_runtime_library = FakeAscendcl();
  auto host = OpenHostRuntime();
  auto cuda = OpenCudaRuntime(options.cuda_runtime_library);
  auto ascend = OpenAscendRuntime(options.ascend_runtime_library);
  options.ucx_library = "/nonexistent/libucp.so.0";
  auto ucx = OpenUcxRuntime(options.ucx_library);
  DoctorReport r = BuildDoctorReport(options, *host, *cuda, *ascend, *ucx, {"mlx5_0"});

  EXPECT_EQ(r.architecture, HostArchitecture());
  EXPECT_EQ(r.cpu_count, HostCpuCount());
  ASSERT_EQ(r.runtimes.size(), 3u);
  EXPECT_EQ(r.runtimes[1].state, RuntimeState::kAbsent);
  EXPECT_EQ(r.runtimes[2].state, RuntimeState::kAvailable);
  ASSERT_EQ(r.transports.size(), 4u);
  EXPECT_TRUE(r.transports[0].available);   // tcp
  EXPECT_TRUE(r.transports[1].available);   // shm
  EXPECT_FALSE(r.transports[2].available);  // rdma
  EXPECT_THAT(r.transports[2].detail, HasSubstr("mlx5_0"));
  EXPECT_THAT(r.transports[2].detail, HasSubstr("needs a usable UCX: UCX absent"));
  EXPECT_EQ(r.ucx.state, RuntimeState::kAbsent);
  EXPECT_FALSE(r.transports[3].available);  // gdr
  EXPECT_THAT(r.transports[3].detail, HasSubstr("needs a usable CUDA runtime"));
  ASSERT_EQ(r.trans_types.size(), 4u);
  EXPECT_TRUE(r.trans_types[0].works);
  EXPECT_TRUE(r.trans_types[1].works);
  EXPECT_TRUE(r.trans_types[2].works);
  EXPECT_FALSE(r.trans_types[3].works);

  const std::string text = FormatDoctorText(r);
  EXPECT_THAT(text, HasSubstr("  architecture  " + HostArchitecture() + "\n"));
  EXPECT_THAT(text, HasSubstr("  host    available\n"));
  EXPECT_THAT(text, HasSubstr("  cuda    absent\n"));
  EXPECT_THAT(text, HasSubstr("/nonexistent/libcudart.so.13 (No such file or directory)"));
  EXPECT_THAT(text, HasSubstr("  ascend  available\n"));
  EXPECT_THAT(text, HasSubstr("    library   " + std::string(FakeAscendcl()) + "\n"));
  EXPECT_THAT(text, HasSubstr("    version   1.0.0\n"));
  EXPECT_THAT(text, HasSubstr("    devices   1\n"));
  EXPECT_THAT(text, HasSubstr("  tcp   available: built in\n"));
  EXPECT_THAT(text, HasSubstr("  shm   available: built in: to a node on this host"));
  EXPECT_THAT(text,
              HasSubstr("ucx       absent\n  looked for    ucx_library=/nonexistent/libucp.so.0\n"
                        "  reason        "));
  EXPECT_THAT(text, HasSubstr("  2 RDMA            works: "));
  EXPECT_THAT(text, HasSubstr("  3 GPUDirect RDMA  fails: eic_trans_type 3 (GPUDirect RDMA) "
                              "needs a usable CUDA runtime"));

  const std::string json = FormatDoctorJson(r);
  EXPECT_THAT(json, HasSubstr("\"architecture\":\"" + HostArchitecture() + "\""));
  EXPECT_THAT(json, HasSubstr("{\"name\":\"cuda\",\"state\":\"absent\",\"library\":\"\""));
  EXPECT_THAT(json, HasSubstr("{\"name\":\"ascend\",\"state\":\"available\""));
  EXPECT_THAT(json, HasSubstr("\"rdma_devices\":[\"mlx5_0\"]"));
  EXPECT_THAT(json, HasSubstr("{\"name\":\"tcp\",\"available\":true"));
  EXPECT_THAT(json, HasSubstr("\"ucx\":{\"state\":\"absent\",\"library\":\"\""));
  EXPECT_THAT(json, HasSubstr("{\"value\":3,\"name\":\"GPUDirect RDMA\",\"works\":false"));
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.substr(json.size() - 2), "}\n");
}

TEST(DoctorReport, UnusableCudaShowsLibraryVersionDriverAndReason) {
  ScopedEnv fail("FAKE_CUDA_FAIL", "cudaGetDeviceCount");
  ScopedEnv code("FAKE_CUDA_FAIL_CODE", "35");
  ScopedEnv driver("FAKE_CUDA_DRIVER_VERSION", "0");
  RuntimeOptions options;
  options.cuda_runtime_library = FakeCudart();
  auto host = OpenHostRuntime();
  auto cuda = OpenCudaRuntime(options.cuda_runtime_library);
  auto ascend = OpenAscendRuntime("/nonexistent/libascendcl.so");
  auto ucx = OpenUcxRuntime("/nonexistent/libucp.so.0");
  const std::string text =
      FormatDoctorText(BuildDoctorReport(options, *host, *cuda, *ascend, *ucx, {}));
  EXPECT_THAT(text, HasSubstr("  cuda    unusable\n"));
  EXPECT_THAT(text, HasSubstr("    version   13.0, driver none\n"));
  EXPECT_THAT(text, HasSubstr("cudaGetDeviceCount failed: error 35 (CUDA driver version is "
                              "insufficient for CUDA runtime version)"));
  EXPECT_THAT(text, HasSubstr("  ascend  absent\n"));
  EXPECT_THAT(text, HasSubstr("no RDMA devices under /sys/class/infiniband"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("configured ")));  // the caller did not say
}

// A usable CUDA runtime makes type 3 work here: device buffers staged, the reason printed.
TEST(DoctorReport, GpuDirectWithUsableCudaIsStagedAndSaysWhy) {
  auto host = OpenHostRuntime();
  auto cuda = OpenCudaRuntime(FakeCudart());
  ASSERT_TRUE(cuda->usable()) << cuda->reason();
  auto ascend = OpenAscendRuntime("/nonexistent/libascendcl.so");
  auto ucx = OpenUcxRuntime("/nonexistent/libucp.so.0");
  DoctorReport r = BuildDoctorReport({}, *host, *cuda, *ascend, *ucx, {});
  EXPECT_TRUE(r.transports[3].available);  // gdr
  EXPECT_THAT(r.transports[3].detail, HasSubstr("device buffers are staged through pinned host "
                                                "memory (UCX is not usable here: "));
  EXPECT_THAT(r.transports[3].detail, HasSubstr("values go over TCP"));
  EXPECT_TRUE(r.trans_types[3].works);
}

TEST(DoctorReport, SaysWhetherTheConfiguredTransportWorksHere) {
  auto host = OpenHostRuntime();
  auto cuda = OpenCudaRuntime("/nonexistent/libcudart.so");
  auto ascend = OpenAscendRuntime("/nonexistent/libascendcl.so");
  auto ucx = OpenUcxRuntime("/nonexistent/libucp.so.0");
  DoctorReport r = BuildDoctorReport({}, *host, *cuda, *ascend, *ucx, {});
  r.configured_trans_type = 3;
  r.configured_trans_type_origin = "default";
  EXPECT_THAT(FormatDoctorText(r),
              HasSubstr("configured      eic_trans_type 3 (from default) fails here\n"));
  EXPECT_THAT(FormatDoctorJson(r),
              HasSubstr("\"configured_trans_type\":{\"value\":3,\"origin\":\"default\"}}"));
  r.configured_trans_type = 2;
  r.configured_trans_type_origin = "env:LMCACHE_EIC_TRANS_TYPE";
  EXPECT_THAT(FormatDoctorText(r),
              HasSubstr("eic_trans_type 2 (from env:LMCACHE_EIC_TRANS_TYPE) works here\n"));
}

// A usable UCX with the given resources, as OpenUcxRuntime reports one.
class StaticUcx final : public UcxRuntime {
 public:
  explicit StaticUcx(std::vector<UcxResource> resources) {
    info_.state = RuntimeState::kAvailable;
    info_.library = "libucp.so.0";
    info_.version = "1.13.1";
    info_.resources = std::move(resources);
    info_.memory_types = {"host"};
  }
  const UcxInfo& info() const override { return info_; }

 private:
  UcxInfo info_;
};

// UCX 1.13 on a host without an RDMA device (`ucx_info -d` here).
const std::vector<UcxResource> kSoftwareOnly = {
    {"self", "memory0", "self"}, {"tcp", "lo", "tcp"},         {"tcp", "eth0", "tcp"},
    {"sysv", "memory", "sysv"},  {"posix", "memory", "posix"}, {"cma", "memory", "cma"}};

TEST(DoctorReport, SaysPlainlyWhenUcxHasOnlySoftwareTransports) {
  auto host = OpenHostRuntime();
  auto cuda = OpenCudaRuntime("/nonexistent/libcudart.so");
  auto ascend = OpenAscendRuntime("/nonexistent/libascendcl.so");
  const std::string software_only =
      "  note          UCX has only software transports here (tcp, sysv, posix, cma): a node's "
      "UCX path is node-checked and no faster than TCP\n";

  StaticUcx software(kSoftwareOnly);
  std::string text = FormatDoctorText(BuildDoctorReport({}, *host, *cuda, *ascend, software, {}));
  EXPECT_THAT(text, HasSubstr("  resources     self/memory0, tcp/lo, tcp/eth0, sysv/memory, "
                              "posix/memory, cma/memory\n" +
                              software_only));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("RDMA devices mlx5_0")));  // none seen here

  // RDMA devices in /sys/class/infiniband that UCX does not reach: what a unit or a pod
  // without /dev/infiniband sees.
  text = FormatDoctorText(BuildDoctorReport({}, *host, *cuda, *ascend, software, {"mlx5_0"}));
  EXPECT_THAT(text, HasSubstr(software_only +
                              "  note          RDMA devices mlx5_0 are on this host but UCX "
                              "reaches none of them: is /dev/infiniband withheld from this "
                              "process? (docs/operations.md, \"Running a node with RDMA\")\n"));

  // With an RDMA transport there is nothing to say.
  std::vector<UcxResource> with_rdma = kSoftwareOnly;
  with_rdma.push_back({"rc_mlx5", "mlx5_0:1", "mlx5_0"});
  StaticUcx rdma(with_rdma);
  text = FormatDoctorText(BuildDoctorReport({}, *host, *cuda, *ascend, rdma, {"mlx5_0"}));
  EXPECT_THAT(text, HasSubstr("cma/memory, rc_mlx5/mlx5_0:1\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("only software transports")));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("  note ")));

  // Nor without a usable UCX: the reason says why.
  auto absent = OpenUcxRuntime("/nonexistent/libucp.so.0");
  text = FormatDoctorText(BuildDoctorReport({}, *host, *cuda, *ascend, *absent, {"mlx5_0"}));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("  note ")));
}

TEST(DoctorReport, JsonIsValidWhateverBytesThePathsAndMessagesHold) {
  auto host = OpenHostRuntime();
  auto cuda = OpenCudaRuntime("/nonexistent/libcudart.so");
  auto ascend = OpenAscendRuntime("/nonexistent/libascendcl.so");
  RuntimeOptions options;
  options.cuda_runtime_library = std::string("/opt/\"cuda\"\\lib\n\x01\0x", 19);
  options.ascend_runtime_library = "/opt/caf\xc3\xa9/\xff\xfe/libascendcl.so";
  auto ucx = OpenUcxRuntime("/nonexistent/libucp.so.0");
  DoctorReport r = BuildDoctorReport(options, *host, *cuda, *ascend, *ucx, {"mlx5_\x1b[0m"});
  r.configured_trans_type_origin =
      "file:/tmp/a\x80"
      "b.yaml";

  const std::string text = FormatDoctorJson(r);
  ASSERT_TRUE(nlohmann::json::accept(text)) << text;
  const nlohmann::json json = nlohmann::json::parse(text);
  // Valid UTF-8, quotes, backslashes, control bytes and a NUL round-trip exactly.
  EXPECT_EQ(json["options"]["cuda_runtime_library"].get<std::string>(),
            options.cuda_runtime_library);
  EXPECT_EQ(json["rdma_devices"][0].get<std::string>(), "mlx5_\x1b[0m");
  // Invalid UTF-8 becomes U+FFFD, one per bad byte; the valid "caf\u00e9" stays.
  EXPECT_EQ(json["options"]["ascend_runtime_library"].get<std::string>(),
            "/opt/caf\xc3\xa9/\xef\xbf\xbd\xef\xbf\xbd/libascendcl.so");
  EXPECT_EQ(json["configured_trans_type"]["origin"].get<std::string>(),
            "file:/tmp/a\xef\xbf\xbd"
            "b.yaml");
  EXPECT_EQ(text.find('\n'), text.size() - 1);  // one line
}

}  // namespace
}  // namespace kvport
