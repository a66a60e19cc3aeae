// SPDX-License-Identifier: Apache-2.0
// The kvport CLI's subcommands. Each lives in its own cmd_*.cc, the only files that include
// CLI11. Add*Command registers one subcommand on `app`; when it runs, its callback stores the
// process exit code in *exit_code (0 success, 1 failure with one clear line on stderr,
// 2 usage error).
#pragma once

#include "kvport/status.h"

namespace CLI {
class App;
}

namespace kvport::cli {

// (helpers add their declarations here, one line each)
void AddConfigCommand(CLI::App& app, int* exit_code);
void AddDoctorCommand(CLI::App& app, int* exit_code);
void AddServeCommand(CLI::App& app, int* exit_code);
void AddOpsCommands(CLI::App& app, int* exit_code);  // put, get, exists, del, stat
void AddBenchCommand(CLI::App& app, int* exit_code);
void AddLoadCommand(CLI::App& app, int* exit_code);   // kvport load (cmd_load.cc)
void AddScaleCommand(CLI::App& app, int* exit_code);  // kvport scale (cmd_scale.cc)
void AddDemoCommand(CLI::App& app, int* exit_code);

// Prints "kvport: <status message>" on stderr and returns 1. For commands' error paths.
int Fail(const Status& status);

void AddTopCommand(CLI::App& app, int* exit_code);      // kvport top (cmd_top.cc)
void AddClusterCommand(CLI::App& app, int* exit_code);  // kvport cluster status (cmd_cluster.cc)
// True when the global --log-level was given (it then wins over the config's log_level).
bool LogLevelGivenOnCommandLine();

}  // namespace kvport::cli
