// SPDX-License-Identifier: Apache-2.0
// Running another program for a baseline or a peer: `kvport bench`'s Python-driven peers
// (peer_driver.h) and ucx_perftest (ucx_perftest_baseline.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kvport/status.h"

namespace kvport::bench {

// Runs `args` (args[0] a path) in a process group of its own with stdout into a pipe (returned
// whole) and stdin and stderr on /dev/null; the exit status into *status. A program that has
// not finished by `deadline` is killed with everything it started (its group: a peer's server
// processes): Timeout. The group is killed when the program ends too, so nothing it started
// outlives it.
Result<std::string> RunCapturingStdout(const std::vector<std::string>& args,
                                       std::chrono::seconds deadline, int* status);

// A loopback TCP port that was free a moment ago (bind port 0, read it back, close): another
// process may take it before the program meant to use it binds it, so callers retry.
Result<uint16_t> PickFreeLoopbackPort();

// A program running beside the caller (a baseline's server side), in a process group of its
// own with its stdio on /dev/null; destroying it kills the group and reaps the program.
class BackgroundProcess {
 public:
  static Result<std::unique_ptr<BackgroundProcess>> Start(const std::vector<std::string>& args);
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  pid_t pid() const { return pid_; }
  // SIGTERM to the program, then waits up to `grace` for it to exit (its group is killed after,
  // or at the deadline: Timeout). OK when it exited with status 0.
  Status Terminate(std::chrono::milliseconds grace);

 private:
  explicit BackgroundProcess(pid_t pid) : pid_(pid) {}
  const pid_t pid_;
  bool reaped_ = false;
};

// `name` when it names a file (has a '/') and is executable, else the first executable `name`
// in $PATH; "" when there is none.
std::string FindProgram(const std::string& name);

}  // namespace kvport::bench
