// SPDX-License-Identifier: Apache-2.0
// kvport::Client: argument checks and Init; the calls go to the backend Init chose, one node
// (NodeClient) or a cluster (ClusterClient), with the client's device staging.
#include "kvport/client.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <utility>

#include "client/backend.h"
#include "client/cluster_client.h"
#include "client/device_staging.h"
#include "client/endpoint.h"
#include "client/fork_guard.h"
#include "client/node_client.h"
#include "client/value_checksums.h"
#include "cluster/etcd_membership.h"
#include "cluster/membership.h"
#include "common/endpoint_text.h"
#include "common/small_file.h"
#include "kvport/log.h"
#include "kvport/transport.h"
#include "kvport/ucx.h"
#include "net/tls.h"

namespace kvport {
namespace {

// The token InitOptions name: token, else token_file's first line, else $KVPORT_TOKEN.
Result<std::string> TokenOf(const InitOptions& options) {
  if (!options.token.empty()) return options.token;
  if (!options.token_file.empty()) {
    KVPORT_ASSIGN_OR_RETURN(std::string text,
                            ReadSmallRegularFile(options.token_file, 4096, "token file"));
    const std::string token = text.substr(0, text.find_first_of("\r\n"));
    if (token.empty()) {
      return Status::InvalidArgument("token file '" + options.token_file +
                                     "' is empty; its first line must be the token");
    }
    return token;
  }
  const char* from_env = std::getenv("KVPORT_TOKEN");
  return std::string(from_env != nullptr ? from_env : "");
}

// A check that is on unless turned off: false when `field` is, else the environment variable
// `name` when it is set (true/false, 1/0, yes/no, on/off), else true. A value that is none of
// them is an error rather than a guess: guessing "off" would turn a check off that the user
// meant to keep.
Result<bool> OnUnlessTurnedOff(bool field, const char* name) {
  if (!field) return false;
  const char* env = std::getenv(name);
  if (env == nullptr || env[0] == '\0') return true;
  std::string value(env);
  for (char& c : value)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (value == "true" || value == "1" || value == "yes" || value == "on") return true;
  if (value == "false" || value == "0" || value == "no" || value == "off") return false;
  return Status::InvalidArgument(fmt::format("{} is '{}': expected true or false", name, env));
}

// InitOptions::tls_verify_hostname, or KVPORT_TLS_VERIFY_HOSTNAME when the field is left true.
Result<bool> VerifyHostname(const InitOptions& options) {
  return OnUnlessTurnedOff(options.tls_verify_hostname, "KVPORT_TLS_VERIFY_HOSTNAME");
}

// InitOptions::checksums, or KVPORT_CHECKSUMS when the field is left true: the switch for the
// clients an engine makes through `eic`, whose options have no such field.
Result<bool> ChecksumsOn(const InitOptions& options) {
  return OnUnlessTurnedOff(options.checksums, "KVPORT_CHECKSUMS");
}

// The TLS InitOptions ask for, each file from its field or else its environment variable
// (KVPORT_TLS_CA_FILE, ...): null when no CA file is named (plain TCP).
Result<std::shared_ptr<const net::TlsContext>> TlsOf(const InitOptions& options) {
  auto pick = [](const std::string& field, const char* env) {
    if (!field.empty()) return field;
    const char* value = std::getenv(env);
    return std::string(value != nullptr ? value : "");
  };
  net::TlsFiles files;
  files.ca_file = pick(options.tls_ca_file, "KVPORT_TLS_CA_FILE");
  files.cert_file = pick(options.tls_cert_file, "KVPORT_TLS_CERT_FILE");
  files.key_file = pick(options.tls_key_file, "KVPORT_TLS_KEY_FILE");
  KVPORT_ASSIGN_OR_RETURN(files.verify_hostname, VerifyHostname(options));
  if (files.ca_file.empty()) {
    if (!files.cert_file.empty() || !files.key_file.empty()) {
      return Status::InvalidArgument(
          "tls_cert_file / tls_key_file are set but tls_ca_file is not: TLS needs the CA that "
          "signed the node's certificate");
    }
    return std::shared_ptr<const net::TlsContext>();
  }
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<net::TlsContext> context,
                          net::TlsContext::Create(net::TlsRole::kClient, files));
  return std::shared_ptr<const net::TlsContext>(std::move(context));
}

// How a cluster client reaches etcd: its endpoints, and TLS and authentication from the
// environment variables a node's config takes them from too (KVPORT_ETCD_TLS_CA_FILE,
// KVPORT_ETCD_TLS_CERT_FILE, KVPORT_ETCD_TLS_KEY_FILE, KVPORT_ETCD_USER,
// KVPORT_ETCD_PASSWORD_FILE: docs/cluster.md).
cluster::EtcdOptions EtcdOptionsOf(const std::vector<std::string>& endpoints,
                                   const InitOptions& options) {
  auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value != nullptr ? value : "");
  };
  cluster::EtcdOptions etcd;
  etcd.endpoints = endpoints;
  etcd.request_timeout = options.connect_timeout;
  etcd.tls_ca_file = env("KVPORT_ETCD_TLS_CA_FILE");
  etcd.tls_cert_file = env("KVPORT_ETCD_TLS_CERT_FILE");
  etcd.tls_key_file = env("KVPORT_ETCD_TLS_KEY_FILE");
  etcd.user = env("KVPORT_ETCD_USER");
  etcd.password_file = env("KVPORT_ETCD_PASSWORD_FILE");
  return etcd;
}

Status NotReady(std::string_view op) {
  return Status::InvalidArgument(std::string(op) + " called before a successful Client::Init");
}

Status CountMismatch(std::string_view op, size_t keys, size_t buffers, std::string_view what) {
  return Status::InvalidArgument(fmt::format("{}: {} keys but {} {}", op, keys, buffers, what));
}

}  // namespace

struct Client::Impl {
  std::string endpoint_text;
  bool is_cluster = false;
  client::DeviceStaging devices;  // runtimes, registered memory and staging pools
  std::unique_ptr<client::ValueChecksums> checksums;  // set by Init, before any node is opened
  std::unique_ptr<client::Backend> backend;           // null until Init succeeded
  client::ForkGuard process;                          // the process whose connections these are

  // OK when the client may serve `op` here: connected, and in the process that connected.
  Status Usable(const char* op) const {
    if (backend == nullptr) return NotReady(op);
    return process.Check(op);
  }
};

Client::Client() : impl_(std::make_unique<Impl>()) {}

Client::~Client() {
  if (impl_->backend != nullptr && impl_->process.forked()) {
    // A forked child's copy: its socket watcher's thread does not exist here (joining it would
    // hang) and its sockets are the parent's (shutting them down would cut the parent off).
    // Abandon it: the memory and descriptors go with this process.
    (void)impl_.release();
    return;
  }
  if (impl_->backend != nullptr) impl_->backend->CloseAll();
}

const std::string& Client::endpoint() const {
  return impl_->endpoint_text;
}

bool Client::is_cluster() const {
  return impl_->is_cluster;
}

std::string_view Client::transport() const {
  return impl_->backend != nullptr ? impl_->backend->transport() : std::string_view();
}

const std::optional<std::string>& Client::default_namespace() const {
  static const std::optional<std::string> kNone;
  return impl_->backend != nullptr ? impl_->backend->default_namespace() : kNone;
}

const std::string& Client::transport_reason() const {
  static const std::string kNone;
  return impl_->backend != nullptr ? impl_->backend->transport_reason() : kNone;
}

Status Client::Init(std::string_view instance_id, std::string_view endpoint,
                    const InitOptions& options) {
  if (impl_->backend != nullptr) {
    return Status::InvalidArgument("Client::Init called twice (already connected to " +
                                   impl_->endpoint_text + ")");
  }
  if (options.connections < 1 || options.connections > 1024) {
    return Status::InvalidArgument("connections must be 1..1024, got " +
                                   std::to_string(options.connections));
  }
  if (options.timeout.count() <= 0 || options.connect_timeout.count() <= 0) {
    return Status::InvalidArgument("timeout and connect_timeout must be positive");
  }
  if (options.reconnect_backoff_min.count() <= 0 ||
      options.reconnect_backoff_max < options.reconnect_backoff_min) {
    return Status::InvalidArgument(
        "reconnect_backoff_min must be positive and at most reconnect_backoff_max");
  }
  if (options.drain_timeout.count() < 0) {
    return Status::InvalidArgument("drain_timeout must not be negative");
  }
  if (options.busy_poll.count() < 0 || options.busy_poll > std::chrono::seconds(1)) {
    return Status::InvalidArgument("busy_poll must be 0 to 1 s, got " +
                                   std::to_string(options.busy_poll.count()) + " us");
  }
  if (options.replicas < 1 || options.replicas > kMaxReplicas || options.write_quorum < 1 ||
      options.write_quorum > options.replicas) {
    return Status::InvalidArgument(fmt::format(
        "replicas must be 1..{} and write_quorum 1..replicas, got replicas {} write_quorum {}",
        kMaxReplicas, options.replicas, options.write_quorum));
  }
  if (options.log_level >= 0) {
    static constexpr log::Level kLevels[] = {log::Level::kDebug, log::Level::kInfo,
                                             log::Level::kWarn, log::Level::kError};
    log::SetLevel(kLevels[std::min(options.log_level, 3)]);
  }
  KVPORT_ASSIGN_OR_RETURN(client::Endpoint parsed, client::ParseEndpoint(endpoint));

  // The transport first: a configuration this host cannot serve fails before any connection.
  // Only GPUDirect depends on CUDA (automatic selection never loads it); UCX is loaded for RDMA
  // and GPUDirect, and for automatic selection on a host with RDMA devices (UCX over TCP is
  // no better than kvport's own TCP). A retried Init may name other runtime libraries than a
  // failed one did.
  impl_->devices.UseLibraries(options.cuda_runtime_library, options.ascend_runtime_library,
                              options.staging_cache_bytes);
  TransportEnvironment env;
  env.rdma_devices = ListRdmaDevices();
  if (options.transport_type == 3) env.cuda = impl_->devices.Runtime(RuntimeKind::kCuda);
  if (options.transport_type >= 2 || (options.transport_type == 0 && !env.rdma_devices.empty())) {
    env.ucx = &ProcessUcxRuntime();
  }
  Result<TransportChoice> choice = ResolveTransport(options.transport_type, env);
  if (!choice.ok()) return choice.status().WithContext("client init");
  if (!options.log_dir.empty()) {
    log::Info("client {}: log_dir '{}' is accepted for EIC compatibility; kvport logs to stderr",
              instance_id, options.log_dir);
  }

  client::NodeCredentials credentials;
  KVPORT_ASSIGN_OR_RETURN(credentials.token, TokenOf(options));
  KVPORT_ASSIGN_OR_RETURN(credentials.tls, TlsOf(options));

  KVPORT_ASSIGN_OR_RETURN(const bool checksums, ChecksumsOn(options));
  impl_->checksums =
      std::make_unique<client::ValueChecksums>(checksums, options.unchecked_namespaces);
  std::unique_ptr<client::Backend> backend;
  if (!parsed.is_cluster()) {
    Result<std::unique_ptr<client::NodeClient>> node =
        client::NodeClient::Open(instance_id, parsed.nodes[0], options, *choice, credentials,
                                 &impl_->devices, impl_->checksums.get());
    if (!node.ok()) return node.status().WithContext("client init");
    backend = std::move(node).value();
  } else {
    std::unique_ptr<cluster::Membership> membership;
    if (!parsed.etcd.empty()) {
      Result<std::unique_ptr<cluster::EtcdMembership>> etcd =
          cluster::EtcdMembership::Open(EtcdOptionsOf(parsed.etcd, options), parsed.cluster);
      if (!etcd.ok()) return etcd.status().WithContext("client init");
      membership = std::move(etcd).value();
    } else {
      std::vector<std::string> addresses;
      for (const client::NodeAddress& node : parsed.nodes)
        addresses.push_back(node.ToString());
      membership = std::make_unique<cluster::StaticMembership>(std::move(addresses));
    }
    client::ClusterClient::Options cluster_options;
    cluster_options.replicas = parsed.replicas > 0 ? parsed.replicas : options.replicas;
    cluster_options.write_quorum = parsed.write_quorum > 0
                                       ? parsed.write_quorum
                                       : std::min(options.write_quorum, cluster_options.replicas);
    auto cluster = std::make_unique<client::ClusterClient>(
        std::string(instance_id), std::move(membership), options, *choice, credentials,
        &impl_->devices, impl_->checksums.get(), cluster_options);
    KVPORT_RETURN_IF_ERROR(cluster->Connect().WithContext("client init"));
    backend = std::move(cluster);
  }
  impl_->endpoint_text = parsed.ToString();
  impl_->is_cluster = parsed.is_cluster();
  impl_->backend = std::move(backend);
  impl_->process = client::ForkGuard();  // its connections are this process's
  return Status::Ok();
}

template <typename R>
Pending<R>::Pending() = default;
template <typename R>
Pending<R>::Pending(client::PendingCallPtr<R> call) : call_(std::move(call)) {}
template <typename R>
Pending<R>::~Pending() {
  if (call_ != nullptr) (void)call_->Finish();
}
template <typename R>
Pending<R>::Pending(Pending&&) noexcept = default;
template <typename R>
Pending<R>& Pending<R>::operator=(Pending&& other) noexcept {
  if (this != &other) {
    if (call_ != nullptr) (void)call_->Finish();
    call_ = std::move(other.call_);
  }
  return *this;
}
template <typename R>
bool Pending<R>::Ready() {
  return call_ == nullptr || call_->Ready();
}
template <typename R>
Result<R> Pending<R>::Wait() {
  if (call_ == nullptr)
    return Status::InvalidArgument("Pending::Wait on a call already waited for");
  Result<R> result = call_->Finish();
  call_.reset();
  return result;
}
template class Pending<BatchResult>;
template class Pending<GetResult>;

namespace {

template <typename R>
client::PendingCallPtr<R> Refused(Status status) {
  return client::Decided<R>(std::move(status));
}

}  // namespace

Pending<BatchResult> Client::MSetAsync(const std::vector<std::string>& keys,
                                       const IOBuffers& values, const SetOptions& options,
                                       const std::vector<std::string>& metas) {
  if (Status usable = impl_->Usable("MSet"); !usable.ok())
    return Pending<BatchResult>(Refused<BatchResult>(std::move(usable)));
  if (values.size() != keys.size()) {
    return Pending<BatchResult>(
        Refused<BatchResult>(CountMismatch("MSet", keys.size(), values.size(), "buffers")));
  }
  if (!metas.empty() && metas.size() != keys.size()) {
    return Pending<BatchResult>(
        Refused<BatchResult>(CountMismatch("MSet", keys.size(), metas.size(), "metas")));
  }
  return Pending<BatchResult>(impl_->backend->StartMSet(keys, values, options, metas));
}

Pending<GetResult> Client::MGetAsync(const std::vector<std::string>& keys,
                                     const GetOptions& options, const IOBuffers& buffers) {
  if (Status usable = impl_->Usable("MGet"); !usable.ok())
    return Pending<GetResult>(Refused<GetResult>(std::move(usable)));
  if (buffers.size() != keys.size()) {
    return Pending<GetResult>(
        Refused<GetResult>(CountMismatch("MGet", keys.size(), buffers.size(), "buffers")));
  }
  return Pending<GetResult>(impl_->backend->StartMGet(keys, options, &buffers, nullptr));
}

Pending<BatchResult> Client::MExistAsync(const std::vector<std::string>& keys,
                                         const ExistOptions& options) {
  if (Status usable = impl_->Usable("MExist"); !usable.ok())
    return Pending<BatchResult>(Refused<BatchResult>(std::move(usable)));
  return Pending<BatchResult>(impl_->backend->StartMExist(keys, options));
}

Pending<BatchResult> Client::MDelAsync(const std::vector<std::string>& keys,
                                       const DelOptions& options) {
  if (Status usable = impl_->Usable("MDel"); !usable.ok())
    return Pending<BatchResult>(Refused<BatchResult>(std::move(usable)));
  return Pending<BatchResult>(impl_->backend->StartMDel(keys, options));
}

Result<BatchResult> Client::MSet(const std::vector<std::string>& keys, const IOBuffers& values,
                                 const SetOptions& options, const std::vector<std::string>& metas) {
  return MSetAsync(keys, values, options, metas).Wait();
}

Result<GetResult> Client::MGet(const std::vector<std::string>& keys, const GetOptions& options,
                               const IOBuffers& buffers) {
  return MGetAsync(keys, options, buffers).Wait();
}

struct LentValues::Loan {
  client::InPlaceLoans loans;
  client::ForkGuard process;  // whose sessions hold the leases
};

LentValues::LentValues() = default;
LentValues::~LentValues() {
  Release();
}
LentValues::LentValues(LentValues&&) noexcept = default;
LentValues& LentValues::operator=(LentValues&&) noexcept = default;

std::span<const uint8_t> LentValues::value(size_t i) const {
  if (loan_ == nullptr || i >= values_.size()) return {};
  return values_[i];
}

bool LentValues::valid() const {
  if (loan_ == nullptr) return false;
  for (const auto& loan : loan_->loans.loans) {
    for (const auto& session : loan->sessions) {
      if (!session->alive() || !session->leases_held()) return false;
    }
  }
  return true;
}

void LentValues::Release() {
  // In a forked child the leases are the parent's: releasing them would write into its
  // connections. Abandoned instead (the parent releases them, or its sessions' end does).
  if (loan_ != nullptr && loan_->process.forked()) (void)loan_.release();
  loan_.reset();  // the leases' destructors send ARENA_RELEASE
  values_.assign(values_.size(), {});
}

Result<LentValues> Client::MGetInPlace(const std::vector<std::string>& keys,
                                       const GetOptions& options) {
  KVPORT_RETURN_IF_ERROR(impl_->Usable("MGetInPlace"));
  LentValues lent;
  lent.loan_ = std::make_unique<LentValues::Loan>();
  KVPORT_ASSIGN_OR_RETURN(
      lent.result_,
      impl_->backend->StartMGet(keys, options, nullptr, &lent.loan_->loans)->Finish());
  lent.values_.assign(keys.size(), {});
  const std::vector<const uint8_t*>& views = lent.loan_->loans.views;
  for (size_t i = 0; i < keys.size() && i < views.size(); ++i) {
    if (lent.result_.codes[i] == KeyCode::kSuccess && views[i] != nullptr) {
      lent.values_[i] = {views[i], static_cast<size_t>(lent.result_.value_sizes[i])};
    }
  }
  return lent;
}

Result<GetResult> Client::MGetMeta(const std::vector<std::string>& keys,
                                   const GetOptions& options) {
  KVPORT_RETURN_IF_ERROR(impl_->Usable("MGetMeta"));
  return impl_->backend->StartMGet(keys, options, nullptr, nullptr)->Finish();
}

Result<BatchResult> Client::MExist(const std::vector<std::string>& keys,
                                   const ExistOptions& options) {
  return MExistAsync(keys, options).Wait();
}

Result<BatchResult> Client::MDel(const std::vector<std::string>& keys, const DelOptions& options) {
  return MDelAsync(keys, options).Wait();
}

Status Client::RegisterMemory(const IOBuffers& buffers, const MemoryInfo& info) {
  if (info.kind != RuntimeKind::kHost) {
    KVPORT_ASSIGN_OR_RETURN(
        const DeviceRuntime* runtime,
        impl_->devices.RuntimeFor(info.kind, fmt::format("{} memory", RuntimeKindName(info.kind))));
    if (info.device_id < 0 || info.device_id >= runtime->device_count()) {
      return Status::InvalidArgument(
          fmt::format("register memory: device {} does not exist ({} runtime sees {} device(s))",
                      info.device_id, RuntimeKindName(info.kind), runtime->device_count()));
    }
  }
  for (const IOBuffer& buffer : buffers) {
    KVPORT_RETURN_IF_ERROR(impl_->devices.registry().Register(buffer.data, buffer.size, info));
  }
  return Status::Ok();
}

Status Client::UnregisterMemory(const IOBuffers& buffers) {
  for (const IOBuffer& buffer : buffers) {
    KVPORT_RETURN_IF_ERROR(impl_->devices.registry().Unregister(buffer.data, buffer.size));
  }
  return Status::Ok();
}

Result<MemoryInfo> Client::RegisteredMemoryOf(const void* data, size_t size) const {
  return impl_->devices.registry().Lookup(data, size);
}

Status Client::Ping() {
  KVPORT_RETURN_IF_ERROR(impl_->Usable("Ping"));
  return impl_->backend->Ping();
}

uint64_t Client::checksum_mismatches() const {
  return impl_->checksums == nullptr ? 0 : impl_->checksums->mismatches();
}

Result<NodeStats> Client::Stats() {
  KVPORT_RETURN_IF_ERROR(impl_->Usable("Stats"));
  return impl_->backend->Stats();
}

Result<std::vector<NodeReport>> Client::StatsPerNode() {
  KVPORT_RETURN_IF_ERROR(impl_->Usable("StatsPerNode"));
  return impl_->backend->StatsPerNode();
}

Result<KeyPage> Client::List(std::string_view ns, uint64_t cursor, uint32_t max_keys) {
  KVPORT_RETURN_IF_ERROR(impl_->Usable("List"));
  return impl_->backend->List(ns, cursor, max_keys);
}

}  // namespace kvport
