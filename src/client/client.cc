// kvport::Client: the EIC-style API over ConnectionPool, batch frames and device staging.
#include "kvport/client.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <limits>
#include <mutex>
#include <utility>

#include "client/batch_call.h"
#include "client/connection_pool.h"
#include "client/endpoint.h"
#include "client/memory_registry.h"
#include "client/staging_pool.h"
#include "kvport/log.h"
#include "kvport/transport.h"
#include "protocol/messages.h"

namespace kvport {

using client::Connection;
using client::ConnectionPool;
using client::Deadline;
using client::FrameCall;
using client::FrameSlice;
using client::KeyOutcomes;

namespace {

constexpr uint64_t kStagingAlign = 64;

uint64_t AlignUp(uint64_t n) {
  return (n + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
}

size_t KindIndex(RuntimeKind kind) {
  return static_cast<size_t>(kind);
}

// Where each key's bytes are on the wire side: the caller's host buffer, or a slot in pinned
// host memory standing in for a device buffer.
struct WireBuffers {
  std::vector<char*> host;         // per key; the address TCP reads from / writes to
  std::vector<MemoryInfo> memory;  // per key; kHost unless the buffer is device memory
  std::vector<client::StagingPool::Lease> leases;
  bool staged(size_t i) const { return memory[i].kind != RuntimeKind::kHost; }
};

Status NotReady(std::string_view op) {
  return Status::InvalidArgument(std::string(op) + " called before a successful Client::Init");
}

Status CountMismatch(std::string_view op, size_t keys, size_t buffers, std::string_view what) {
  return Status::InvalidArgument(fmt::format("{}: {} keys but {} {}", op, keys, buffers, what));
}

// Rejects locally what the node would reject, as per-key codes.
void CheckKeys(std::span<const std::string> keys, const protocol::Limits& limits,
               KeyOutcomes& outcomes) {
  for (size_t i = 0; i < keys.size(); ++i) {
    Status checked = protocol::CheckKey(keys[i], limits);
    if (!checked.ok()) {
      outcomes.Fail(i, KeyCode::kInvalidArgument, checked);
    }
  }
}

// An any-namespace call names no namespace (the options' contract); checked before anything
// is sent.
Status CheckAnyNamespaceOption(std::string_view op, bool any_namespace, std::string_view ns) {
  if (!any_namespace || ns.empty()) return Status::Ok();
  return Status::InvalidArgument(
      fmt::format("{}: any_namespace with namespace '{}': leave ns empty to match the keys in any "
                  "namespace, or clear any_namespace to use '{}' alone",
                  op, ns, ns));
}

// Any-namespace requests need the node to have negotiated protocol version 2; there is no
// fallback to an exact lookup.
Status CheckAnyNamespaceVersion(std::string_view op, const Connection& conn) {
  if (conn.version() >= protocol::kAnyNamespaceVersion) return Status::Ok();
  return Status::NotSupported(fmt::format(
      "{}: any_namespace needs protocol version {} or later, but node {} chose version {} (this "
      "client speaks {}..{}); upgrade the node",
      op, protocol::kAnyNamespaceVersion, conn.peer(), conn.version(),
      protocol::kMinProtocolVersion, protocol::kMaxProtocolVersion));
}

std::vector<size_t> Unfailed(size_t n, const KeyOutcomes& outcomes, size_t* rejected) {
  std::vector<size_t> send;
  send.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!outcomes.failed(i)) send.push_back(i);
  }
  *rejected = n - send.size();
  return send;
}

}  // namespace

struct Client::Impl {
  std::string instance_id;
  std::string endpoint_text;
  client::Endpoint endpoint;
  InitOptions options;
  TransportChoice transport;
  std::unique_ptr<ConnectionPool> pool;
  client::MemoryRegistry registry;

  std::mutex runtime_mu;  // guards the runtimes and staging pools below (created on demand)
  std::unique_ptr<DeviceRuntime> own_cuda;
  std::unique_ptr<DeviceRuntime> own_ascend;
  std::array<std::unique_ptr<client::StagingPool>, 3> staging;

  Deadline DeadlineFor(std::chrono::milliseconds timeout) const {
    return client::Clock::now() + (timeout.count() > 0 ? timeout : options.timeout);
  }

  // The runtime for memory of `kind`: the client's own (InitOptions library path) or the
  // process-wide one, opened now if it was not yet. NotSupported when it is not usable here.
  Result<const DeviceRuntime*> RuntimeFor(RuntimeKind kind, std::string_view purpose) {
    const DeviceRuntime* runtime = nullptr;
    {
      std::lock_guard lock(runtime_mu);
      runtime = LockedRuntime(kind);
    }
    KVPORT_RETURN_IF_ERROR(runtime->RequireUsable(purpose));
    return runtime;
  }

  const DeviceRuntime* LockedRuntime(RuntimeKind kind) {
    switch (kind) {
      case RuntimeKind::kHost:
        return &HostRuntime();
      case RuntimeKind::kCuda:
        if (options.cuda_runtime_library.empty()) return &CudaRuntime();
        if (own_cuda == nullptr) own_cuda = OpenCudaRuntime(options.cuda_runtime_library);
        return own_cuda.get();
      case RuntimeKind::kAscend:
        if (options.ascend_runtime_library.empty()) return &AscendRuntime();
        if (own_ascend == nullptr) own_ascend = OpenAscendRuntime(options.ascend_runtime_library);
        return own_ascend.get();
    }
    return &HostRuntime();
  }

  Result<client::StagingPool*> StagingFor(RuntimeKind kind) {
    KVPORT_ASSIGN_OR_RETURN(const DeviceRuntime* runtime,
                            RuntimeFor(kind, "staging device buffers"));
    std::lock_guard lock(runtime_mu);
    auto& slot = staging[KindIndex(kind)];
    if (slot == nullptr) {
      slot = std::make_unique<client::StagingPool>(runtime, options.staging_cache_bytes);
    }
    return slot.get();
  }

  // Looks up where each buffer among `keys_to_check` lives and gives device buffers pinned
  // host memory. Keys whose buffer is unusable are failed in `outcomes`.
  WireBuffers MapBuffers(const IOBuffers& buffers, KeyOutcomes& outcomes) {
    WireBuffers wire;
    wire.host.assign(buffers.size(), nullptr);
    wire.memory.assign(buffers.size(), MemoryInfo{});
    std::array<uint64_t, 3> staged_bytes{};
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (outcomes.failed(i)) continue;
      const IOBuffer& buffer = buffers[i];
      if (buffer.data == nullptr && buffer.size > 0) {
        outcomes.Fail(
            i, KeyCode::kInvalidArgument,
            Status::InvalidArgument("null buffer of " + std::to_string(buffer.size) + " bytes"));
        continue;
      }
      Result<MemoryInfo> where = registry.Lookup(buffer.data, buffer.size);
      if (!where.ok()) {
        outcomes.Fail(i, KeyCode::kInvalidArgument, where.status());
        continue;
      }
      wire.memory[i] = *where;
      if (wire.staged(i) && buffer.size > 0) {
        staged_bytes[KindIndex(where->kind)] += AlignUp(buffer.size);
      } else {
        wire.memory[i].kind = RuntimeKind::kHost;  // nothing to stage for an empty buffer
        wire.host[i] = static_cast<char*>(buffer.data);
      }
    }
    for (RuntimeKind kind : {RuntimeKind::kCuda, RuntimeKind::kAscend}) {
      const uint64_t total = staged_bytes[KindIndex(kind)];
      if (total == 0) continue;
      Status failed;
      char* next = nullptr;
      Result<client::StagingPool*> stager = StagingFor(kind);
      if (!stager.ok()) {
        failed = stager.status();
      } else {
        Result<client::StagingPool::Lease> lease = (*stager)->Acquire(total);
        if (lease.ok()) {
          next = lease->data();
          wire.leases.push_back(std::move(lease).value());
        } else {
          failed = lease.status();
        }
      }
      for (size_t i = 0; i < buffers.size(); ++i) {
        if (outcomes.failed(i) || wire.memory[i].kind != kind) continue;
        if (next == nullptr) {
          outcomes.Fail(i, KeyCode::kDeviceError, failed);
          continue;
        }
        wire.host[i] = next;
        next += AlignUp(buffers[i].size);
      }
    }
    return wire;
  }

  // Copies a staged key between its device buffer and its pinned host slot.
  Status CopyStaged(const IOBuffer& buffer, const MemoryInfo& memory, char* host, bool to_host) {
    KVPORT_ASSIGN_OR_RETURN(const DeviceRuntime* runtime,
                            RuntimeFor(memory.kind, "staging device buffers"));
    KVPORT_RETURN_IF_ERROR(runtime->SetDevice(memory.device_id));
    return to_host ? runtime->CopyToHost(host, buffer.data, buffer.size)
                   : runtime->CopyToDevice(buffer.data, host, buffer.size);
  }

  // The failure of a call none of whose keys got an answer, if that is what happened: every
  // key that was not rejected locally belongs to a frame that failed as a whole.
  template <typename Call>
  static Status WholeCallFailure(const std::vector<std::unique_ptr<Call>>& calls,
                                 size_t rejected_locally) {
    if (calls.empty() || rejected_locally > 0) return Status::Ok();
    for (const auto& call : calls) {
      if (call->status.ok()) return Status::Ok();
    }
    return calls.front()->status;
  }

  Result<GetResult> Mget(std::span<const std::string> keys, const GetOptions& get_options,
                         const IOBuffers* buffers);
  template <typename Request, typename Response>
  Result<BatchResult> KeyOnly(std::span<const std::string> keys, std::string_view ns,
                              bool any_namespace, std::chrono::milliseconds timeout, const char* op,
                              const char* wire_op);

  // A round trip without keys (PING, STATS, LIST).
  template <typename Request, typename Response>
  Status RoundTrip(const Request& request, client::DecodingHandler<Request, Response>* handler) {
    const Deadline deadline = DeadlineFor(std::chrono::milliseconds(0));
    KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<Connection> conn, pool->Acquire(deadline));
    handler->request = request;
    handler->limits = conn->limits();
    protocol::EncodedFrame frame;
    const uint64_t id = conn->NextRequestId();
    KVPORT_RETURN_IF_ERROR(
        protocol::EncodeRequest(id, handler->request, conn->limits(), &frame, conn->version()));
    KVPORT_ASSIGN_OR_RETURN(Connection::Ticket ticket, conn->Send(id, frame, handler, deadline));
    return conn->Wait(ticket, deadline);
  }
};

Client::Client() : impl_(std::make_unique<Impl>()) {}

Client::~Client() {
  if (impl_->pool != nullptr) impl_->pool->CloseAll();
}

const std::string& Client::endpoint() const {
  return impl_->endpoint_text;
}

std::string_view Client::transport() const {
  return TransportKindName(impl_->transport.resolved);
}

const std::string& Client::transport_reason() const {
  return impl_->transport.reason;
}

Status Client::Init(std::string_view instance_id, std::string_view endpoint,
                    const InitOptions& options) {
  if (impl_->pool != nullptr) {
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
  if (options.log_level >= 0) {
    static constexpr log::Level kLevels[] = {log::Level::kDebug, log::Level::kInfo,
                                             log::Level::kWarn, log::Level::kError};
    log::SetLevel(kLevels[std::min(options.log_level, 3)]);
  }
  KVPORT_ASSIGN_OR_RETURN(client::Endpoint parsed, client::ParseEndpoint(endpoint));

  // The transport first: a configuration this host cannot serve fails before any connection.
  // Only automatic selection and GPUDirect depend on CUDA; TCP and RDMA never load it.
  impl_->options = options;
  {
    // A retried Init may name other runtime libraries than a failed one did.
    std::lock_guard lock(impl_->runtime_mu);
    impl_->own_cuda.reset();
    impl_->own_ascend.reset();
  }
  TransportEnvironment env;
  env.rdma_devices = ListRdmaDevices();
  if (options.transport_type == 0 || options.transport_type == 3) {
    std::lock_guard lock(impl_->runtime_mu);
    env.cuda = impl_->LockedRuntime(RuntimeKind::kCuda);
  }
  Result<TransportChoice> choice = ResolveTransport(options.transport_type, env);
  if (!choice.ok()) return choice.status().WithContext("client init");
  if (choice->fallback) {
    log::Warn("client {}: {}", instance_id, choice->reason);
  } else {
    log::Info("client {}: {}", instance_id, choice->reason);
  }
  if (!options.log_dir.empty()) {
    log::Info("client {}: log_dir '{}' is accepted for EIC compatibility; kvport logs to stderr",
              instance_id, options.log_dir);
  }

  client::PoolOptions pool_options;
  pool_options.connections = options.connections;
  pool_options.connect_timeout = options.connect_timeout;
  pool_options.backoff_min = options.reconnect_backoff_min;
  pool_options.backoff_max = options.reconnect_backoff_max;
  pool_options.client_name = "kvport-client " + std::string(instance_id);
  pool_options.connection.drain_timeout = options.drain_timeout;
  pool_options.connection.drain_max_bytes = options.drain_max_bytes;
  auto pool = std::make_unique<ConnectionPool>(parsed.address, pool_options);
  Status connected = pool->ConnectFirst(client::Clock::now() + options.connect_timeout);
  if (!connected.ok()) return connected.WithContext("client init");

  impl_->instance_id = std::string(instance_id);
  impl_->endpoint_text = parsed.address.ToString();
  impl_->endpoint = std::move(parsed);
  impl_->transport = std::move(choice).value();
  impl_->pool = std::move(pool);
  log::Info("client {}: connected to kvport node {} ({} connections, timeout {} ms)",
            impl_->instance_id, impl_->endpoint_text, options.connections, options.timeout.count());
  return Status::Ok();
}

Result<BatchResult> Client::MSet(const std::vector<std::string>& keys, const IOBuffers& values,
                                 const SetOptions& options, const std::vector<std::string>& metas) {
  if (impl_->pool == nullptr) return NotReady("MSet");
  if (values.size() != keys.size())
    return CountMismatch("MSet", keys.size(), values.size(), "buffers");
  if (!metas.empty() && metas.size() != keys.size()) {
    return CountMismatch("MSet", keys.size(), metas.size(), "metas");
  }
  BatchResult result;
  if (keys.empty()) return result;
  const Deadline deadline = impl_->DeadlineFor(options.timeout);
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<Connection> first, impl_->pool->Acquire(deadline));
  const protocol::Limits limits = first->limits();
  KVPORT_RETURN_IF_ERROR(protocol::CheckNamespace(options.ns, limits).WithContext("MSet"));

  KeyOutcomes outcomes(keys, "MSET", options.ns);
  CheckKeys(keys, limits, outcomes);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (outcomes.failed(i)) continue;
    Status checked = metas.empty() ? Status::Ok() : protocol::CheckMeta(metas[i], limits);
    if (checked.ok()) checked = protocol::CheckValueLength(values[i].size, limits);
    if (!checked.ok()) {
      outcomes.Fail(
          i,
          checked.code() == StatusCode::kTooLarge ? KeyCode::kTooLarge : KeyCode::kInvalidArgument,
          checked);
    }
  }
  WireBuffers wire = impl_->MapBuffers(values, outcomes);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (outcomes.failed(i) || !wire.staged(i)) continue;
    Status copied = impl_->CopyStaged(values[i], wire.memory[i], wire.host[i], /*to_host=*/true);
    if (!copied.ok()) outcomes.Fail(i, KeyCode::kDeviceError, copied);
  }

  size_t rejected = 0;
  const std::vector<size_t> send = Unfailed(keys.size(), outcomes, &rejected);
  client::FrameCosts costs;
  costs.descriptor_bytes = [&](size_t k) {
    const size_t i = send[k];
    return keys[i].size() + (metas.empty() ? 0 : metas[i].size()) + 32;
  };
  costs.payload_bytes = [&](size_t k) { return values[send[k]].size; };
  const std::vector<FrameSlice> slices = client::PlanFrames(send.size(), costs, limits);
  const uint32_t ttl = options.ttl_seconds <= 0
                           ? 0
                           : static_cast<uint32_t>(std::min<int64_t>(
                                 options.ttl_seconds, std::numeric_limits<uint32_t>::max()));

  using Handler = client::DecodingHandler<protocol::MsetRequest, protocol::MsetResponse>;
  auto calls = client::RunFrames<Handler>(
      slices, std::move(first), *impl_->pool, deadline,
      [&](FrameCall<Handler>& call, uint64_t id, const protocol::Limits& conn_limits,
          protocol::EncodedFrame* frame) {
        protocol::MsetRequest& request = call.handler.request;
        request.ns = options.ns;
        request.ttl_seconds = ttl;
        for (size_t k = call.slice.begin; k < call.slice.end; ++k) {
          const size_t i = send[k];
          request.items.push_back(protocol::MsetItem{
              keys[i], metas.empty() ? std::string_view() : std::string_view(metas[i]),
              values[i].size, wire.host[i]});
        }
        call.handler.limits = conn_limits;
        return protocol::EncodeRequest(id, request, conn_limits, frame, call.conn->version());
      });

  for (const auto& call : calls) {
    for (size_t k = call->slice.begin; k < call->slice.end; ++k) {
      const size_t i = send[k];
      if (!call->status.ok()) {
        outcomes.Fail(i, client::KeyCodeFromCallFailure(call->status), call->status);
      } else {
        outcomes.FromWire(i, call->handler.response.statuses[k - call->slice.begin],
                          /*mget=*/false, call->conn->peer());
      }
    }
  }
  KVPORT_RETURN_IF_ERROR(Impl::WholeCallFailure(calls, rejected).WithContext("MSet"));
  outcomes.Finish(&result);
  return result;
}

// MGET and its meta-only form share everything but the buffers.
Result<GetResult> Client::Impl::Mget(std::span<const std::string> keys,
                                     const GetOptions& get_options, const IOBuffers* buffers) {
  Impl& impl = *this;
  GetResult result;
  const bool meta_only = buffers == nullptr;
  const char* op = meta_only ? "MGetMeta" : "MGet";
  const bool any_namespace = get_options.any_namespace;
  KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceOption(op, any_namespace, get_options.ns));
  if (keys.empty()) return result;
  const Deadline deadline = impl.DeadlineFor(get_options.timeout);
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<Connection> first, impl.pool->Acquire(deadline));
  const protocol::Limits limits = first->limits();
  KVPORT_RETURN_IF_ERROR(protocol::CheckNamespace(get_options.ns, limits).WithContext(op));
  if (any_namespace) KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceVersion(op, *first));

  KeyOutcomes outcomes(keys, "MGET", get_options.ns, any_namespace);
  CheckKeys(keys, limits, outcomes);
  WireBuffers wire;
  if (!meta_only) wire = impl.MapBuffers(*buffers, outcomes);

  size_t rejected = 0;
  const std::vector<size_t> send = Unfailed(keys.size(), outcomes, &rejected);
  client::FrameCosts costs;
  costs.descriptor_bytes = [&](size_t k) { return keys[send[k]].size() + 24; };
  // Reserve room for what the response may bring back, so one frame's answer is not huge.
  costs.payload_bytes = [&](size_t k) { return meta_only ? 0 : (*buffers)[send[k]].size; };
  const std::vector<FrameSlice> slices = client::PlanFrames(send.size(), costs, limits);

  auto calls = client::RunFrames<client::MgetHandler>(
      slices, std::move(first), *impl.pool, deadline,
      [&](FrameCall<client::MgetHandler>& call, uint64_t id, const protocol::Limits& conn_limits,
          protocol::EncodedFrame* frame) {
        // Every connection of the pool negotiated on its own (the node may have been replaced).
        if (any_namespace) KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceVersion(op, *call.conn));
        protocol::MgetRequest& request = call.handler.request;
        request.ns = get_options.ns;
        request.meta_only = meta_only;
        request.any_namespace = any_namespace;
        for (size_t k = call.slice.begin; k < call.slice.end; ++k) {
          const size_t i = send[k];
          protocol::MgetKey key{keys[i], protocol::kUnlimitedCapacity};
          if (!meta_only) key.buffer_capacity = (*buffers)[i].size;
          request.keys.push_back(key);
          call.handler.destinations.push_back(meta_only ? nullptr : wire.host[i]);
        }
        call.handler.limits = conn_limits;
        return protocol::EncodeRequest(id, request, conn_limits, frame, call.conn->version());
      });

  result.value_sizes.assign(keys.size(), 0);
  result.metas.assign(keys.size(), std::string());
  for (const auto& call : calls) {
    for (size_t k = call->slice.begin; k < call->slice.end; ++k) {
      const size_t i = send[k];
      if (!call->status.ok()) {
        outcomes.Fail(i, client::KeyCodeFromCallFailure(call->status), call->status);
        continue;
      }
      const protocol::MgetResult& got = call->handler.response.results[k - call->slice.begin];
      outcomes.FromWire(i, got.status, /*mget=*/!meta_only, call->conn->peer());
      if (got.status == StatusCode::kOk || got.status == StatusCode::kTooLarge) {
        result.value_sizes[i] = got.value_length;
        result.metas[i] = std::string(got.meta);
      }
      if (!meta_only && got.status == StatusCode::kOk && wire.staged(i)) {
        IOBuffer target = (*buffers)[i];
        target.size = got.value_length;
        Status copied = impl.CopyStaged(target, wire.memory[i], wire.host[i], /*to_host=*/false);
        if (!copied.ok()) outcomes.Fail(i, KeyCode::kDeviceError, copied);
      }
    }
  }
  KVPORT_RETURN_IF_ERROR(WholeCallFailure(calls, rejected).WithContext(op));
  outcomes.Finish(&result);
  return result;
}

Result<GetResult> Client::MGet(const std::vector<std::string>& keys, const GetOptions& options,
                               const IOBuffers& buffers) {
  if (impl_->pool == nullptr) return NotReady("MGet");
  if (buffers.size() != keys.size()) {
    return CountMismatch("MGet", keys.size(), buffers.size(), "buffers");
  }
  return impl_->Mget(keys, options, &buffers);
}

Result<GetResult> Client::MGetMeta(const std::vector<std::string>& keys,
                                   const GetOptions& options) {
  if (impl_->pool == nullptr) return NotReady("MGetMeta");
  return impl_->Mget(keys, options, nullptr);
}

// MEXIST and MDEL: keys in, one status per key out.
template <typename Request, typename Response>
Result<BatchResult> Client::Impl::KeyOnly(std::span<const std::string> keys, std::string_view ns,
                                          bool any_namespace, std::chrono::milliseconds timeout,
                                          const char* op, const char* wire_op) {
  Impl& impl = *this;
  BatchResult result;
  KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceOption(op, any_namespace, ns));
  if (keys.empty()) return result;
  const Deadline deadline = impl.DeadlineFor(timeout);
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<Connection> first, impl.pool->Acquire(deadline));
  const protocol::Limits limits = first->limits();
  KVPORT_RETURN_IF_ERROR(protocol::CheckNamespace(ns, limits).WithContext(op));
  if (any_namespace) KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceVersion(op, *first));
  KeyOutcomes outcomes(keys, wire_op, ns, any_namespace);
  CheckKeys(keys, limits, outcomes);
  size_t rejected = 0;
  const std::vector<size_t> send = Unfailed(keys.size(), outcomes, &rejected);
  client::FrameCosts costs;
  costs.descriptor_bytes = [&](size_t k) { return keys[send[k]].size() + 16; };
  const std::vector<FrameSlice> slices = client::PlanFrames(send.size(), costs, limits);

  using Handler = client::DecodingHandler<Request, Response>;
  auto calls = client::RunFrames<Handler>(
      slices, std::move(first), *impl.pool, deadline,
      [&](FrameCall<Handler>& call, uint64_t id, const protocol::Limits& conn_limits,
          protocol::EncodedFrame* frame) {
        if (any_namespace) KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceVersion(op, *call.conn));
        Request& request = call.handler.request;
        request.ns = ns;
        request.any_namespace = any_namespace;
        for (size_t k = call.slice.begin; k < call.slice.end; ++k) {
          request.keys.push_back(keys[send[k]]);
        }
        call.handler.limits = conn_limits;
        return protocol::EncodeRequest(id, request, conn_limits, frame, call.conn->version());
      });
  for (const auto& call : calls) {
    for (size_t k = call->slice.begin; k < call->slice.end; ++k) {
      const size_t i = send[k];
      if (!call->status.ok()) {
        outcomes.Fail(i, client::KeyCodeFromCallFailure(call->status), call->status);
        continue;
      }
      StatusCode code;
      if constexpr (std::is_same_v<Response, protocol::MexistResponse>) {
        code = call->handler.response.results[k - call->slice.begin].status;
      } else {
        code = call->handler.response.statuses[k - call->slice.begin];
      }
      outcomes.FromWire(i, code, /*mget=*/false, call->conn->peer());
    }
  }
  KVPORT_RETURN_IF_ERROR(WholeCallFailure(calls, rejected).WithContext(op));
  outcomes.Finish(&result);
  return result;
}

Result<BatchResult> Client::MExist(const std::vector<std::string>& keys,
                                   const ExistOptions& options) {
  if (impl_->pool == nullptr) return NotReady("MExist");
  return impl_->KeyOnly<protocol::MexistRequest, protocol::MexistResponse>(
      keys, options.ns, options.any_namespace, options.timeout, "MExist", "MEXIST");
}

Result<BatchResult> Client::MDel(const std::vector<std::string>& keys, const DelOptions& options) {
  if (impl_->pool == nullptr) return NotReady("MDel");
  return impl_->KeyOnly<protocol::MdelRequest, protocol::MdelResponse>(
      keys, options.ns, options.any_namespace, options.timeout, "MDel", "MDEL");
}

Status Client::RegisterMemory(const IOBuffers& buffers, const MemoryInfo& info) {
  if (info.kind != RuntimeKind::kHost) {
    KVPORT_ASSIGN_OR_RETURN(
        const DeviceRuntime* runtime,
        impl_->RuntimeFor(info.kind, fmt::format("{} memory", RuntimeKindName(info.kind))));
    if (info.device_id < 0 || info.device_id >= runtime->device_count()) {
      return Status::InvalidArgument(
          fmt::format("register memory: device {} does not exist ({} runtime sees {} device(s))",
                      info.device_id, RuntimeKindName(info.kind), runtime->device_count()));
    }
  }
  for (const IOBuffer& buffer : buffers) {
    KVPORT_RETURN_IF_ERROR(impl_->registry.Register(buffer.data, buffer.size, info));
  }
  return Status::Ok();
}

Status Client::UnregisterMemory(const IOBuffers& buffers) {
  for (const IOBuffer& buffer : buffers) {
    KVPORT_RETURN_IF_ERROR(impl_->registry.Unregister(buffer.data, buffer.size));
  }
  return Status::Ok();
}

Status Client::Ping() {
  if (impl_->pool == nullptr) return NotReady("Ping");
  client::DecodingHandler<protocol::PingRequest, protocol::PingResponse> handler;
  return impl_->RoundTrip(protocol::PingRequest{}, &handler).WithContext("Ping");
}

Result<NodeStats> Client::Stats() {
  if (impl_->pool == nullptr) return NotReady("Stats");
  client::DecodingHandler<protocol::StatsRequest, protocol::StatsResponse> handler;
  KVPORT_RETURN_IF_ERROR(impl_->RoundTrip(protocol::StatsRequest{}, &handler).WithContext("Stats"));
  NodeStats stats;
  for (const protocol::StatsCounter& counter : handler.response.counters) {
    stats.counters.emplace_back(std::string(counter.name), counter.value);
  }
  for (const protocol::NamespaceUsage& usage : handler.response.namespaces) {
    stats.namespaces.push_back(
        NodeStats::Namespace{std::string(usage.ns), usage.objects, usage.bytes});
  }
  return stats;
}

Result<KeyPage> Client::List(std::string_view ns, uint64_t cursor, uint32_t max_keys) {
  if (impl_->pool == nullptr) return NotReady("List");
  client::DecodingHandler<protocol::ListRequest, protocol::ListResponse> handler;
  protocol::ListRequest request;
  request.ns = ns;
  request.cursor = cursor;
  request.max_keys = max_keys;
  KVPORT_RETURN_IF_ERROR(impl_->RoundTrip(request, &handler).WithContext("List"));
  KeyPage page;
  page.next_cursor = handler.response.next_cursor;
  for (std::string_view key : handler.response.keys)
    page.keys.emplace_back(key);
  return page;
}

}  // namespace kvport
