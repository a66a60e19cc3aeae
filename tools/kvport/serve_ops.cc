// SPDX-License-Identifier: Apache-2.0
#include "serve_ops.h"

#include <fmt/core.h>

#include "commands.h"
#include "common/escape_text.h"
#include "device/doctor_report.h"
#include "kvport/device.h"
#include "kvport/host_info.h"
#include "kvport/log.h"
#include "kvport/size.h"
#include "kvport/transport.h"

namespace kvport::cli {

Status ApplyLogSettings(const Config& config) {
  if (!log::SetFormatByName(config.log_format)) {
    return Status::InvalidArgument("log_format '" + config.log_format + "' is not text or json");
  }
  if (!LogLevelGivenOnCommandLine() && !log::SetLevelByName(config.log_level)) {
    return Status::InvalidArgument("log_level '" + config.log_level + "' is not a log level");
  }
  return Status::Ok();
}

std::string StartupLine(const Server& node, const ServerOptions& options, const Config& config,
                        const std::vector<FlagValue>& flags, const http::HttpServer* http) {
  std::string listen = "tcp " + node.address();
  std::string transports = "tcp";
  if (!node.unix_socket_path().empty()) {
    listen += ", unix " + EscapeText(node.unix_socket_path());
    transports += options.shared_memory ? ", unix, shm" : ", unix";
  }
  if (http != nullptr) listen += fmt::format(", {} {}", http->scheme(), http->address());

  std::string settings;
  auto add = [&settings](std::string_view text) {
    if (!settings.empty()) settings += ", ";
    settings += text;
  };
  for (const ConfigEntry& e : config.entries) {
    bool overridden = false;
    for (const FlagValue& f : flags)
      overridden = overridden || f.key == e.key;
    if (overridden || e.source == ConfigSource::kDefault) continue;
    const std::string value = e.is_string        ? "\"" + EscapeText(e.value, '"') + "\""
                              : !e.human.empty() ? e.human
                                                 : EscapeText(e.value);
    add(fmt::format("{}={} ({})", EscapeText(e.key), value, EscapeText(e.origin)));
  }
  for (const FlagValue& f : flags)
    add(fmt::format("{}=\"{}\" (flag {})", f.key, EscapeText(f.value, '"'), f.flag));
  if (settings.empty()) settings = "none";

  const std::string cluster =
      options.cluster.empty()
          ? std::string("standalone")
          : fmt::format("cluster {} (epoch {:016x})", EscapeText(options.cluster), node.epoch());
  return fmt::format(
      "kvport {} serving: {}; capacity {}; transports {}; auth {}; {}; {} I/O threads; "
      "non-default settings: {}",
      KVPORT_VERSION, listen, FormatSize(node.Stats().Get("capacity_bytes")), transports,
      node.auth_mode(), cluster, options.threads == 0 ? HostCpuCount() : options.threads, settings);
}

Result<std::unique_ptr<http::HttpServer>> StartHttpEndpoint(std::string_view listen,
                                                            const Config& config) {
  http::HttpOptions options;
  options.listen = std::string(listen);
  options.context.version = KVPORT_VERSION;
  // HttpOptions::authorize stays unset: the attached node's admin tokens guard every page
  // but /health (Server::GrantsAdmin).
  // HTTPS with the node's certificate, never with its tls_ca_file (HttpOptions says why).
  options.tls_cert_file = config.tls_cert_file;
  options.tls_key_file = config.tls_key_file;

  RuntimeOptions runtime_options;
  runtime_options.cuda_runtime_library = config.cuda_runtime_library;
  runtime_options.ascend_runtime_library = config.ascend_runtime_library;
  runtime_options.ucx_library = config.ucx_library;
  if (ConfigureDeviceRuntimes(runtime_options).ok()) {
    const DoctorReport report =
        BuildDoctorReport(runtime_options, HostRuntime(), CudaRuntime(), AscendRuntime(),
                          *OpenUcxRuntime(runtime_options.ucx_library), ListRdmaDevices());
    for (const RuntimeInfo& r : report.runtimes) {
      options.context.runtimes.push_back(
          {std::string(RuntimeKindName(r.kind)), r.state == RuntimeState::kAvailable, r.version});
    }
    for (const TransportReport& t : report.transports)
      options.context.transports.push_back({t.name, t.available, ""});
  }
  return http::HttpServer::Start(options);
}

}  // namespace kvport::cli
