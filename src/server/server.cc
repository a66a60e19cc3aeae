// SPDX-License-Identifier: Apache-2.0
// kvport::Server: wires the store, the workers and the acceptor together; graceful Stop().
#include "kvport/server.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <limits>
#include <mutex>
#include <random>

#include "cluster/etcd_client.h"
#include "cluster/member.h"
#include "cluster/node_registration.h"
#include "common/thread_annotations.h"
#include "kvport/host_info.h"
#include "kvport/log.h"
#include "kvport/size.h"
#include "net/host_port.h"
#include "net/tcp_listener.h"
#include "net/tls.h"
#include "net/unix_listener.h"
#include "protocol/frame.h"
#include "protocol/limits.h"
#include "server/acceptor.h"
#include "server/auth_throttle.h"
#include "server/cache_service.h"
#include "server/node_id_file.h"
#include "server/node_tls.h"
#include "server/server_stats.h"
#include "server/token_file.h"
#include "server/ucx_service.h"
#include "server/worker.h"
#include "store/tiered_store.h"

namespace kvport {

using server::Acceptor;
using server::Worker;

// Members are declared in dependency order: destroyed bottom-up, the acceptors (which use the
// first worker's loop) go before the workers, and the workers (whose sessions hold store
// handles) before the service and the store.
struct Server::Impl {
  ServerOptions options;
  // Memory and, with ServerOptions::disk_dir, the disk tier under it.
  std::unique_ptr<store::TieredStore> store;
  server::ServerCounters counters;
  std::unique_ptr<server::CacheService> service;
  // How far tests moved the clock of the budget of failed authentications (nanoseconds);
  // declared before the table whose throttle reads it.
  std::atomic<int64_t> auth_clock_ahead_ns{0};
  // Connections that have not completed HELLO, with the budget of failed authentications on a
  // node with tokens; outlives the workers and acceptors that use it.
  std::unique_ptr<server::UnauthenticatedConnections> unauthenticated;
  // Only the condition-variable handshake of StopGracefully (it guards no data: the count it
  // waits for is an atomic), so a plain std::mutex, invisible to the thread-safety analysis.
  // Declared before the workers, so it outlives them: a worker's destructor runs the tasks its
  // loop still holds, and a closed session's task calls OnConnectionClosed, which locks it.
  std::mutex closed_mu;
  std::condition_variable closed_cv;
  // The UCX service (ServerOptions::ucx), or null. Declared after the service and the store
  // (the transfers it still finishes as it closes hold their pins and reservations) and before
  // the workers (whose first loop progresses it, and whose sessions close their windows in it).
  std::unique_ptr<server::UcxService> ucx;
  // The TLS context new sessions get (ServerOptions::tls_*), or null; outlives the workers.
  std::unique_ptr<server::NodeTls> tls;
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::unique_ptr<Acceptor>> acceptors;  // TCP first, then the Unix socket if any
  net::HostPort address;
  std::string unix_path;
  std::optional<net::HostPort> resp_address;  // the Redis-protocol listener's, if any
  // The node's membership of options.cluster; null when standalone. Stopped (deregistered)
  // first thing in StopGracefully, destroyed with the Impl.
  std::unique_ptr<cluster::NodeRegistration> registration;

  Mutex stop_mu;
  bool stopped GUARDED_BY(stop_mu) = false;
  std::atomic<ServerState> state{ServerState::kServing};

  void OnConnectionClosed() {
    // Locking before notifying: the waiter checks the count under closed_mu, so the wakeup
    // cannot fall between its check and its wait.
    { std::lock_guard<std::mutex> lock(closed_mu); }
    closed_cv.notify_all();
  }

  // Runs on the first worker's loop.
  void ScheduleSweep() {
    if (options.ttl_sweep_interval.count() <= 0) return;
    workers[0]->loop()->RunAfter(options.ttl_sweep_interval, [this] {
      uint64_t removed = store->memory().Sweep();
      if (removed > 0) log::Debug("TTL sweep removed {} expired objects", removed);
      ScheduleSweep();
    });
  }

  // Stop() serializes callers with stop_mu: one of them stops, the others wait for it.
  void StopGracefully() REQUIRES(stop_mu);
  // Joins options.cluster (Start, once the listeners are bound).
  Status Register();
};

namespace {

Result<protocol::Limits> LimitsFrom(const ServerOptions& o) {
  protocol::Limits limits;
  limits.max_key_bytes = o.max_key_bytes;
  limits.max_namespace_bytes = o.max_namespace_bytes;
  limits.max_meta_bytes = o.max_meta_bytes;
  limits.max_value_bytes = o.max_value_bytes;
  limits.max_batch_keys = o.max_batch_keys;
  limits.max_frame_bytes = o.max_frame_bytes;
  Status valid = protocol::ValidateLimits(limits);
  if (!valid.ok()) return valid.WithContext("server limits");
  if (o.max_meta_bytes > std::numeric_limits<uint32_t>::max()) {
    return Status::InvalidArgument("server limits: max_meta_bytes " +
                                   std::to_string(o.max_meta_bytes) + " is above 4 GiB");
  }
  return limits;
}

// The Unix socket path `option` asks for, once the TCP port is known.
std::string UnixSocketPath(const std::string& option, uint16_t port) {
  if (option != "auto") return option;
  const char* runtime_dir = std::getenv("XDG_RUNTIME_DIR");
  std::string dir = (runtime_dir != nullptr && runtime_dir[0] == '/') ? runtime_dir : "/tmp";
  return dir + "/kvport-" + std::to_string(port) + ".sock";
}

// The tokens the node accepts: those of the options, then those of the tokens file.
Result<std::vector<AccessToken>> GatherTokens(const ServerOptions& o) {
  std::vector<AccessToken> tokens = o.tokens;
  if (!o.tokens_file.empty()) {
    KVPORT_ASSIGN_OR_RETURN(std::vector<AccessToken> from_file,
                            server::LoadTokenFile(o.tokens_file));
    tokens.insert(tokens.end(), std::make_move_iterator(from_file.begin()),
                  std::make_move_iterator(from_file.end()));
  }
  KVPORT_RETURN_IF_ERROR(server::ValidateTokens(tokens));
  return tokens;
}

bool IsWildcardHost(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "0:0:0:0:0:0:0:0";
}

// The cluster options that can be checked before anything is allocated.
Status CheckClusterOptions(const ServerOptions& o, const net::HostPort& listen) {
  if (o.cluster.empty()) return Status::Ok();
  for (char c : o.cluster) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '.' && c != '-' && c != '_') {
      return Status::InvalidArgument(fmt::format(
          "'{}' is not a cluster name: use letters, digits, '.', '-' and '_'", o.cluster));
    }
  }
  if (o.node_id.find('/') != std::string::npos) {
    return Status::InvalidArgument(fmt::format("node id '{}' must not hold '/'", o.node_id));
  }
  if (o.etcd.empty()) {
    return Status::InvalidArgument(
        fmt::format("cluster '{}': no etcd endpoints (etcd: HOST:PORT[,HOST:PORT])", o.cluster));
  }
  if (o.lease_ttl_secs < 1 || o.lease_ttl_secs > 3600) {
    return Status::InvalidArgument(fmt::format(
        "lease_ttl_secs {} is out of range: expected 1..3600 seconds", o.lease_ttl_secs));
  }
  if (!o.advertise.empty()) {
    Result<net::HostPort> advertised = net::ParseHostPort(o.advertise, "");
    if (!advertised.ok()) return advertised.status().WithContext("advertise");
    if (IsWildcardHost(advertised->host) || advertised->port == 0) {
      return Status::InvalidArgument(fmt::format(
          "advertise {}: clients must be able to connect to it: give this host's address and "
          "the port it listens on, e.g. 10.0.0.5:7470",
          o.advertise));
    }
  } else if (IsWildcardHost(listen.host)) {
    return Status::InvalidArgument(fmt::format(
        "cluster '{}': listening on {} (every interface) needs an advertise address, the "
        "HOST:PORT clients should connect to (advertise: in the config, kvport serve "
        "--advertise)",
        o.cluster, o.listen));
  }
  return Status::Ok();
}

// An etcd call waits at most this long: a third of the lease (a renewal that times out leaves
// time for two more before the lease lapses), between 200 ms and 3 s.
std::chrono::milliseconds EtcdRequestTimeout(uint32_t lease_ttl_secs) {
  return std::clamp(std::chrono::milliseconds(uint64_t{lease_ttl_secs} * 1000 / 3),
                    std::chrono::milliseconds(200), std::chrono::milliseconds(3000));
}

uint64_t RandomNodeId() {
  std::random_device random;
  uint64_t id = 0;
  while (id == 0)
    id = (uint64_t{random()} << 32) ^ random();
  return id;
}

// max_queued_response_bytes, or its automatic value: it bounds heap (response heads), which
// grows with the traffic a node's capacity attracts, never below what a few large batched
// answers need nor above the old fixed 1 GiB.
uint64_t QueuedResponseCap(const ServerOptions& options) {
  if (options.max_queued_response_bytes != 0) return options.max_queued_response_bytes;
  return std::clamp<uint64_t>(options.capacity_bytes / 16, uint64_t{16} << 20, uint64_t{1} << 30);
}

// max_input_buffer_bytes, or its automatic value: scaled to the node, so that clients stalled
// mid-command hold a share of what the node holds rather than a fixed GiB, and never below
// what one request's descriptor may need.
uint64_t InputBufferCap(const ServerOptions& options) {
  if (options.max_input_buffer_bytes != 0) return options.max_input_buffer_bytes;
  const uint64_t floor = std::max<uint64_t>(uint64_t{64} << 20, options.max_frame_bytes);
  return std::max(floor, std::min<uint64_t>(options.capacity_bytes / 8, uint64_t{1} << 30));
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  KVPORT_ASSIGN_OR_RETURN(net::HostPort address, net::ParseHostPort(options.listen));
  KVPORT_ASSIGN_OR_RETURN(protocol::Limits limits, LimitsFrom(options));
  KVPORT_RETURN_IF_ERROR(CheckClusterOptions(options, address));
  if (options.max_unauthenticated_per_address == 0) {
    return Status::InvalidArgument(
        "max_unauthenticated_per_address must be at least 1 (0 would refuse every connection)");
  }
  if (options.busy_poll.count() < 0 || options.busy_poll > std::chrono::seconds(1)) {
    return Status::InvalidArgument(
        fmt::format("busy_poll must be 0 to 1 s, got {} us", options.busy_poll.count()));
  }
  if (options.max_connections == 0) {
    return Status::InvalidArgument(
        "max_connections must be at least 1 (0 would refuse every "
        "connection)");
  }

  // The heap for objects' keys and metadata (docs/store.md, "Bounds on node memory"), the disk
  // tier's index included; 0 picks the default: an eighth of the memory, and a 64th of the disk
  // (a disk index entry takes about 700 bytes with 48-byte keys, measured with `kvport scale`;
  // the disk tier may take half the budget, so the disk's 64th alone covers objects of about
  // 90 KiB and more on disk; the memory's eighth adds to that).
  const uint64_t max_index_bytes =
      options.max_index_bytes != 0
          ? options.max_index_bytes
          : std::max<uint64_t>(options.capacity_bytes / 8, 1 << 20) +
                (options.disk_dir.empty() ? 0 : options.disk_capacity / 64);
  store::TieredStoreOptions store_options;
  if (!options.disk_dir.empty()) {
    store::WriteBehindDiskOptions& disk_options = store_options.disk;
    disk_options.max_index_bytes = max_index_bytes;
    disk_options.dir = options.disk_dir;
    disk_options.capacity_bytes = options.disk_capacity;
    disk_options.namespace_on_disk = options.namespace_on_disk;
    // A cluster node under on_lease_loss: drop serves nothing from a dead epoch, and a restart
    // is one (docs/cluster.md, "Consistency"): it starts with an empty disk tier.
    const bool drop_dead_epochs =
        !options.cluster.empty() && options.on_lease_loss == ServerOptions::LeaseLoss::kDrop;
    if (options.disk_restore && drop_dead_epochs) {
      log::Info("disk tier: not restored: cluster '{}' has on_lease_loss: drop", options.cluster);
    }
    disk_options.restore = options.disk_restore && !drop_dead_epochs;
  }
  store::StoreOptions& memory_options = store_options.memory;
  memory_options.capacity_bytes = options.capacity_bytes;
  memory_options.max_value_bytes = options.max_value_bytes;
  memory_options.max_key_bytes = static_cast<uint32_t>(limits.max_key_bytes);
  memory_options.max_namespace_bytes = static_cast<uint32_t>(limits.max_namespace_bytes);
  memory_options.max_meta_bytes = static_cast<uint32_t>(limits.max_meta_bytes);
  // The caps beside the arena (docs/store.md, "Bounds on node memory"); 0 picks the default.
  memory_options.max_index_bytes = max_index_bytes;
  memory_options.max_reserved_bytes =
      options.max_reserved_bytes != 0 ? options.max_reserved_bytes : options.capacity_bytes / 2;
  memory_options.max_pinned_bytes =
      options.max_pinned_bytes != 0 ? options.max_pinned_bytes : options.capacity_bytes / 2;
  Result<std::unique_ptr<store::TieredStore>> store = store::TieredStore::Open(store_options);
  if (!store.ok()) return store.status();
  impl->store = std::move(store).value();

  // Listeners first: the Unix socket's default path needs the TCP port, and the service tells
  // clients that path. They are watched only once the workers exist.
  Result<std::vector<AccessToken>> tokens = GatherTokens(options);
  if (!tokens.ok()) return tokens.status().WithContext("access tokens");
  const bool access_required = !options.tokens.empty() || !options.tokens_file.empty();
  if (!options.tls_cert_file.empty() || !options.tls_key_file.empty() ||
      !options.tls_ca_file.empty()) {
    Result<std::unique_ptr<server::NodeTls>> tls =
        server::NodeTls::Load({options.tls_cert_file, options.tls_key_file, options.tls_ca_file});
    if (!tls.ok()) return tls.status().WithContext("TLS");
    impl->tls = std::move(tls).value();
  }
  const server::NodeTls* tls = impl->tls.get();
  const bool mutual_tls = tls != nullptr && tls->requires_peer_certificate();

  Result<std::unique_ptr<net::TcpListener>> listener = net::TcpListener::Listen(address);
  if (!listener.ok()) return listener.status().WithContext("cannot listen on " + options.listen);
  impl->address = (*listener)->address();
  // Open (no tokens) and reachable beyond this host: refused unless the options say so.
  // Mutual TLS is access control too: only holders of a certificate the CA signed get in.
  const bool open_beyond_loopback =
      !access_required && !mutual_tls && !(*listener)->loopback_only();
  if (open_beyond_loopback && !options.insecure) {
    return Status::InvalidArgument(fmt::format(
        "refusing to listen on {} without access tokens: anyone who can reach that address "
        "could read, overwrite and delete every key. Configure tokens (the node config key "
        "tokens_file, docs/security.md), listen on loopback (127.0.0.1), or, if the network is "
        "trusted, say so with insecure: true (kvport serve --insecure)",
        options.listen));
  }
  if (open_beyond_loopback) {
    log::Warn("INSECURE: node on {} is open to anyone who can reach it (no access tokens)",
              impl->address.ToString());
  }
  // The Redis-protocol listener: a bare port is loopback; beyond loopback the same rule as
  // above, where mutual TLS does not count (the RESP port has no TLS).
  std::unique_ptr<net::TcpListener> resp_listener;
  if (!options.resp_listen.empty()) {
    const bool bare_port = options.resp_listen.find_first_not_of("0123456789") == std::string::npos;
    Result<net::HostPort> resp_address =
        net::ParseHostPort(bare_port ? "127.0.0.1:" + options.resp_listen : options.resp_listen);
    if (!resp_address.ok()) return resp_address.status().WithContext("resp_listen");
    Result<std::unique_ptr<net::TcpListener>> bound = net::TcpListener::Listen(*resp_address);
    if (!bound.ok()) {
      return bound.status().WithContext("cannot listen on " + options.resp_listen + " (RESP)");
    }
    resp_listener = std::move(bound).value();
    impl->resp_address = resp_listener->address();
    if (!access_required && !resp_listener->loopback_only()) {
      if (!options.insecure) {
        return Status::InvalidArgument(fmt::format(
            "refusing to serve the Redis protocol on {} without access tokens: anyone who can "
            "reach that address could read, overwrite and delete every key. Configure tokens "
            "(tokens_file, docs/security.md), listen on loopback (a bare port), or, if the "
            "network is trusted, say so with insecure: true (kvport serve --insecure)",
            options.resp_listen));
      }
      log::Warn("INSECURE: Redis protocol on {} is open to anyone who can reach it",
                impl->resp_address->ToString());
    }
    if (access_required && tls == nullptr && !resp_listener->loopback_only()) {
      log::Warn("Redis protocol on {}: AUTH sends tokens in the clear (no TLS: tls_cert_file)",
                impl->resp_address->ToString());
    }
  }
  std::unique_ptr<net::UnixListener> unix_listener;
  if (!options.unix_socket.empty()) {
    Result<std::unique_ptr<net::UnixListener>> bound =
        net::UnixListener::Listen(UnixSocketPath(options.unix_socket, impl->address.port));
    if (!bound.ok()) return bound.status().WithContext("cannot listen on the Unix socket");
    unix_listener = std::move(bound).value();
    impl->unix_path = unix_listener->path();
  }

  server::ServiceOptions service_options;
  service_options.limits = limits;
  service_options.server_name = options.server_name;
  service_options.identity = {RandomNodeId(), HostBootId(), impl->unix_path};
  service_options.offer_shared_memory = options.shared_memory;
  service_options.max_leases_per_session = options.max_leases_per_session;
  service_options.max_reservations_per_session = options.max_reservations_per_session;
  service_options.max_connections = options.max_connections;
  service_options.access_required = access_required;
  service_options.tokens = *tokens;
  service_options.resp_fold_namespaces = options.resp_fold_namespaces;
  service_options.insecure =
      open_beyond_loopback ||
      (!access_required && resp_listener != nullptr && !resp_listener->loopback_only());
  impl->service = std::make_unique<server::CacheService>(impl->store.get(), &impl->counters,
                                                         std::move(service_options));
  if (options.ucx) {
    Result<std::unique_ptr<server::UcxService>> ucx = server::UcxService::Create(
        options.ucx_library, impl->address.host, options.max_connections);
    if (!ucx.ok()) return ucx.status().WithContext("ucx");
    impl->ucx = std::move(ucx).value();
    impl->service->set_ucx(impl->ucx.get());
  }

  server::WorkerOptions worker_options;
  worker_options.connection.max_outstanding_bytes = options.max_connection_outstanding_bytes;
  worker_options.connection.max_node_queued_bytes = QueuedResponseCap(options);
  worker_options.connection.request_timeout = options.request_timeout;
  worker_options.connection.min_request_bytes_per_sec = options.min_request_bytes_per_sec;
  impl->counters.SetMaxQueuedResponseBytes(worker_options.connection.max_node_queued_bytes);
  worker_options.connection.max_node_input_bytes = InputBufferCap(options);
  impl->counters.SetMaxInputBufferBytes(worker_options.connection.max_node_input_bytes);
  worker_options.idle_timeout = options.idle_timeout;
  worker_options.busy_poll = options.busy_poll;
  // Only a node with tokens has a secret to guess: an open one throttles nothing.
  std::unique_ptr<server::AuthThrottle> throttle;
  if (access_required) {
    Impl* clock_owner = impl.get();
    throttle =
        std::make_unique<server::AuthThrottle>(server::AuthThrottle::Options(), [clock_owner] {
          return MonotonicClock::now() +
                 std::chrono::nanoseconds(
                     clock_owner->auth_clock_ahead_ns.load(std::memory_order_relaxed));
        });
  }
  impl->unauthenticated = std::make_unique<server::UnauthenticatedConnections>(
      options.max_unauthenticated_per_address, std::move(throttle));
  impl->service->set_unauthenticated(impl->unauthenticated.get());
  worker_options.connection.hello_timeout = options.hello_timeout;
  worker_options.connection.unauthenticated = impl->unauthenticated.get();
  worker_options.tls = tls;
  const unsigned threads = options.threads > 0 ? options.threads : HostCpuCount();
  Impl* raw = impl.get();
  for (unsigned i = 0; i < threads; ++i) {
    KVPORT_ASSIGN_OR_RETURN(
        std::unique_ptr<Worker> worker,
        Worker::Create(*impl->service, worker_options, [raw] { raw->OnConnectionClosed(); }));
    impl->workers.push_back(std::move(worker));
  }

  std::vector<Worker*> targets;
  for (auto& w : impl->workers)
    targets.push_back(w.get());
  impl->acceptors.push_back(std::make_unique<Acceptor>(
      impl->workers[0]->loop(), std::move(listener).value(), targets, impl->service.get(),
      impl->unauthenticated.get(), options.max_connections));
  if (unix_listener != nullptr) {
    impl->acceptors.push_back(std::make_unique<Acceptor>(
        impl->workers[0]->loop(), std::move(unix_listener), targets, impl->service.get(),
        impl->unauthenticated.get(), options.max_connections));
  }
  if (resp_listener != nullptr) {
    impl->acceptors.push_back(std::make_unique<Acceptor>(
        impl->workers[0]->loop(), std::move(resp_listener), targets, impl->service.get(),
        impl->unauthenticated.get(), options.max_connections, server::WireProtocol::kResp));
  }
  for (auto& acceptor : impl->acceptors)
    KVPORT_RETURN_IF_ERROR(acceptor->Start());
  // Registered once the listeners are bound (connections wait in their backlog until the
  // loops run, right after), and before the I/O threads run, so a failure here unwinds like any
  // other start error.
  if (!options.cluster.empty()) KVPORT_RETURN_IF_ERROR(impl->Register());

  if (impl->ucx != nullptr) KVPORT_RETURN_IF_ERROR(impl->ucx->Watch(impl->workers[0]->loop()));
  impl->workers[0]->loop()->Post([raw] { raw->ScheduleSweep(); });
  for (auto& w : impl->workers)
    w->StartThread();
  log::Info("kvport node access: {} ({} tokens accepted)", impl->service->access_mode(),
            tokens->size());
  if (impl->store->has_disk()) {
    // What was only in memory before a restart is gone; what was on disk is a hit again.
    log::Info("kvport node {}", impl->store->disk()->Describe());
  }
  if (mutual_tls && !access_required) {
    log::Info(
        "kvport node: mutual TLS without tokens: every client certificate the CA signed may do "
        "everything (a tokens_file with cert_names gives certificates narrower grants)");
  }
  const bool maps_certificates = std::any_of(
      tokens->begin(), tokens->end(), [](const AccessToken& t) { return !t.cert_names.empty(); });
  if (maps_certificates && !mutual_tls) {
    log::Warn(
        "kvport node: tokens list cert_names, but the node asks for no client certificate "
        "(tls_ca_file is not set): those tokens are held by their secrets only");
  }
  if (tls != nullptr) {
    log::Info("kvport node TLS on {}: TLS 1.3{}; kernel TLS offload {}", impl->address.ToString(),
              mutual_tls ? ", client certificates required (tls_ca_file)" : "",
              net::KernelTlsAvailable() ? "available"
                                        : "not available (the kernel's tls module is not "
                                          "loaded: OpenSSL encrypts in userspace)");
  }
  log::Info(
      "kvport node listening on {}{} (capacity {}, {} I/O threads{}){}", impl->address.ToString(),
      impl->unix_path.empty() ? std::string()
                              : " and unix:" + impl->unix_path +
                                    (impl->service->offers_shared_memory() ? " (shared memory)"
                                                                           : " (no shared memory)"),
      FormatSize(impl->store->memory().Stats().capacity_bytes), threads,
      impl->ucx == nullptr ? std::string() : "; values over " + impl->ucx->Describe(),
      (impl->resp_address ? "; Redis protocol on " + impl->resp_address->ToString()
                          : std::string()) +
          (impl->registration == nullptr
               ? std::string()
               : fmt::format("; cluster '{}' as '{}' at {}, epoch {:016x}", options.cluster,
                             impl->registration->record().id, impl->registration->record().address,
                             impl->registration->epoch())));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  Stop();
}

uint16_t Server::port() const {
  return impl_->address.port;
}

std::string Server::address() const {
  return impl_->address.ToString();
}

std::string Server::unix_socket_path() const {
  return impl_->unix_path;
}

uint16_t Server::resp_port() const {
  return impl_->resp_address ? impl_->resp_address->port : 0;
}

std::string Server::resp_address() const {
  return impl_->resp_address ? impl_->resp_address->ToString() : std::string();
}

uint64_t Server::epoch() const {
  return impl_->registration != nullptr ? impl_->registration->epoch() : 0;
}

void Server::AdvanceAuthClockForTesting(std::chrono::milliseconds by) {
  impl_->auth_clock_ahead_ns.fetch_add(std::chrono::nanoseconds(by).count(),
                                       std::memory_order_relaxed);
}

void Server::PauseClusterKeepAliveForTesting(bool paused) {
  if (impl_->registration != nullptr) impl_->registration->PauseKeepAliveForTesting(paused);
}

Status Server::Impl::Register() {
  cluster::Member record;
  record.address = options.advertise.empty() ? address.ToString() : options.advertise;
  record.id = options.node_id.empty() ? record.address : options.node_id;
  // With a disk tier the name is kept in its folder: a node restarted on another address
  // (a rescheduled pod, the same volume) is the same member, and placement sends it its keys.
  if (store->has_disk()) {
    KVPORT_ASSIGN_OR_RETURN(
        record.id, server::KeepNodeId(options.disk_dir, record.id, !options.node_id.empty()));
  }
  record.capacity_bytes = store->memory().Stats().capacity_bytes;
  record.protocol_version = protocol::kMaxProtocolVersion;
  record.transports = {"tcp"};
  if (!unix_path.empty() && service->offers_shared_memory()) record.transports.push_back("shm");

  cluster::EtcdOptions etcd_options;
  etcd_options.endpoints = options.etcd;
  etcd_options.request_timeout = EtcdRequestTimeout(options.lease_ttl_secs);
  etcd_options.tls_ca_file = options.etcd_tls_ca_file;
  etcd_options.tls_cert_file = options.etcd_tls_cert_file;
  etcd_options.tls_key_file = options.etcd_tls_key_file;
  etcd_options.user = options.etcd_user;
  etcd_options.password_file = options.etcd_password_file;
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<cluster::EtcdClient> etcd,
                          cluster::EtcdClient::Open(etcd_options));
  cluster::RegistrationOptions registration_options;
  registration_options.cluster = options.cluster;
  registration_options.lease_ttl = std::chrono::seconds(options.lease_ttl_secs);
  // A new epoch means the node was out of the cluster: clients may have written its keys to
  // other nodes meanwhile. Keys whose value never changes (content hashes) stay right, and
  // keeping them spares every GPU of a fleet that lost etcd together a recompute; a node
  // whose keys are overwritten drops them (on_lease_loss; docs/cluster.md, "Lease loss").
  registration_options.on_new_epoch = [this](uint64_t epoch) {
    if (options.on_lease_loss == ServerOptions::LeaseLoss::kKeep) {
      log::Warn(
          "cluster '{}': new epoch {:016x}: kept every stored object ({} objects; "
          "on_lease_loss: keep)",
          options.cluster, epoch, store->memory().Stats().objects);
      return;
    }
    const uint64_t dropped = store->memory().DropAll();
    log::Warn(
        "cluster '{}': new epoch {:016x}: dropped every stored object ({} objects; "
        "on_lease_loss: drop)",
        options.cluster, epoch, dropped);
  };
  registration_options.on_state = [this](const cluster::RegistrationState& now) {
    counters.SetClusterState(now.registered, now.reregistrations, now.etcd_failures);
  };
  KVPORT_ASSIGN_OR_RETURN(registration,
                          cluster::NodeRegistration::Start(std::move(etcd), std::move(record),
                                                           std::move(registration_options)));
  return Status::Ok();
}

void Server::Stop() {
  MutexLock lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->StopGracefully();
}

void Server::Impl::StopGracefully() {
  state.store(ServerState::kDraining, std::memory_order_release);
  // 0. Out of the cluster first: clients stop placing keys here while requests drain.
  if (registration != nullptr) registration->Stop();
  // 1. No new connections. Waiting here also orders every Adopt the acceptor posted before the
  //    BeginShutdown posted next (each loop runs its tasks in order).
  std::promise<void> stopped_accepting;
  workers[0]->loop()->Post([this, &stopped_accepting] {
    for (auto& acceptor : acceptors)
      acceptor->StopAccepting();
    stopped_accepting.set_value();
  });
  stopped_accepting.get_future().wait();

  // 2. Let requests in flight finish; idle connections close at once.
  for (auto& w : workers)
    w->BeginShutdown();
  const auto deadline = std::chrono::steady_clock::now() + options.shutdown_grace;
  {
    std::unique_lock<std::mutex> lock(closed_mu);
    bool drained =
        closed_cv.wait_until(lock, deadline, [this] { return counters.connections() == 0; });
    if (!drained) {
      log::Warn("{} connections still busy after the {} ms shutdown grace; closing them",
                counters.connections(), options.shutdown_grace.count());
    }
  }

  // 3. Close what is left (aborting unfinished MSETs), stop the loops, join the threads.
  for (auto& w : workers)
    w->CloseAll();
  for (auto& w : workers)
    w->StopAndJoin();
  acceptors.clear();
  // 4. What memory holds goes to disk (bounded), so that a restart finds it.
  if (options.disk_stop_flush.count() > 0) {
    store->FlushAtStop(std::chrono::steady_clock::now() + options.disk_stop_flush);
  }
  state.store(ServerState::kStopped, std::memory_order_release);
  log::Info("kvport node on {} stopped", address.ToString());
}

ServerStats Server::Stats() const {
  return impl_->service->Stats();
}

Status Server::ReloadTls() {
  if (impl_->tls == nullptr) return Status::Ok();
  const net::TlsFiles& files = impl_->tls->files();
  Status reloaded = impl_->tls->Reload();
  if (!reloaded.ok()) {
    reloaded = reloaded.WithContext("TLS");
    log::Error("TLS certificates not reloaded (the ones in force stay): {}", reloaded.ToString());
    return reloaded;
  }
  log::Info("TLS certificates reloaded from {} and {}{}: new connections use them", files.cert_file,
            files.key_file,
            files.ca_file.empty() ? std::string() : " (client CA " + files.ca_file + ")");
  return Status::Ok();
}

Status Server::ReloadTokens() {
  if (impl_->options.tokens_file.empty()) return Status::Ok();
  Result<std::vector<AccessToken>> tokens = GatherTokens(impl_->options);
  if (!tokens.ok()) {
    log::Error("tokens not reloaded (the ones in force stay): {}", tokens.status().ToString());
    return tokens.status();
  }
  impl_->service->access().Replace(*tokens);
  log::Info("tokens reloaded from {}: {} accepted", impl_->options.tokens_file, tokens->size());
  return Status::Ok();
}

ServerState Server::state() const {
  return impl_->state.load(std::memory_order_acquire);
}

// The one place that names the node's authentication for logs and /metrics.
std::string Server::auth_mode() const {
  return std::string(impl_->service->access_mode());
}

bool Server::GrantsAdmin(std::string_view secret, std::string_view peer) const {
  server::AuthThrottle* throttle = impl_->unauthenticated != nullptr && !peer.empty()
                                       ? impl_->unauthenticated->throttle()
                                       : nullptr;
  if (throttle != nullptr && !throttle->Admit(peer).ok()) {
    impl_->counters.CountAuthThrottled();
    return false;
  }
  Result<std::shared_ptr<const server::Grant>> grant =
      impl_->service->access().Authenticate(secret);
  if (!grant.ok() && throttle != nullptr && !secret.empty()) {
    impl_->counters.CountAuthFailure();
    throttle->Charge(peer);
  }
  return grant.ok() && (*grant)->admin();
}

}  // namespace kvport
