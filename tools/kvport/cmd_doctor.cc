// SPDX-License-Identifier: Apache-2.0
// `kvport doctor [--json] [--config FILE]`: what this host offers kvport. Accelerator runtimes
// (found where, version, devices, or why not), transports, and which eic_trans_type values a
// client here would initialize with, and which engine integrations the engines' Python
// environment can use (engine_integrations.h). A host without accelerators is a normal host:
// exit 0.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "device/doctor_report.h"
#include "engine_integrations.h"
#include "kvport/config.h"
#include "kvport/device.h"
#include "kvport/transport.h"

namespace kvport::cli {

void AddDoctorCommand(CLI::App& app, int* exit_code) {
  struct DoctorOptions {
    std::string config_file;
    std::string python;
    bool json = false;
  };
  auto options = std::make_shared<DoctorOptions>();
  CLI::App* doctor = app.add_subcommand(
      "doctor",
      "Report this host's accelerator runtimes, transports and the eic_trans_type values that "
      "work here");
  doctor->add_flag("--json", options->json, "Print one JSON object instead of text");
  doctor->add_option("--python", options->python,
                     "The Python interpreter the engines run in, asked which engines it has "
                     "(default: $KVPORT_PYTHON, which the kvport wheel's console script sets "
                     "to its own, else python3)");
  doctor->add_option(
      "--config", options->config_file,
      "YAML config to take cuda_runtime_library / ascend_runtime_library / ucx_library and "
      "eic_trans_type from (default: LMCACHE_CONFIG_FILE, then the environment)");
  doctor->callback([options, exit_code] {
    // The runtime library paths come from the one config loader (file, KVPORT_* environment,
    // defaults). A bad explicit --config is an error; a bad LMCACHE_CONFIG_FILE only a warning,
    // because doctor is what one runs to find out what is wrong.
    ConfigSources sources;
    if (!options->config_file.empty()) sources.file = options->config_file;
    Result<Config> config = LoadConfig(sources);
    if (!config.ok() && !options->config_file.empty()) {
      *exit_code = Fail(config.status());
      return;
    }
    RuntimeOptions runtime_options;
    int trans_type = -1;
    std::string trans_type_origin;
    if (config.ok()) {
      runtime_options.cuda_runtime_library = config->cuda_runtime_library;
      runtime_options.ascend_runtime_library = config->ascend_runtime_library;
      runtime_options.ucx_library = config->ucx_library;
      trans_type = static_cast<int>(config->eic_trans_type);
      const ConfigEntry* entry = config->FindEntry("eic_trans_type");
      trans_type_origin = entry != nullptr ? entry->origin : "";
    } else {
      std::fprintf(stderr, "kvport: warning: configuration not loaded (%s); using defaults\n",
                   config.status().ToString().c_str());
    }
    Status configured = ConfigureDeviceRuntimes(runtime_options);
    if (!configured.ok()) {
      *exit_code = Fail(configured);
      return;
    }
    DoctorReport report =
        BuildDoctorReport(runtime_options, HostRuntime(), CudaRuntime(), AscendRuntime(),
                          *OpenUcxRuntime(runtime_options.ucx_library), ListRdmaDevices());
    report.configured_trans_type = trans_type;
    report.configured_trans_type_origin = trans_type_origin;
    const EngineIntegrationsReport engines =
        ProbeEngineIntegrations(options->python.empty() ? DefaultEnginePython() : options->python);
    std::string text;
    if (options->json) {
      nlohmann::ordered_json j = nlohmann::ordered_json::parse(FormatDoctorJson(report));
      j["engine_integrations"] =
          nlohmann::ordered_json::parse(FormatEngineIntegrationsJson(engines));
      text = j.dump() + "\n";
    } else {
      text = FormatDoctorText(report) + FormatEngineIntegrationsText(engines);
    }
    std::fputs(text.c_str(), stdout);
    if (config.ok() && config->node.insecure && config->node.tokens_file.empty()) {
      // The node this config starts would be open to its whole network (docs/security.md).
      std::fprintf(stderr,
                   "kvport doctor: warning: the node config sets insecure: true without a "
                   "tokens_file: `kvport serve` would let anyone who reaches %s read, overwrite "
                   "and delete every key\n",
                   config->node.listen.c_str());
    }
    *exit_code = 0;
  });
}

}  // namespace kvport::cli
