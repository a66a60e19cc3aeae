// SPDX-License-Identifier: Apache-2.0
#include "client/node_client.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "client/batch_call.h"
#include "client/connection_pool.h"
#include "client/transport_choice.h"
#include "kvport/log.h"
#include "protocol/messages.h"

namespace kvport::client {

namespace {

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

// The connection a batched call's first frame goes on, after the checks every call makes
// before anything is sent: its namespace under the node's limits and, for a call that matches
// keys in any namespace, the node's protocol version.
Result<std::shared_ptr<Connection>> FirstConnection(ConnectionPool& pool, Deadline deadline,
                                                    const char* op, std::string_view ns,
                                                    bool any_namespace) {
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<Connection> first, pool.Acquire(deadline));
  KVPORT_RETURN_IF_ERROR(protocol::CheckNamespace(ns, first->limits()).WithContext(op));
  if (any_namespace) KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceVersion(op, *first));
  return first;
}

// The keys to send (those not rejected locally), in *send; how many were rejected.
void Unfailed(size_t n, const KeyOutcomes& outcomes, std::vector<size_t>* send, size_t* rejected) {
  send->clear();
  for (size_t i = 0; i < n; ++i) {
    if (!outcomes.failed(i)) send->push_back(i);
  }
  *rejected = n - send->size();
}

// The failure of a call none of whose keys got an answer, if that is what happened: every
// key that was not rejected locally belongs to a frame that failed as a whole.
template <typename Call>
Status WholeCallFailure(const std::vector<std::unique_ptr<Call>>& calls, size_t rejected_locally) {
  if (calls.empty() || rejected_locally > 0) return Status::Ok();
  for (const auto& call : calls) {
    if (call->status.ok()) return Status::Ok();
  }
  return calls.front()->status;
}
Status WholeCallFailure(std::span<const FrameResult> frames, size_t rejected_locally) {
  if (frames.empty() || rejected_locally > 0) return Status::Ok();
  for (const FrameResult& frame : frames) {
    if (frame.status.ok()) return Status::Ok();
  }
  return frames.front().status;
}

}  // namespace

Result<std::unique_ptr<NodeClient>> NodeClient::Open(
    std::string_view instance_id, const NodeAddress& address, const InitOptions& options,
    const TransportChoice& choice, const NodeCredentials& credentials, DeviceStaging* devices,
    ValueChecksums* checksums) {
  PoolOptions pool_options;
  pool_options.connections = options.connections;
  pool_options.connect_timeout = options.connect_timeout;
  pool_options.backoff_min = options.reconnect_backoff_min;
  pool_options.backoff_max = options.reconnect_backoff_max;
  pool_options.client_name = "kvport-client " + std::string(instance_id);
  pool_options.connection.drain_timeout = options.drain_timeout;
  pool_options.connection.drain_max_bytes = options.drain_max_bytes;
  pool_options.connection.token = credentials.token;
  pool_options.connection.tls = credentials.tls;
  pool_options.connection.busy_poll = options.busy_poll;
  KVPORT_ASSIGN_OR_RETURN(
      ChosenTransport chosen,
      OpenTransport(address, choice, pool_options, options.connect_timeout, options.ucx_devices));
  if (chosen.fallback) {
    log::Warn("client {}: {}", instance_id, chosen.reason);
  } else {
    log::Info("client {}: {}", instance_id, chosen.reason);
  }
  // The connection OpenTransport opened: what its HELLO said holds for the client.
  KVPORT_ASSIGN_OR_RETURN(
      std::shared_ptr<Connection> first,
      chosen.transport->pool().ConnectFirst(MonotonicClock::now() + options.connect_timeout));
  std::unique_ptr<NodeClient> node(new NodeClient(address.ToString(), options, devices, checksums,
                                                  std::move(chosen), first->default_namespace()));
  log::Info("client {}: connected to kvport node {} over {}{} ({} connections, timeout {} ms)",
            instance_id, node->address_, node->transport(),
            credentials.tls != nullptr && !address.is_unix() ? " with TLS" : "",
            options.connections, options.timeout.count());
  return node;
}

NodeClient::NodeClient(std::string address, const InitOptions& options, DeviceStaging* devices,
                       ValueChecksums* checksums, ChosenTransport chosen,
                       std::optional<std::string> default_namespace)
    : address_(std::move(address)),
      timeout_(options.timeout),
      devices_(devices),
      checksums_(checksums),
      transport_reason_(std::move(chosen.reason)),
      transport_(std::move(chosen.transport)),
      default_namespace_(std::move(default_namespace)),
      put_calls_(std::make_shared<CallCache<PutCall>>()),
      get_calls_(std::make_shared<CallCache<GetCall>>()),
      exist_calls_(std::make_shared<CallCache<ExistCall>>()),
      del_calls_(std::make_shared<CallCache<DelCall>>()) {}

NodeClient::~NodeClient() {
  transport_->pool().CloseAll();
}

Deadline NodeClient::DeadlineFor(std::chrono::milliseconds timeout) const {
  return MonotonicClock::now() + (timeout.count() > 0 ? timeout : timeout_);
}

template <typename Request, typename Response>
Status NodeClient::RoundTrip(const Request& request, DecodingHandler<Request, Response>* handler) {
  const Deadline deadline = DeadlineFor(std::chrono::milliseconds(0));
  KVPORT_ASSIGN_OR_RETURN(std::shared_ptr<Connection> conn, transport_->pool().Acquire(deadline));
  handler->request = request;
  return RoundTripOn(*conn, handler, deadline);
}

// The calls in flight below are cached (CallCache): a finished one goes back to its NodeClient
// and the next call of its kind starts in it, so that its lists, its transport call and its
// frames keep their capacity and a warm call allocates nothing but the result it returns.

// An MSET in flight: what Start worked out, kept until Finish merges the node's answers.
class NodeClient::PutCall final : public CachedCall<BatchResult, PutCall> {
 public:
  bool Ready() override { return call->Ready(); }
  Result<BatchResult> Finish() override {
    Finished();
    const std::span<FrameResult> frames = call->Finish(deadline);
    for (const FrameResult& frame : frames) {
      for (size_t k = frame.slice.begin; k < frame.slice.end; ++k) {
        const size_t i = send[k];
        if (!frame.status.ok()) {
          outcomes.Fail(i, KeyCodeFromCallFailure(frame.status), frame.status);
        } else {
          outcomes.FromWire(i, frame.codes[k - frame.slice.begin], /*mget=*/false, frame.peer);
        }
      }
    }
    KVPORT_RETURN_IF_ERROR(WholeCallFailure(frames, rejected).WithContext("MSet"));
    BatchResult result;
    outcomes.Finish(&result);
    return result;
  }
  void Release() { wire.leases.clear(); }
  size_t kept_keys() const { return std::max(send.capacity(), wire.address.capacity()); }

  KeyOutcomes outcomes;
  Deadline deadline;
  WireBuffers wire;  // holds the staging slots of device buffers until the call is over
  std::vector<size_t> send;
  size_t rejected = 0;
  std::vector<protocol::MsetItem> items;
  std::vector<MemoryInfo> memory;  // of each item's value
  std::vector<FrameSlice> slices;
  std::unique_ptr<TransportCall> call;
};

PendingCallPtr<BatchResult> NodeClient::StartMSet(std::span<const std::string> keys,
                                                  const IOBuffers& values,
                                                  const SetOptions& options,
                                                  std::span<const std::string> metas) {
  if (keys.empty()) return Decided<BatchResult>(BatchResult());
  const Deadline deadline = DeadlineFor(options.timeout);
  Result<std::shared_ptr<Connection>> first =
      FirstConnection(transport_->pool(), deadline, "MSet", options.ns, /*any_namespace=*/false);
  if (!first.ok()) return Decided<BatchResult>(first.status());
  const protocol::Limits limits = (*first)->limits();

  std::unique_ptr<PutCall> op = put_calls_->Take();
  op->StartFrom(put_calls_);
  op->deadline = deadline;
  KeyOutcomes& outcomes = op->outcomes;
  outcomes.Restart(keys, "MSET", options.ns);
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
  devices_->MapBuffers(values, transport_->capabilities(), outcomes, &op->wire);
  const WireBuffers& wire = op->wire;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (outcomes.failed(i) || !wire.staged(i)) continue;
    Status copied =
        devices_->CopyStaged(values[i], wire.caller[i], wire.address[i], /*to_host=*/true);
    if (!copied.ok()) outcomes.Fail(i, KeyCode::kDeviceError, copied);
  }

  Unfailed(keys.size(), outcomes, &op->send, &op->rejected);
  const std::vector<size_t>& send = op->send;
  PlanFrames(
      send.size(),
      [&](size_t k) {
        const size_t i = send[k];
        return keys[i].size() + (metas.empty() ? 0 : metas[i].size()) + 32;
      },
      [&](size_t k) { return values[send[k]].size; }, limits, &op->slices);
  const uint32_t ttl = options.ttl_seconds <= 0
                           ? 0
                           : static_cast<uint32_t>(std::min<int64_t>(
                                 options.ttl_seconds, std::numeric_limits<uint32_t>::max()));

  op->items.clear();
  op->memory.clear();
  for (size_t i : send) {
    op->items.push_back(
        protocol::MsetItem{keys[i], metas.empty() ? std::string_view() : std::string_view(metas[i]),
                           values[i].size, wire.address[i]});
    op->memory.push_back(wire.memory[i]);
  }
  PutBatch batch;
  batch.ns = options.ns;
  batch.memory = op->memory;
  batch.ttl_seconds = ttl;
  batch.items = op->items;
  batch.slices = op->slices;
  batch.first = std::move(first).value();
  // The checksum of the bytes as they leave the caller (a device buffer's: of its staged copy),
  // computed by the transport where it makes a copy anyway: whatever happens to them from then
  // on, a get notices.
  batch.hash_values = checksums_->enabled_for(options.ns);
  transport_->StartPut(batch, deadline, &op->call);
  return PendingCallPtr<BatchResult>(op.release());
}

// An MGET in flight (or its meta-only form, or a loan): Finish merges the answers and copies
// staged values back to their device buffers.
class NodeClient::GetCall final : public CachedCall<GetResult, GetCall> {
 public:
  bool Ready() override { return call->Ready(); }
  Result<GetResult> Finish() override {
    Finished();
    const std::span<FrameResult> frames = call->Finish(deadline);
    if (loans != nullptr) {
      // Views per key of the call (the loan's are per sent key).
      loans->views.assign(keys.size(), nullptr);
      for (size_t k = 0; k < send.size(); ++k)
        loans->views[send[k]] = loan->views[k];
      loans->loans.push_back(std::move(loan));
    }
    GetResult result;
    result.value_sizes.assign(keys.size(), 0);
    result.metas.assign(keys.size(), std::string());
    for (FrameResult& frame : frames) {
      for (size_t k = frame.slice.begin; k < frame.slice.end; ++k) {
        const size_t i = send[k];
        if (!frame.status.ok()) {
          outcomes.Fail(i, KeyCodeFromCallFailure(frame.status), frame.status);
          continue;
        }
        const size_t j = k - frame.slice.begin;
        const StatusCode code = frame.codes[j];
        if (code == StatusCode::kOk && !meta_only) {
          // The bytes received, where they are (the caller's buffer, its staging, or a view in
          // place), checked before the caller is told they are there.
          const void* bytes = loans != nullptr ? static_cast<const void*>(loans->views[i])
                                               : static_cast<const void*>(destinations[k]);
          const uint64_t expected = j < frame.checksums.size() ? frame.checksums[j] : 0;
          Status checked = Status::Ok();
          if (j < frame.received_checksums.size()) {  // hashed as they arrived
            checked = checksums->Compare(ns, keys[i], frame.peer, expected,
                                         frame.received_checksums[j], frame.value_lengths[j]);
          } else if (bytes != nullptr) {
            checked =
                checksums->Check(ns, keys[i], frame.peer, expected, bytes, frame.value_lengths[j]);
          }
          if (!checked.ok()) {
            outcomes.Fail(i, KeyCode::kKeyNotExist, checked);
            if (loans != nullptr) loans->views[i] = nullptr;
            continue;
          }
        }
        outcomes.FromWire(i, code, /*mget=*/!meta_only, frame.peer);
        if (code == StatusCode::kOk || code == StatusCode::kTooLarge) {
          result.value_sizes[i] = frame.value_lengths[j];
          result.metas[i] = std::move(frame.metas[j]);
        }
        if (!staged_buffers.empty() && code == StatusCode::kOk && wire.staged(i)) {
          IOBuffer target = staged_buffers[i];
          target.size = frame.value_lengths[j];
          Status copied =
              devices->CopyStaged(target, wire.caller[i], wire.address[i], /*to_host=*/false);
          if (!copied.ok()) outcomes.Fail(i, KeyCode::kDeviceError, copied);
        }
      }
    }
    KVPORT_RETURN_IF_ERROR(WholeCallFailure(frames, rejected).WithContext(op));
    outcomes.Finish(&result);
    return result;
  }
  size_t kept_keys() const { return std::max(send.capacity(), wire.address.capacity()); }
  void Release() {
    wire.leases.clear();
    staged_buffers = IOBuffers();
    loans = nullptr;
    loan = nullptr;
  }

  std::span<const std::string> keys;
  const char* op = "MGet";
  KeyOutcomes outcomes;
  DeviceStaging* devices = nullptr;
  ValueChecksums* checksums = nullptr;
  std::string ns;  // the call's (what decides whether its values are checked)
  Deadline deadline;
  bool meta_only = false;
  WireBuffers wire;
  IOBuffers staged_buffers;  // the caller's buffers, kept only when some are device memory
  std::vector<size_t> send;
  size_t rejected = 0;
  std::vector<protocol::MgetKey> wire_keys;
  std::vector<char*> destinations;
  std::vector<MemoryInfo> memory;  // of each destination
  std::vector<FrameSlice> slices;
  InPlaceLoans* loans = nullptr;  // a loan: where its views and lease go at Finish
  std::unique_ptr<Loan> loan;
  std::unique_ptr<TransportCall> call;
};

// MGET, its meta-only form and the loan share everything but where the values go.
PendingCallPtr<GetResult> NodeClient::StartMGet(std::span<const std::string> keys,
                                                const GetOptions& get_options,
                                                const IOBuffers* buffers, InPlaceLoans* loans) {
  const bool meta_only = buffers == nullptr && loans == nullptr;
  const char* op = loans != nullptr ? "MGetInPlace" : meta_only ? "MGetMeta" : "MGet";
  if (loans != nullptr && !transport_->capabilities().zero_copy_reads) {
    return Decided<GetResult>(Status::NotSupported(fmt::format(
        "{}: reading values in place needs the shared-memory transport (a node on this host); "
        "this client uses {} ({})",
        op, transport_->name(), transport_reason_)));
  }
  const bool any_namespace = get_options.any_namespace;
  Status option_ok = CheckAnyNamespaceOption(op, any_namespace, get_options.ns);
  if (!option_ok.ok()) return Decided<GetResult>(option_ok);
  if (keys.empty()) return Decided<GetResult>(GetResult());
  const Deadline deadline = DeadlineFor(get_options.timeout);
  Result<std::shared_ptr<Connection>> first =
      FirstConnection(transport_->pool(), deadline, op, get_options.ns, any_namespace);
  if (!first.ok()) return Decided<GetResult>(first.status());
  const protocol::Limits limits = (*first)->limits();

  std::unique_ptr<GetCall> call = get_calls_->Take();
  call->StartFrom(get_calls_);
  call->keys = keys;
  call->op = op;
  call->devices = devices_;
  call->checksums = checksums_;
  call->ns.assign(get_options.ns);
  call->deadline = deadline;
  call->meta_only = meta_only;
  KeyOutcomes& outcomes = call->outcomes;
  outcomes.Restart(keys, "MGET", get_options.ns, any_namespace);
  CheckKeys(keys, limits, outcomes);
  if (buffers != nullptr) {
    devices_->MapBuffers(*buffers, transport_->capabilities(), outcomes, &call->wire);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (call->wire.staged(i)) {
        call->staged_buffers = *buffers;
        break;
      }
    }
  }

  Unfailed(keys.size(), outcomes, &call->send, &call->rejected);
  const std::vector<size_t>& send = call->send;
  // Reserve room for what the response may bring back, so one frame's answer is not huge.
  PlanFrames(
      send.size(), [&](size_t k) { return keys[send[k]].size() + 24; },
      [&](size_t k) { return buffers == nullptr ? 0 : (*buffers)[send[k]].size; }, limits,
      &call->slices);

  // Every connection of the pool negotiated on its own (the node may have been replaced); the
  // first one was checked above, a replaced one fails its frame with NotSupported.
  call->wire_keys.clear();
  call->destinations.clear();
  call->memory.clear();
  for (size_t i : send) {
    protocol::MgetKey key{keys[i], protocol::kUnlimitedCapacity};
    if (buffers != nullptr) key.buffer_capacity = (*buffers)[i].size;
    call->wire_keys.push_back(key);
    call->destinations.push_back(buffers == nullptr ? nullptr : call->wire.address[i]);
    call->memory.push_back(buffers == nullptr ? MemoryInfo{} : call->wire.memory[i]);
  }
  GetBatch batch;
  batch.ns = get_options.ns;
  batch.any_namespace = any_namespace;
  batch.meta_only = meta_only;
  batch.keys = call->wire_keys;
  batch.destinations = call->destinations;
  batch.memory = call->memory;
  batch.slices = call->slices;
  batch.first = std::move(first).value();
  batch.hash_values = buffers != nullptr && checksums_->enabled_for(get_options.ns);
  if (loans != nullptr) {
    call->loans = loans;
    call->loan = std::make_unique<Loan>();
  }
  transport_->StartGet(batch, deadline, call->loan.get(), &call->call);
  return PendingCallPtr<GetResult>(call.release());
}

// MEXIST and MDEL in flight.
template <typename Request, typename Response>
class NodeClient::KeyOnlyCall final
    : public CachedCall<BatchResult, KeyOnlyCall<Request, Response>> {
 public:
  using Handler = DecodingHandler<Request, Response>;

  bool Ready() override { return FramesReady(calls); }
  Result<BatchResult> Finish() override {
    this->Finished();
    WaitFrames(calls, deadline);
    for (const auto& call : calls) {
      for (size_t k = call->slice.begin; k < call->slice.end; ++k) {
        const size_t i = send[k];
        if (!call->status.ok()) {
          outcomes.Fail(i, KeyCodeFromCallFailure(call->status), call->status);
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
    ReleaseConnections(calls);
    KVPORT_RETURN_IF_ERROR(WholeCallFailure(calls, rejected).WithContext(op));
    BatchResult result;
    outcomes.Finish(&result);
    return result;
  }
  void Release() {}
  size_t kept_keys() const { return send.capacity(); }

  const char* op = "";
  KeyOutcomes outcomes;
  Deadline deadline;
  std::vector<size_t> send;
  size_t rejected = 0;
  std::vector<FrameSlice> slices;
  std::vector<std::unique_ptr<FrameCall<Handler>>> calls;
  protocol::EncodedFrame frame;
};

template <typename Request, typename Response>
PendingCallPtr<BatchResult> NodeClient::StartKeyOnly(
    std::span<const std::string> keys, std::string_view ns, bool any_namespace,
    std::chrono::milliseconds timeout, const char* op, const char* wire_op,
    const std::shared_ptr<CallCache<KeyOnlyCall<Request, Response>>>& cache) {
  Status option_ok = CheckAnyNamespaceOption(op, any_namespace, ns);
  if (!option_ok.ok()) return Decided<BatchResult>(option_ok);
  if (keys.empty()) return Decided<BatchResult>(BatchResult());
  const Deadline deadline = DeadlineFor(timeout);
  Result<std::shared_ptr<Connection>> first =
      FirstConnection(transport_->pool(), deadline, op, ns, any_namespace);
  if (!first.ok()) return Decided<BatchResult>(first.status());
  const protocol::Limits limits = (*first)->limits();

  std::unique_ptr<KeyOnlyCall<Request, Response>> pending = cache->Take();
  pending->StartFrom(cache);
  pending->op = op;
  pending->deadline = deadline;
  pending->outcomes.Restart(keys, wire_op, ns, any_namespace);
  CheckKeys(keys, limits, pending->outcomes);
  Unfailed(keys.size(), pending->outcomes, &pending->send, &pending->rejected);
  const std::vector<size_t>& send = pending->send;
  PlanFrames(
      send.size(), [&](size_t k) { return keys[send[k]].size() + 16; },
      [](size_t) { return uint64_t{0}; }, limits, &pending->slices);

  using Handler = DecodingHandler<Request, Response>;
  SendFrames<Handler>(
      pending->slices, std::move(first).value(), transport_->pool(), deadline,
      [&](FrameCall<Handler>& call, uint64_t id, const protocol::Limits& conn_limits,
          protocol::EncodedFrame* frame) {
        if (any_namespace) KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceVersion(op, *call.conn));
        Request& request = call.handler.request;
        request.ns = ns;
        request.any_namespace = any_namespace;
        request.keys.clear();
        for (size_t k = call.slice.begin; k < call.slice.end; ++k) {
          request.keys.push_back(keys[send[k]]);
        }
        call.handler.limits = conn_limits;
        return protocol::EncodeRequest(id, request, conn_limits, frame, call.conn->version());
      },
      &pending->calls, &pending->frame);
  return PendingCallPtr<BatchResult>(pending.release());
}

PendingCallPtr<BatchResult> NodeClient::StartMExist(std::span<const std::string> keys,
                                                    const ExistOptions& options) {
  return StartKeyOnly<protocol::MexistRequest, protocol::MexistResponse>(
      keys, options.ns, options.any_namespace, options.timeout, "MExist", "MEXIST", exist_calls_);
}

PendingCallPtr<BatchResult> NodeClient::StartMDel(std::span<const std::string> keys,
                                                  const DelOptions& options) {
  return StartKeyOnly<protocol::MdelRequest, protocol::MdelResponse>(
      keys, options.ns, options.any_namespace, options.timeout, "MDel", "MDEL", del_calls_);
}

Status NodeClient::Ping() {
  DecodingHandler<protocol::PingRequest, protocol::PingResponse> handler;
  return RoundTrip(protocol::PingRequest{}, &handler).WithContext("Ping");
}

Result<NodeStats> NodeClient::Stats() {
  // The most namespaces collected from one node: a node that keeps saying "more" cannot make
  // the client grow without bound.
  constexpr size_t kMaxNamespaces = size_t{1} << 22;
  NodeStats stats;
  protocol::StatsRequest request;  // the first page; then each page after the last one seen
  std::string after;
  for (bool first_page = true;; first_page = false) {
    DecodingHandler<protocol::StatsRequest, protocol::StatsResponse> handler;
    KVPORT_RETURN_IF_ERROR(RoundTrip(request, &handler).WithContext("Stats"));
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

std::vector<NodeReport> NodeClient::StatsPerNode() {
  NodeReport report;
  report.id = address_;
  report.address = address_;
  Result<NodeStats> stats = Stats();
  if (stats.ok()) {
    report.stats = std::move(stats).value();
  } else {
    report.status = stats.status();
  }
  return {std::move(report)};
}

Result<KeyPage> NodeClient::List(std::string_view ns, uint64_t cursor, uint32_t max_keys) {
  DecodingHandler<protocol::ListRequest, protocol::ListResponse> handler;
  protocol::ListRequest request;
  request.ns = ns;
  request.cursor = cursor;
  request.max_keys = max_keys;
  KVPORT_RETURN_IF_ERROR(RoundTrip(request, &handler).WithContext("List"));
  KeyPage page;
  page.next_cursor = handler.response.next_cursor;
  for (std::string_view key : handler.response.keys)
    page.keys.emplace_back(key);
  return page;
}

}  // namespace kvport::client
