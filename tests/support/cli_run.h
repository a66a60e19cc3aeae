// SPDX-License-Identifier: Apache-2.0
// RunCli: runs a kvport command line to completion for the tests of the CLI, with its stdout and
// stderr captured through files in the test's own directory. Tests that use it are labelled
// needs-exec.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace kvport::testing {

struct CliRun {
  int exit_code = -1;  // -1 when the command did not exit normally
  std::string out;     // stdout
  std::string err;     // stderr
};

// The whole file (empty when it cannot be read).
inline std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `PREFIX 'BINARY' ARGS <STDIN` through the shell (PREFIX: e.g. "env -u VAR NAME=value";
// ARGS as the shell splits them), its stdout and stderr in `dir`/stdout and `dir`/stderr.
inline CliRun RunCli(const std::string& binary, const std::string& args,
                     const std::filesystem::path& dir, const std::string& prefix = "",
                     const std::string& stdin_path = "/dev/null") {
  const std::filesystem::path out = dir / "stdout", err = dir / "stderr";
  const std::string cmd = prefix + (prefix.empty() ? "" : " ") + "'" + binary + "' " + args +
                          " <'" + stdin_path + "' >'" + out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = Slurp(out);
  run.err = Slurp(err);
  return run;
}

}  // namespace kvport::testing
