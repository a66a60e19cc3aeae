// SPDX-License-Identifier: Apache-2.0
// The engine integrations `kvport doctor` reports: each way an engine reaches kvport
// (docs/python.md), and whether the Python environment the engines run in has that engine and
// kvport's Python package, with the engine's version beside the one kvport is tested with.
//
// The environment is asked by running its interpreter once (`PYTHON -c ...`): it reads installed
// distributions' metadata (importlib.metadata) and imports nothing of an engine, so the probe
// takes tens of milliseconds and cannot fail on an engine's own import-time checks.
#pragma once

#include <string>
#include <vector>

namespace kvport::cli {

struct EngineIntegration {
  std::string name;            // "LMCache (in-process)"
  std::string how;             // what a user configures: "remote_url: eic://HOST:PORT"
  std::string engine;          // its distribution, as pip names it ("lmcache")
  std::string tested_version;  // the version kvport's engine tests pin
  std::string also_needs;  // another distribution it needs ("" none): vLLM's goes through LMCache
  std::string installed;   // the environment's version of `engine`; empty: not installed
  // "ready", "ready (untested version)", "not installed: DIST", "kvport not installed", or
  // "unknown" when the environment could not be asked.
  std::string state;
};

struct EngineIntegrationsReport {
  std::string python;             // the interpreter asked (as given, then as it reports itself)
  std::string python_version;     // its version; empty when it could not be run
  bool kvport_installed = false;  // its kvport package (the wheel) is importable
  std::string error;              // why the interpreter could not be asked; empty when it was
  std::vector<EngineIntegration> integrations;
};

// Asks `python` (a path or a name on PATH) which engines it has, and fills every integration's
// state. Never fails: an interpreter that cannot be run or answers nonsense gives `error` and
// every state "unknown".
EngineIntegrationsReport ProbeEngineIntegrations(const std::string& python);

// The interpreter `kvport doctor` asks without --python: $KVPORT_PYTHON (the kvport wheel's
// console script sets it to its own interpreter), else "python3".
std::string DefaultEnginePython();

// Text lines for `kvport doctor` (a section of its own), and the object of its --json.
std::string FormatEngineIntegrationsText(const EngineIntegrationsReport& report);
std::string FormatEngineIntegrationsJson(const EngineIntegrationsReport& report);

}  // namespace kvport::cli
