// SPDX-License-Identifier: Apache-2.0
// `kvport serve [--config FILE] [--listen HOST:PORT] [--unix-socket PATH|auto|""]
// [--capacity SIZE] [--threads N] [--disk DIR [--disk-capacity SIZE] [--disk-restore on|off]]
// [--ucx] [--http HOST:PORT]
// [--cluster NAME --etcd HOST:PORT[,...]
// [--advertise HOST:PORT] [--node-id ID] [--lease-ttl SECS]]`: run a cache node in the
// foreground until SIGINT or SIGTERM, then stop gracefully and exit 0. With --cluster the node
// registers in etcd (docs/cluster.md) and deregisters when it stops.
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
#include <vector>

#include "commands.h"
#include "common/endpoint_text.h"
#include "http/descriptor_limit.h"
#include "kvport/config.h"
#include "kvport/host_info.h"
#include "kvport/log.h"
#include "kvport/server.h"
#include "kvport/size.h"
#include "serve_ops.h"

namespace kvport::cli {

namespace {

struct ServeFlags {
  std::string config_file;
  std::optional<std::string> listen;
  std::optional<std::string> unix_socket;
  std::optional<std::string> capacity;
  std::optional<unsigned> threads;
  std::optional<uint32_t> busy_poll_us;
  bool ucx = false;
  std::optional<std::string> disk;
  std::optional<std::string> disk_capacity;
  std::optional<std::string> disk_restore;
  bool insecure = false;
  std::optional<std::string> http;  // --http HOST:PORT or PORT
  std::optional<std::string> resp;  // --resp HOST:PORT or PORT
  std::optional<std::string> cluster;
  std::optional<std::string> etcd;
  std::optional<std::string> advertise;
  std::optional<std::string> node_id;
  std::optional<uint32_t> lease_ttl;
};

Result<ServerOptions> OptionsFrom(const ServeFlags& flags, Config* loaded) {
  ConfigSources sources;
  if (!flags.config_file.empty()) sources.file = flags.config_file;
  KVPORT_ASSIGN_OR_RETURN(Config config, LoadConfig(sources));
  *loaded = config;
  const NodeSettings& node = config.node;

  ServerOptions options;
  options.listen = flags.listen.value_or(node.listen);
  options.unix_socket = flags.unix_socket.value_or(node.unix_socket);
  options.resp_listen = flags.resp.value_or(node.resp_listen);
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
  options.max_queued_response_bytes = node.max_queued_response_bytes;
  options.max_input_buffer_bytes = node.max_input_buffer_bytes;
  options.max_index_bytes = node.max_index_bytes;
  options.max_reserved_bytes = node.max_reserved_bytes;
  options.max_pinned_bytes = node.max_pinned_bytes;
  options.idle_timeout = std::chrono::seconds(node.idle_timeout_secs);
  options.busy_poll = std::chrono::microseconds(flags.busy_poll_us.value_or(config.busy_poll_us));
  options.ucx = flags.ucx || node.ucx;
  options.ucx_library = config.ucx_library;
  options.disk_dir = flags.disk.value_or(node.disk_dir);
  options.disk_capacity = node.disk_capacity;
  if (flags.disk_capacity) {
    Result<uint64_t> parsed = ParseSize(*flags.disk_capacity, SizeUnit::kBytes);
    if (!parsed.ok()) return parsed.status().WithContext("--disk-capacity");
    options.disk_capacity = *parsed;
  }
  KVPORT_ASSIGN_OR_RETURN(options.namespace_on_disk, ParseNamespaceTiers(node.namespace_tiers));
  KVPORT_ASSIGN_OR_RETURN(options.resp_fold_namespaces, ParseRespFoldPairs(node.resp_fold_pairs));
  options.disk_restore = flags.disk_restore ? *flags.disk_restore == "on" : node.disk_restore;
  options.disk_stop_flush = std::chrono::seconds(node.disk_stop_flush_secs);
  options.request_timeout = std::chrono::seconds(node.request_timeout_secs);
  options.min_request_bytes_per_sec = node.min_request_bytes_per_sec;
  options.max_connections = node.max_connections;
  options.hello_timeout = std::chrono::seconds(node.hello_timeout_secs);
  options.max_unauthenticated_per_address = node.max_unauthenticated_per_address;
  options.tokens_file = node.tokens_file;
  options.insecure = flags.insecure || node.insecure;
  options.tls_cert_file = config.tls_cert_file;
  options.tls_key_file = config.tls_key_file;
  options.tls_ca_file = config.tls_ca_file;
  options.server_name = std::string("kvport ") + KVPORT_VERSION;

  options.cluster = flags.cluster.value_or(node.cluster);
  KVPORT_ASSIGN_OR_RETURN(options.etcd, SplitEtcdEndpoints(flags.etcd.value_or(node.etcd)));
  options.etcd_tls_ca_file = node.etcd_tls_ca_file;
  options.etcd_tls_cert_file = node.etcd_tls_cert_file;
  options.etcd_tls_key_file = node.etcd_tls_key_file;
  options.etcd_user = node.etcd_user;
  options.etcd_password_file = node.etcd_password_file;
  options.advertise = flags.advertise.value_or(node.advertise);
  options.node_id = flags.node_id.value_or(node.node_id);
  options.lease_ttl_secs = flags.lease_ttl.value_or(node.lease_ttl_secs);
  options.on_lease_loss = node.on_lease_loss == "drop" ? ServerOptions::LeaseLoss::kDrop
                                                       : ServerOptions::LeaseLoss::kKeep;
  if (!options.cluster.empty() && options.etcd.empty()) {
    return Status::InvalidArgument("--cluster " + options.cluster +
                                   " needs --etcd HOST:PORT[,HOST:PORT] (or etcd: in the config)");
  }
  for (const std::string& endpoint : options.etcd) {
    if (endpoint.empty()) {
      return Status::InvalidArgument("--etcd: an empty endpoint; expected HOST:PORT[,HOST:PORT]");
    }
  }
  return options;
}

// Serves until SIGINT or SIGTERM. The signals are blocked before any thread starts (threads
// inherit the mask), so only sigwait() below receives them: no handler runs on an I/O thread.
int Serve(const ServeFlags& flags) {
  Config config;
  Result<ServerOptions> options = OptionsFrom(flags, &config);
  if (!options.ok()) return Fail(options.status());
  Status logging = ApplyLogSettings(config);
  if (!logging.ok()) return Fail(logging);

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);  // re-read the tokens file and TLS files
  if (pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr) != 0) {
    return Fail(Status::Internal("cannot block SIGINT/SIGTERM"));
  }

  // The HTTP endpoint starts first, so that /health answers 503 "starting" while the node
  // allocates its arena, and stops last, so that it answers 503 "draining" during Stop.
  const std::string http_listen = flags.http.value_or(config.node.http_listen);
  // Before any listener: a descriptor for every data and HTTP connection (docs/operations.md).
  const std::string descriptors = http::CheckDescriptorLimit(
      options->max_connections, http_listen.empty() ? 0 : http::kDefaultMaxConnections);
  if (!descriptors.empty()) log::Warn("{}", descriptors);
  std::unique_ptr<http::HttpServer> http;
  if (!http_listen.empty()) {
    Result<std::unique_ptr<http::HttpServer>> started = StartHttpEndpoint(http_listen, config);
    if (!started.ok()) return Fail(started.status().WithContext("--http / http_listen"));
    http = std::move(started).value();
  }

  Result<std::unique_ptr<Server>> server = Server::Start(*options);
  // An unreachable etcd is not the socket's fault: no second attempt (and no second wait).
  const bool etcd_failed = !options->cluster.empty() && !server.ok() &&
                           server.status().code() == StatusCode::kUnavailable;
  if (!server.ok() && options->unix_socket == "auto" && !etcd_failed) {
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
  if (http != nullptr) http->Attach(server->get());
  std::vector<FlagValue> given;
  if (flags.listen) given.push_back({"listen", *flags.listen, "--listen"});
  if (flags.unix_socket) given.push_back({"unix_socket", *flags.unix_socket, "--unix-socket"});
  if (flags.capacity) given.push_back({"capacity", *flags.capacity, "--capacity"});
  if (flags.threads) given.push_back({"threads", std::to_string(*flags.threads), "--threads"});
  if (flags.busy_poll_us) {
    given.push_back({"busy_poll_us", std::to_string(*flags.busy_poll_us), "--busy-poll-us"});
  }
  if (flags.ucx) given.push_back({"ucx", "true", "--ucx"});
  if (flags.disk) given.push_back({"disk_dir", *flags.disk, "--disk"});
  if (flags.disk_capacity) {
    given.push_back({"disk_capacity", *flags.disk_capacity, "--disk-capacity"});
  }
  if (flags.disk_restore) {
    given.push_back(
        {"disk_restore", *flags.disk_restore == "on" ? "true" : "false", "--disk-restore"});
  }
  if (flags.http) given.push_back({"http_listen", *flags.http, "--http"});
  if (flags.resp) given.push_back({"resp_listen", *flags.resp, "--resp"});
  if (flags.cluster) given.push_back({"cluster", *flags.cluster, "--cluster"});
  if (flags.etcd) given.push_back({"etcd", *flags.etcd, "--etcd"});
  if (flags.advertise) given.push_back({"advertise", *flags.advertise, "--advertise"});
  if (flags.node_id) given.push_back({"node_id", *flags.node_id, "--node-id"});
  if (flags.lease_ttl) {
    given.push_back({"lease_ttl_secs", std::to_string(*flags.lease_ttl), "--lease-ttl"});
  }
  log::Info("{}", StartupLine(**server, *options, config, given, http.get()));
  std::printf("kvport: serving on %s\n", (*server)->address().c_str());
  // Tests and scripts that ask for an ephemeral RESP port (--resp 0) read it here.
  if (!(*server)->resp_address().empty()) {
    std::printf("kvport: redis protocol on %s\n", (*server)->resp_address().c_str());
  }
  if (http != nullptr) {
    // "kvport: http on ..." or, with TLS, "kvport: https on ...".
    std::printf("kvport: %s on %s\n", std::string(http->scheme()).c_str(), http->address().c_str());
  }
  std::fflush(stdout);

  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) != 0 || signal_number == SIGHUP) {
    if (signal_number == SIGHUP) {
      signal_number = 0;
      log::Info("received SIGHUP: re-reading the tokens file and the TLS certificates");
      // Each logs its outcome itself; one failing does not keep the other from applying.
      Status tokens = (*server)->ReloadTokens();
      Status tls = (*server)->ReloadTls();
      Status https = http != nullptr ? http->ReloadTls() : Status::Ok();
      (void)tokens;
      (void)tls;
      (void)https;
    }
  }
  log::Info("received {}: stopping (finishing requests in flight)",
            signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  (*server)->Stop();
  if (http != nullptr) http->Stop();
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
  serve
      ->add_option("--busy-poll-us", flags->busy_poll_us,
                   "how long an I/O thread polls for more requests before it sleeps, in "
                   "microseconds (default: busy_poll_us, 0 = at once; docs/performance.md)")
      ->check(CLI::Range(0, 1000000));
  serve->add_flag("--ucx", flags->ucx,
                  "serve values over UCX beside the TCP port (UCX_ATTACH; a listener where the "
                  "node listens, every range checked against the session's holdings; "
                  "default: the config's ucx; docs/transports.md). Start fails naming why when "
                  "UCX is not usable here (kvport doctor)");
  serve->add_option("--disk", flags->disk,
                    "a folder for the disk tier: objects evicted from memory go there and are "
                    "read back on a miss, and a restart finds them again (default: the config's "
                    "disk_dir, \"\" = none; docs/store.md)");
  serve->add_option("--disk-capacity", flags->disk_capacity,
                    "the disk tier's size, e.g. 100GiB (default: the config's disk_capacity, "
                    "1GiB)");
  serve
      ->add_option("--disk-restore", flags->disk_restore,
                   "on: start with the objects already in the disk folder; off: remove them "
                   "and start empty (default: the config's disk_restore, on)")
      ->check(CLI::IsMember({"on", "off"}));
  serve->add_flag("--insecure", flags->insecure,
                  "allow a non-loopback --listen address without access tokens (a trusted "
                  "network only; docs/security.md). Tokens come from the config (tokens_file), "
                  "never from the command line");
  serve->add_option("--http", flags->http,
                    "HTTP endpoint for /metrics, /health and /stats: HOST:PORT, or a bare PORT "
                    "for 127.0.0.1 (default: http_listen, \"\" = none)");
  serve->add_option("--resp", flags->resp,
                    "serve the Redis protocol (RESP2/RESP3, docs/resp.md) on HOST:PORT, or a "
                    "bare PORT for 127.0.0.1 (default: resp_listen, \"\" = none)");
  serve->add_option("--cluster", flags->cluster,
                    "Join this cluster: register in etcd (needs --etcd; docs/cluster.md). Default: "
                    "the config's cluster, \"\" = standalone");
  serve->add_option("--etcd", flags->etcd,
                    "etcd endpoints the node registers at: HOST:PORT[,HOST:PORT] (default: etcd)");
  serve->add_option("--advertise", flags->advertise,
                    "HOST:PORT clients should connect to (default: the listen address; required "
                    "when listening on 0.0.0.0)");
  serve->add_option("--node-id", flags->node_id,
                    "The node's name in the cluster (default: the advertised address)");
  serve
      ->add_option("--lease-ttl", flags->lease_ttl,
                   "Seconds a node that stops renewing stays registered (default 10)")
      ->check(CLI::Range(1, 3600));
  serve->callback([flags, exit_code] { *exit_code = Serve(*flags); });
}

}  // namespace kvport::cli
