// SPDX-License-Identifier: Apache-2.0
#include "bench/ucx_perftest_baseline.h"

#include <fmt/core.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/child_process.h"

namespace kvport::bench {

namespace {}  // namespace

Result<double> ParseUcxPerftestBandwidth(const std::string& output) {
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("Final:")) continue;
    // Final: iterations, latency 50%ile / average / overall, bandwidth average / overall,
    // message rate average / overall.
    std::istringstream fields(line.substr(6));
    std::vector<double> values;
    double v = 0;
    while (fields >> v)
      values.push_back(v);
    if (values.size() >= 6 && values[5] > 0) return values[5];
    break;
  }
  return Status::Corruption("ucx_perftest printed no \"Final:\" bandwidth: " +
                            output.substr(0, 2000));
}

Result<PhaseResult> RunUcxPerftest(Op op, const UcxPerftestOptions& options) {
  if (op == Op::kExists) return Status::InvalidArgument("ucx_perftest has no exists phase");
  const std::string program =
      options.program.empty() ? FindProgram("ucx_perftest") : options.program;
  if (program.empty() || ::access(program.c_str(), X_OK) != 0) {
    return Status::NotFound(
        "ucx_perftest not found (Debian's ucx-utils; scripts/bootstrap installs it)");
  }
  const std::string test = op == Op::kPut ? "ucp_put_bw" : "ucp_get";
  const uint64_t messages = std::clamp<uint64_t>(options.messages, 1, 1000);
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(options.max_seconds * 1000));
  const std::string size = std::to_string(options.message_bytes);
  const std::string iterations = std::to_string(messages);
  std::string output;
  Status last = Status::Unavailable("ucx_perftest did not run");
  // The client can reach the server before it listens: a few attempts, each with a new pair.
  for (int attempt = 0; attempt < 5 && std::chrono::steady_clock::now() < give_up; ++attempt) {
    KVPORT_ASSIGN_OR_RETURN(uint16_t port, PickFreeLoopbackPort());
    const std::string p = std::to_string(port);
    KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<BackgroundProcess> server,
                            BackgroundProcess::Start({program, "-p", p}));
    std::this_thread::sleep_for(std::chrono::milliseconds(100 << attempt));
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(
        give_up - std::chrono::steady_clock::now());
    int status = 0;
    Result<std::string> ran = RunCapturingStdout(
        {program, "127.0.0.1", "-p", p, "-t", test, "-s", size, "-n", iterations, "-w", iterations},
        std::max(left, std::chrono::seconds(1)), &status);
    if (!ran.ok()) return ran.status().WithContext("ucx_perftest " + test);
    output = std::move(ran).value();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      KVPORT_ASSIGN_OR_RETURN(double mb_per_second, ParseUcxPerftestBandwidth(output));
      const char* tls = ::getenv("UCX_TLS");
      PhaseResult r;
      r.system = "ucx_perftest";
      r.variant = fmt::format("{}, UCX_TLS={}", test, tls != nullptr ? tls : "(unset)");
      r.op = op;
      r.calls = messages;
      r.keys = messages;
      r.bytes = messages * options.message_bytes;
      r.seconds = static_cast<double>(r.bytes) / (mb_per_second * 1024 * 1024);
      return r;
    }
    last = Status::Unavailable(fmt::format("ucx_perftest {} exited with status {}: {}", test,
                                           WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                                           output.substr(0, 2000)));
  }
  return last;
}

}  // namespace kvport::bench
