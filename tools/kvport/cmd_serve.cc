// SPDX-License-Identifier: Apache-2.0
// `kvport serve [--config FILE] [--listen HOST:PORT] [--unix-socket PATH|auto|""]
// [--capacity SIZE] [--threads N]`: run a cache node in the foreground until SIGINT or SIGTERM,
// then stop gracefully and exit 0.
//
// Settings come from the config (file, LMCACHE_CONFIG_FILE, KVPORT_* environment, defaults;
// see docs/configuration.md); the flags given here override them. By default the node also
// listens on a Unix socket ("auto") and offers shared memory to clients on this host; when that
// socket cannot be created (say a path another user's node left in /tmp), the node serves TCP
// only, with a warning. An explicit path that cannot be bound is an error.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "kvport/config.h"
#include "kvport/host_info.h"
#include "kvport/log.h"
#include "kvport/server.h"
#include "kvport/size.h"

namespace kvport::cli {

namespace {

struct ServeFlags {
  std::string config_file;
  std::optional<std::string> listen;
  std::optional<std::string> unix_socket;
  std::optional<std::string> capacity;
  std::optional<unsigned> threads;
};

Result<ServerOptions> OptionsFrom(const ServeFlags& flags) {
  ConfigSources sources;
  if (!flags.config_file.empty()) sources.file = flags.config_file;
  KVPORT_ASSIGN_OR_RETURN(Config config, LoadConfig(sources));
  const NodeSettings& node = config.node;

  ServerOptions options;
  options.listen = flags.listen.value_or(node.listen);
  options.unix_socket = flags.unix_socket.value_or(node.unix_socket);
  options.shared_memory = node.shared_memory;
  options.max_leases_per_session = node.max_leases_per_session;
  options.max_reservations_per_session = node.max_reservations_per_session;
  options.capacity_bytes = node.capacity;
  if (flags.capacity) {
    Result<uint64_t> parsed = ParseSize(*flags.capacity, SizeUnit::kBytes);
    if (!parsed.ok()) return parsed.status().WithContext("--capacity");
    options.capacity_bytes = *parsed;
    // The config loader applies this rule to the configured value; the flag must obey it too.
    const uint64_t host = HostPhysicalMemoryBytes();
    if (!node.allow_capacity_over_host_memory && host != 0 && options.capacity_bytes > host) {
      return Status::InvalidArgument("--capacity " + *flags.capacity + " (" +
                                     FormatSize(options.capacity_bytes) +
                                     ") exceeds this host's memory (" + FormatSize(host) +
                                     "); set allow_capacity_over_host_memory: true to allow it");
    }
  }
  options.threads = flags.threads.value_or(node.threads);
  options.max_key_bytes = node.max_key_bytes;
  options.max_namespace_bytes = node.max_namespace_bytes;
  options.max_meta_bytes = node.max_meta_bytes;
  options.max_value_bytes = node.max_value_bytes;
  if (flags.capacity && options.max_value_bytes > options.capacity_bytes) {
    // The config requires max_value_bytes <= capacity; a smaller --capacity lowers the limit
    // with it instead of announcing values the node could never hold.
    log::Info("max_value_bytes lowered from {} to the --capacity {}",
              FormatSize(options.max_value_bytes), FormatSize(options.capacity_bytes));
    options.max_value_bytes = options.capacity_bytes;
  }
  options.max_batch_keys = node.max_batch_keys;
  options.max_frame_bytes = node.max_frame_bytes;
  options.max_connection_outstanding_bytes = node.max_connection_outstanding_bytes;
  options.idle_timeout = std::chrono::seconds(node.idle_timeout_secs);
  options.max_connections = node.max_connections;
  options.server_name = std::string("kvport ") + KVPORT_VERSION;
  return options;
}

// Serves until SIGINT or SIGTERM. The signals are blocked before any thread starts (threads
// inherit the mask), so only sigwait() below receives them: no handler runs on an I/O thread.
int Serve(const ServeFlags& flags) {
  Result<ServerOptions> options = OptionsFrom(flags);
  if (!options.ok()) return Fail(options.status());

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr) != 0) {
    return Fail(Status::Internal("cannot block SIGINT/SIGTERM"));
  }

  Result<std::unique_ptr<Server>> server = Server::Start(*options);
  if (!server.ok() && options->unix_socket == "auto") {
    // The automatic socket is a convenience: if the node starts without it, the socket was
    // what failed, and TCP clients are served as before.
    ServerOptions tcp_only = *options;
    tcp_only.unix_socket.clear();
    Result<std::unique_ptr<Server>> retried = Server::Start(tcp_only);
    if (retried.ok()) {
      log::Warn("serving TCP only, without shared memory for clients on this host: {}",
                server.status().ToString());
    }
    server = std::move(retried);
  }
  if (!server.ok()) return Fail(server.status());
  std::printf("kvport: serving on %s\n", (*server)->address().c_str());
  std::fflush(stdout);

  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) != 0) {
  }
  log::Info("received {}: stopping (finishing requests in flight)",
            signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  (*server)->Stop();
  return 0;
}

}  // namespace

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* serve = app.add_subcommand(
      "serve",
      "Run a kvport cache node in the foreground (SIGINT/SIGTERM: finish requests in flight, "
      "exit 0). Flags override the config.");
  serve->add_option("--config", flags->config_file,
                    "YAML config file (default: $LMCACHE_CONFIG_FILE, else defaults)");
  serve->add_option("--listen", flags->listen,
                    "HOST:PORT to listen on (default 127.0.0.1:7470; port 0 = ephemeral)");
  serve->add_option("--unix-socket", flags->unix_socket,
                    "Unix socket for clients on this host (shared memory): an absolute path, "
                    "\"auto\" (default: $XDG_RUNTIME_DIR or /tmp, kvport-PORT.sock) or \"\" "
                    "for none");
  serve->add_option("--capacity", flags->capacity,
                    "arena size, e.g. 1GiB, 512MiB or a number of bytes (default 1GiB)");
  serve->add_option("--threads", flags->threads, "I/O threads (default 0 = one per core)");
  serve->callback([flags, exit_code] { *exit_code = Serve(*flags); });
}

}  // namespace kvport::cli
