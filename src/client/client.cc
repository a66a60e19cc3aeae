// SPDX-License-Identifier: Apache-2.0
// kvport::Client: the EIC-style API over a Transport (its pool, frames, data path) and device
// staging.
#include "kvport/client.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <utility>

#include "client/batch_call.h"
#include "client/connection_pool.h"
#include "client/device_staging.h"
#include "client/endpoint.h"
#include "client/transport.h"
#include "client/transport_choice.h"
#include "common/small_file.h"
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
  std::string transport_reason;                  // why `transport` is what it is, as logged at Init
  std::unique_ptr<client::Transport> transport;  // null until Init succeeded

  client::DeviceStaging devices;  // runtimes, registered memory and staging pools

  Deadline DeadlineFor(std::chrono::milliseconds timeout) const {
    return MonotonicClock::now() + (timeout.count() > 0 ? timeout : options.timeout);
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
  static Status WholeCallFailure(const std::vector<client::FrameResult>& frames,
                                 size_t rejected_locally) {
    if (frames.empty() || rejected_locally > 0) return Status::Ok();
    for (const client::FrameResult& frame : frames) {
      if (frame.status.ok()) return Status::Ok();
    }
    return frames.front().status;
  }

  // MGet (buffers), MGetMeta (neither) and MGetInPlace (loan): one path, three outcomes.
  Result<GetResult> Mget(std::span<const std::string> keys, const GetOptions& get_options,
                         const IOBuffers* buffers, client::Transport::Loan* loan = nullptr);
  template <typename Request, typename Response>
  Result<BatchResult> KeyOnly(std::span<const std::string> keys, std::string_view ns,
                              bool any_namespace, std::chrono::milliseconds timeout, const char* op,
                              const char* wire_op);

  // A round trip without keys (PING, STATS, LIST).
  template <typename Request, typename Response>
  Status RoundTrip(const Request& request, client::DecodingHandler<Request, Response>* handler) {
    const Deadline deadline = DeadlineFor(std::chrono::milliseconds(0));
    KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<Connection> conn, transport->pool().Acquire(deadline));
    handler->request = request;
    return client::RoundTripOn(*conn, handler, deadline);
  }
};

Client::Client() : impl_(std::make_unique<Impl>()) {}

Client::~Client() {
  if (impl_->transport != nullptr) impl_->transport->pool().CloseAll();
}

const std::string& Client::endpoint() const {
  return impl_->endpoint_text;
}

std::string_view Client::transport() const {
  return impl_->transport != nullptr ? impl_->transport->name() : std::string_view();
}

const std::string& Client::transport_reason() const {
  return impl_->transport_reason;
}

Status Client::Init(std::string_view instance_id, std::string_view endpoint,
                    const InitOptions& options) {
  if (impl_->transport != nullptr) {
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
  // A retried Init may name other runtime libraries than a failed one did.
  impl_->devices.UseLibraries(options.cuda_runtime_library, options.ascend_runtime_library,
                              options.staging_cache_bytes);
  TransportEnvironment env;
  env.rdma_devices = ListRdmaDevices();
  if (options.transport_type == 3) {  // only GPUDirect needs CUDA: auto never loads it
    env.cuda = impl_->devices.Runtime(RuntimeKind::kCuda);
  }
  Result<TransportChoice> choice = ResolveTransport(options.transport_type, env);
  if (!choice.ok()) return choice.status().WithContext("client init");
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
  KVPORT_ASSIGN_OR_RETURN(pool_options.connection.token, TokenOf(options));
  Result<client::ChosenTransport> chosen =
      client::OpenTransport(parsed.address, *choice, pool_options, options.connect_timeout);
  if (!chosen.ok()) return chosen.status().WithContext("client init");
  if (chosen->fallback) {
    log::Warn("client {}: {}", instance_id, chosen->reason);
  } else {
    log::Info("client {}: {}", instance_id, chosen->reason);
  }

  impl_->instance_id = std::string(instance_id);
  impl_->endpoint_text = parsed.address.ToString();
  impl_->endpoint = std::move(parsed);
  impl_->transport_reason = std::move(chosen->reason);
  impl_->transport = std::move(chosen->transport);
  log::Info("client {}: connected to kvport node {} over {} ({} connections, timeout {} ms)",
            impl_->instance_id, impl_->endpoint_text, impl_->transport->name(), options.connections,
            options.timeout.count());
  return Status::Ok();
}

Result<BatchResult> Client::MSet(const std::vector<std::string>& keys, const IOBuffers& values,
                                 const SetOptions& options, const std::vector<std::string>& metas) {
  if (impl_->transport == nullptr) return NotReady("MSet");
  if (values.size() != keys.size())
    return CountMismatch("MSet", keys.size(), values.size(), "buffers");
  if (!metas.empty() && metas.size() != keys.size()) {
    return CountMismatch("MSet", keys.size(), metas.size(), "metas");
  }
  BatchResult result;
  if (keys.empty()) return result;
  const Deadline deadline = impl_->DeadlineFor(options.timeout);
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<Connection> first,
                          impl_->transport->pool().Acquire(deadline));
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
  client::WireBuffers wire = impl_->devices.MapBuffers(values, outcomes);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (outcomes.failed(i) || !wire.staged(i)) continue;
    Status copied =
        impl_->devices.CopyStaged(values[i], wire.memory[i], wire.host[i], /*to_host=*/true);
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

  std::vector<protocol::MsetItem> items;
  items.reserve(send.size());
  for (size_t i : send) {
    items.push_back(
        protocol::MsetItem{keys[i], metas.empty() ? std::string_view() : std::string_view(metas[i]),
                           values[i].size, wire.host[i]});
  }
  client::PutBatch batch;
  batch.ns = options.ns;
  batch.ttl_seconds = ttl;
  batch.items = items;
  batch.slices = slices;
  batch.first = std::move(first);
  const std::vector<client::FrameResult> frames = impl_->transport->Put(batch, deadline);
  for (const client::FrameResult& frame : frames) {
    for (size_t k = frame.slice.begin; k < frame.slice.end; ++k) {
      const size_t i = send[k];
      if (!frame.status.ok()) {
        outcomes.Fail(i, client::KeyCodeFromCallFailure(frame.status), frame.status);
      } else {
        outcomes.FromWire(i, frame.codes[k - frame.slice.begin], /*mget=*/false, frame.peer);
      }
    }
  }
  KVPORT_RETURN_IF_ERROR(Impl::WholeCallFailure(frames, rejected).WithContext("MSet"));
  outcomes.Finish(&result);
  return result;
}

// MGET, its meta-only form and the loan share everything but where the values go.
Result<GetResult> Client::Impl::Mget(std::span<const std::string> keys,
                                     const GetOptions& get_options, const IOBuffers* buffers,
                                     client::Transport::Loan* loan) {
  Impl& impl = *this;
  GetResult result;
  const bool meta_only = buffers == nullptr && loan == nullptr;
  const char* op = loan != nullptr ? "MGetInPlace" : meta_only ? "MGetMeta" : "MGet";
  if (loan != nullptr && !impl.transport->capabilities().zero_copy_reads) {
    return Status::NotSupported(fmt::format(
        "{}: reading values in place needs the shared-memory transport (a node on this host); "
        "this client uses {} ({})",
        op, impl.transport->name(), impl.transport_reason));
  }
  const bool any_namespace = get_options.any_namespace;
  KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceOption(op, any_namespace, get_options.ns));
  if (keys.empty()) return result;
  const Deadline deadline = impl.DeadlineFor(get_options.timeout);
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<Connection> first,
                          impl.transport->pool().Acquire(deadline));
  const protocol::Limits limits = first->limits();
  KVPORT_RETURN_IF_ERROR(protocol::CheckNamespace(get_options.ns, limits).WithContext(op));
  if (any_namespace) KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceVersion(op, *first));

  KeyOutcomes outcomes(keys, "MGET", get_options.ns, any_namespace);
  CheckKeys(keys, limits, outcomes);
  client::WireBuffers wire;
  if (buffers != nullptr) wire = impl.devices.MapBuffers(*buffers, outcomes);

  size_t rejected = 0;
  const std::vector<size_t> send = Unfailed(keys.size(), outcomes, &rejected);
  client::FrameCosts costs;
  costs.descriptor_bytes = [&](size_t k) { return keys[send[k]].size() + 24; };
  // Reserve room for what the response may bring back, so one frame's answer is not huge.
  costs.payload_bytes = [&](size_t k) { return buffers == nullptr ? 0 : (*buffers)[send[k]].size; };
  const std::vector<FrameSlice> slices = client::PlanFrames(send.size(), costs, limits);

  // Every connection of the pool negotiated on its own (the node may have been replaced); the
  // first one was checked above, a replaced one fails its frame with NotSupported.
  std::vector<protocol::MgetKey> wire_keys;
  std::vector<char*> destinations;
  wire_keys.reserve(send.size());
  destinations.reserve(send.size());
  for (size_t i : send) {
    protocol::MgetKey key{keys[i], protocol::kUnlimitedCapacity};
    if (buffers != nullptr) key.buffer_capacity = (*buffers)[i].size;
    wire_keys.push_back(key);
    destinations.push_back(buffers == nullptr ? nullptr : wire.host[i]);
  }
  client::GetBatch batch;
  batch.ns = get_options.ns;
  batch.any_namespace = any_namespace;
  batch.meta_only = meta_only;
  batch.keys = wire_keys;
  batch.destinations = destinations;
  batch.slices = slices;
  batch.first = std::move(first);
  std::vector<client::FrameResult> frames;
  if (loan != nullptr) {
    KVPORT_ASSIGN_OR_RETURN(*loan, impl.transport->Lend(batch, deadline));
    frames = std::move(loan->frames);
    // Views per key of the call (the loan's are per sent key).
    std::vector<const uint8_t*> views(keys.size(), nullptr);
    for (size_t k = 0; k < send.size(); ++k)
      views[send[k]] = loan->views[k];
    loan->views = std::move(views);
  } else {
    frames = impl.transport->Get(batch, deadline);
  }

  result.value_sizes.assign(keys.size(), 0);
  result.metas.assign(keys.size(), std::string());
  for (client::FrameResult& frame : frames) {
    for (size_t k = frame.slice.begin; k < frame.slice.end; ++k) {
      const size_t i = send[k];
      if (!frame.status.ok()) {
        outcomes.Fail(i, client::KeyCodeFromCallFailure(frame.status), frame.status);
        continue;
      }
      const size_t j = k - frame.slice.begin;
      const StatusCode code = frame.codes[j];
      outcomes.FromWire(i, code, /*mget=*/!meta_only, frame.peer);
      if (code == StatusCode::kOk || code == StatusCode::kTooLarge) {
        result.value_sizes[i] = frame.value_lengths[j];
        result.metas[i] = std::move(frame.metas[j]);
      }
      if (buffers != nullptr && code == StatusCode::kOk && wire.staged(i)) {
        IOBuffer target = (*buffers)[i];
        target.size = frame.value_lengths[j];
        Status copied =
            impl.devices.CopyStaged(target, wire.memory[i], wire.host[i], /*to_host=*/false);
        if (!copied.ok()) outcomes.Fail(i, KeyCode::kDeviceError, copied);
      }
    }
  }
  KVPORT_RETURN_IF_ERROR(WholeCallFailure(frames, rejected).WithContext(op));
  outcomes.Finish(&result);
  return result;
}

Result<GetResult> Client::MGet(const std::vector<std::string>& keys, const GetOptions& options,
                               const IOBuffers& buffers) {
  if (impl_->transport == nullptr) return NotReady("MGet");
  if (buffers.size() != keys.size()) {
    return CountMismatch("MGet", keys.size(), buffers.size(), "buffers");
  }
  return impl_->Mget(keys, options, &buffers);
}

struct LentValues::Loan {
  client::Transport::Loan loan;
};

LentValues::LentValues() = default;
LentValues::~LentValues() = default;
LentValues::LentValues(LentValues&&) noexcept = default;
LentValues& LentValues::operator=(LentValues&&) noexcept = default;

std::span<const uint8_t> LentValues::value(size_t i) const {
  if (loan_ == nullptr || i >= values_.size()) return {};
  return values_[i];
}

bool LentValues::valid() const {
  if (loan_ == nullptr) return false;
  for (const auto& session : loan_->loan.sessions) {
    if (!session->alive()) return false;
  }
  return true;
}

void LentValues::Release() {
  loan_.reset();  // the lease's destructor sends SHM_RELEASE
  values_.assign(values_.size(), {});
}

Result<LentValues> Client::MGetInPlace(const std::vector<std::string>& keys,
                                       const GetOptions& options) {
  if (impl_->transport == nullptr) return NotReady("MGetInPlace");
  LentValues lent;
  lent.loan_ = std::make_unique<LentValues::Loan>();
  KVPORT_ASSIGN_OR_RETURN(lent.result_, impl_->Mget(keys, options, nullptr, &lent.loan_->loan));
  lent.values_.assign(keys.size(), {});
  const std::vector<const uint8_t*>& views = lent.loan_->loan.views;
  for (size_t i = 0; i < keys.size() && i < views.size(); ++i) {
    if (lent.result_.codes[i] == KeyCode::kSuccess && views[i] != nullptr) {
      lent.values_[i] = {views[i], static_cast<size_t>(lent.result_.value_sizes[i])};
    }
  }
  return lent;
}

Result<GetResult> Client::MGetMeta(const std::vector<std::string>& keys,
                                   const GetOptions& options) {
  if (impl_->transport == nullptr) return NotReady("MGetMeta");
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
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<Connection> first,
                          impl.transport->pool().Acquire(deadline));
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
      slices, std::move(first), impl.transport->pool(), deadline,
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
  if (impl_->transport == nullptr) return NotReady("MExist");
  return impl_->KeyOnly<protocol::MexistRequest, protocol::MexistResponse>(
      keys, options.ns, options.any_namespace, options.timeout, "MExist", "MEXIST");
}

Result<BatchResult> Client::MDel(const std::vector<std::string>& keys, const DelOptions& options) {
  if (impl_->transport == nullptr) return NotReady("MDel");
  return impl_->KeyOnly<protocol::MdelRequest, protocol::MdelResponse>(
      keys, options.ns, options.any_namespace, options.timeout, "MDel", "MDEL");
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

Status Client::Ping() {
  if (impl_->transport == nullptr) return NotReady("Ping");
  client::DecodingHandler<protocol::PingRequest, protocol::PingResponse> handler;
  return impl_->RoundTrip(protocol::PingRequest{}, &handler).WithContext("Ping");
}

Result<NodeStats> Client::Stats() {
  if (impl_->transport == nullptr) return NotReady("Stats");
  // The most namespaces collected from one node: a node that keeps saying "more" cannot make
  // the client grow without bound.
  constexpr size_t kMaxNamespaces = size_t{1} << 22;
  NodeStats stats;
  protocol::StatsRequest request;  // the first page; then each page after the last one seen
  std::string after;
  for (bool first_page = true;; first_page = false) {
    client::DecodingHandler<protocol::StatsRequest, protocol::StatsResponse> handler;
    KVPORT_RETURN_IF_ERROR(impl_->RoundTrip(request, &handler).WithContext("Stats"));
    if (first_page) {
      for (const protocol::StatsCounter& counter : handler.response.counters)
        stats.counters.emplace_back(std::string(counter.name), counter.value);
    }
    for (const protocol::NamespaceUsage& usage : handler.response.namespaces) {
      // Pages come in ascending order, each after the previous one: anything else would let a
      // node send the same namespaces forever.
      if (!request.from_start && usage.ns <= after) {
        return Status::Corruption("Stats: the node sent namespaces out of order across pages");
      }
      stats.namespaces.push_back(
          NodeStats::Namespace{std::string(usage.ns), usage.objects, usage.bytes});
    }
    if (!handler.response.more) break;
    if (handler.response.namespaces.empty())
      return Status::Corruption("Stats: the node said more namespaces follow but sent none");
    if (stats.namespaces.size() > kMaxNamespaces)
      return Status::TooLarge("Stats: the node has more than " + std::to_string(kMaxNamespaces) +
                              " namespaces");
    after = stats.namespaces.back().name;
    request.from_start = false;
    request.after = after;
  }
  return stats;
}

Result<KeyPage> Client::List(std::string_view ns, uint64_t cursor, uint32_t max_keys) {
  if (impl_->transport == nullptr) return NotReady("List");
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
