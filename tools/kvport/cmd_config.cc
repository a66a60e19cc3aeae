// SPDX-License-Identifier: Apache-2.0
// `kvport config check [FILE] [--json]`: load a configuration the way the client and the node
// do, and print every effective value with its source, or the error that makes it invalid.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "kvport/config.h"

namespace kvport::cli {

void AddConfigCommand(CLI::App& app, int* exit_code) {
  CLI::App* config = app.add_subcommand("config", "Inspect kvport/LMCache configuration");
  config->require_subcommand(1);

  struct CheckOptions {
    std::string file;
    bool json = false;
  };
  auto options = std::make_shared<CheckOptions>();
  CLI::App* check = config->add_subcommand(
      "check",
      "Validate a YAML config and print every effective value with its source (default, file, "
      "environment). Without FILE, LMCACHE_CONFIG_FILE names it.");
  check->add_option("file", options->file, "YAML file (LMCache client and/or kvport node keys)");
  check->add_flag("--json", options->json, "Print one JSON object instead of text");
  check->callback([options, exit_code] {
    ConfigSources sources;
    if (!options->file.empty()) sources.file = options->file;
    sources.log_warnings = false;  // printed below, with the values
    Result<Config> loaded = LoadConfig(sources);
    if (!loaded.ok()) {
      *exit_code = Fail(loaded.status());
      return;
    }
    const std::string text = options->json ? DescribeConfigJson(*loaded) : DescribeConfig(*loaded);
    std::fputs(text.c_str(), stdout);
    *exit_code = 0;
  });
}

}  // namespace kvport::cli
