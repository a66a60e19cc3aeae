// SPDX-License-Identifier: Apache-2.0
// `kvport doctor` end to end: runs the binary (hence LABELS needs-exec).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace {

using ::testing::HasSubstr;

struct CliRun {
  int exit_code = -1;
  std::string out;
};

// Runs `kvport <args>` with `env` prefixed (an `env` command line), stdout captured.
CliRun RunKvport(const std::string& env, const std::string& args) {
  const std::string command =
      "env -u LMCACHE_CONFIG_FILE " + env + " " + KVPORT_BINARY + " " + args + " 2>/dev/null";
  CliRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0)
    run.out.append(buf, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(DoctorCli, MissingCudaPathReadsAsAbsentWithThePathAndExitsZero) {
  CliRun run = RunKvport(
      "KVPORT_CUDA_RUNTIME_LIBRARY=/nonexistent/libcudart.so.13 "
      "KVPORT_ASCEND_RUNTIME_LIBRARY=/nonexistent/libascendcl.so",
      "doctor --json");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("{\"name\":\"cuda\",\"state\":\"absent\""));
  EXPECT_THAT(run.out,
              HasSubstr("libcudart not found; tried /nonexistent/libcudart.so.13 (No such file"));
  EXPECT_THAT(run.out, HasSubstr("{\"name\":\"ascend\",\"state\":\"absent\""));
  EXPECT_THAT(run.out, HasSubstr("{\"value\":1,\"name\":\"TCP\",\"works\":true"));
  EXPECT_THAT(run.out, HasSubstr("{\"value\":3,\"name\":\"GPUDirect RDMA\",\"works\":false"));
}

TEST(DoctorCli, ConfigFileNamesTheRuntimesAndTheTransport) {
  const std::string yaml =
      testing::TempDir() + "kvport_doctor_cli_test_" + std::to_string(getpid()) + ".yaml";
  {
    std::ofstream f(yaml);
    f << "cuda_runtime_library: " << KVPORT_FAKE_CUDART << "\n"
      << "ascend_runtime_library: " << KVPORT_FAKE_ASCENDCL << "\n"
      << "eic_trans_type: 2\n";
  }
  CliRun run = RunKvport("", "doctor --config " + yaml);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("  cuda    available\n"));
  EXPECT_THAT(run.out, HasSubstr("  ascend  available\n"));
  EXPECT_THAT(run.out,
              HasSubstr("configured      eic_trans_type 2 (from file:" + yaml + ") works here\n"));
  // With usable CUDA, GPUDirect works here: device buffers staged, and it says why.
  EXPECT_THAT(run.out, HasSubstr("3 GPUDirect RDMA  works: "));
  EXPECT_THAT(run.out, HasSubstr("device buffers are staged through pinned host memory"));
  std::remove(yaml.c_str());
}

// UCX is looked for where ucx_library / KVPORT_UCX_LIBRARY says, else by its soname.
TEST(DoctorCli, ReportsUcxWhereTheConfigurationSays) {
  CliRun missing = RunKvport("KVPORT_UCX_LIBRARY=/nonexistent/libucp.so.0", "doctor");
  EXPECT_EQ(missing.exit_code, 0) << missing.out;
  EXPECT_THAT(missing.out, HasSubstr("ucx       absent\n  looked for    ucx_library="
                                     "/nonexistent/libucp.so.0\n"));
  if (std::string(KVPORT_TEST_UCP_LIBRARY).empty()) GTEST_SKIP() << "no libucp at build time";
  CliRun found = RunKvport("", "doctor");
  EXPECT_EQ(found.exit_code, 0) << found.out;
  EXPECT_THAT(found.out,
              HasSubstr("ucx       available\n  looked for    ucx_library=(libucp.so.0)\n"
                        "  library       libucp.so.0 ("));
  EXPECT_THAT(found.out, HasSubstr("  memory types  host"));
  EXPECT_THAT(found.out, HasSubstr("tcp/lo"));
  EXPECT_THAT(found.out, HasSubstr("  rdma  available: UCX 1."));
  EXPECT_THAT(found.out, HasSubstr("node-checked UCX messages with a node that offers UCX"));
}

TEST(DoctorCli, MissingConfigFileIsAnError) {
  CliRun run = RunKvport("", "doctor --config /nonexistent/kvport.yaml");
  EXPECT_EQ(run.exit_code, 1);
}

}  // namespace
