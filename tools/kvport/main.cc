// SPDX-License-Identifier: Apache-2.0
// kvport: one binary, many subcommands (serve, doctor, config, put/get/..., bench, demo).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "commands.h"
#include "kvport/log.h"

namespace kvport::cli {

int Fail(const Status& status) {
  std::fprintf(stderr, "kvport: %s\n", status.ToString().c_str());
  return 1;
}

namespace {
bool g_log_level_given = false;
}  // namespace

bool LogLevelGivenOnCommandLine() {
  return g_log_level_given;
}

}  // namespace kvport::cli

int main(int argc, char** argv) {
  CLI::App app{"kvport: an open remote KV-cache for LLM inference"};
  app.require_subcommand(1);
  std::string log_level = "info";
  CLI::Option* log_level_option =
      app.add_option("--log-level", log_level,
                     "debug, info, warn, error or off (default: the config's log_level, info)")
          ->check(CLI::IsMember({"debug", "info", "warn", "error", "off"}));
  app.parse_complete_callback([&] {
    kvport::log::SetLevelByName(log_level);
    kvport::cli::g_log_level_given = log_level_option->count() > 0;
  });

  int exit_code = 0;
  app.add_subcommand("version", "Print kvport's version")->callback([] {
    std::printf("kvport %s\n", KVPORT_VERSION);
  });
  kvport::cli::AddConfigCommand(app, &exit_code);
  kvport::cli::AddDoctorCommand(app, &exit_code);
  kvport::cli::AddServeCommand(app, &exit_code);
  kvport::cli::AddOpsCommands(app, &exit_code);
  kvport::cli::AddBenchCommand(app, &exit_code);
  kvport::cli::AddLoadCommand(app, &exit_code);
  kvport::cli::AddScaleCommand(app, &exit_code);
  kvport::cli::AddDemoCommand(app, &exit_code);
  kvport::cli::AddTopCommand(app, &exit_code);
  kvport::cli::AddClusterCommand(app, &exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a ParseError that exits 0; every real usage error exits 2 (see commands.h).
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return exit_code;
}
