// SPDX-License-Identifier: Apache-2.0
// What `kvport serve` does for operators beside serving: the log settings from the config, the
// HTTP endpoint (--http, http_listen) and the one line logged at start (docs/operations.md).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_server.h"
#include "kvport/config.h"
#include "kvport/server.h"

namespace kvport::cli {

// A serve flag given on the command line, overriding config key `key`.
struct FlagValue {
  std::string key;    // "capacity"
  std::string value;  // "8GiB"
  std::string flag;   // "--capacity"
};

// Applies log_format, and log_level unless --log-level was given (the flag wins).
Status ApplyLogSettings(const Config& config);

// "kvport 0.1.0 serving: tcp 127.0.0.1:7470, unix /tmp/kvport-7470.sock, http (https with TLS)
// 127.0.0.1:9470; capacity 1 GiB; transports tcp, shm; auth none; standalone (or: cluster c1
// (epoch 3f2a...)); 4 I/O threads; non-default settings:
// capacity=8 GiB (flag --capacity), log_level="debug" (env:KVPORT_LOG_LEVEL)".
std::string StartupLine(const Server& node, const ServerOptions& options, const Config& config,
                        const std::vector<FlagValue>& flags, const http::HttpServer* http);

// Starts the HTTP endpoint on `listen` (HOST:PORT or a bare port); /metrics reports this
// host's runtimes and transports as `kvport doctor` finds them with the config's library paths.
// HTTPS when the node has TLS (tls_cert_file, tls_key_file), never asking for a client
// certificate (tls_ca_file is not used: docs/security.md).
Result<std::unique_ptr<http::HttpServer>> StartHttpEndpoint(std::string_view listen,
                                                            const Config& config);

}  // namespace kvport::cli
