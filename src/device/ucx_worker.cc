// SPDX-License-Identifier: Apache-2.0
#include "device/ucx_worker.h"

#include <fmt/core.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/thread_annotations.h"
#include "device/ucx_api.h"
#include "kvport/log.h"

namespace kvport::ucx {

#if KVPORT_HAVE_UCX

using device_internal::UcxApi;

namespace {

// A numeric host and port as a socket address; InvalidArgument otherwise.
Status NumericAddress(const std::string& host, uint16_t port, sockaddr_storage* out,
                      socklen_t* length) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    return Status::InvalidArgument(
        fmt::format("UCX: '{}' is not a numeric IP address: {}", host, gai_strerror(rc)));
  }
  std::memcpy(out, found->ai_addr, found->ai_addrlen);
  *length = found->ai_addrlen;
  freeaddrinfo(found);
  return Status::Ok();
}

}  // namespace

// Everything of one worker. Every member but the constants is touched only with the worker
// held (a Worker::Guard): the analysis cannot follow a Guard into handlers, so the rule is
// stated here rather than annotated.
struct WorkerState {
  WorkerState(const UcxApi& api, ucp_context_h context) : api_(api), context_(context) {}
  ~WorkerState() {
    if (worker_ != nullptr) api_.worker_destroy(worker_);
    api_.cleanup(context_);
  }

  Status Start() {
    ucp_worker_params_t params{};
    params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    params.thread_mode = UCS_THREAD_MODE_SINGLE;  // every call is made with the worker held
    ucs_status_t status = api_.worker_create(context_, &params, &worker_);
    if (status != UCS_OK) return Failed("ucp_worker_create", status);
    status = api_.worker_get_efd(worker_, &event_fd_);
    if (status != UCS_OK) return Failed("ucp_worker_get_efd", status);
    return Status::Ok();
  }

  Status Failed(std::string_view call, ucs_status_t status) const {
    return Status::Unavailable(fmt::format("{} failed: {}", call, api_.StatusText(status)));
  }

  // One operation in flight: its completion callback, and a copy of a message's header (UCX
  // may read it until the send completes).
  struct Operation {
    WorkerState* state;
    std::string call;
    Worker::Done done;
    std::string header;
  };

  // The outcome of a call that started `op`: done now (completed or failed at once), or later
  // from Progress through its callback.
  void Started(ucs_status_ptr_t request, Operation* op) {
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) {
      ++in_flight_;
      return;
    }
    const Status outcome =
        request == nullptr ? Status::Ok() : Failed(op->call, UCS_PTR_STATUS(request));
    Finish(op, outcome);
  }

  void Finish(Operation* op, const Status& outcome) {
    Worker::Done done = std::move(op->done);
    delete op;
    if (done) {
      Worker::Guard held(this);
      done(held, outcome);
    }
  }

  // UCX's completion callbacks (send, close, receive); `request` is freed here.
  static void OnSent(void* request, ucs_status_t status, void* user_data) {
    auto* op = static_cast<Operation*>(user_data);
    op->state->Completed(op, request, status);
  }
  static void OnReceived(void* request, ucs_status_t status, size_t, void* user_data) {
    OnSent(request, status, user_data);
  }
  void Completed(Operation* op, void* request, ucs_status_t status) {
    --in_flight_;
    api_.request_free(request);
    Finish(op, status == UCS_OK ? Status::Ok() : Failed(op->call, status));
  }

  ucp_request_param_t ParamFor(Operation* op) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &WorkerState::OnSent;
    param.user_data = op;
    return param;
  }

  // --- endpoints ------------------------------------------------------------------------------
  struct EndpointRecord {
    ucp_ep_h ep;
    bool accepted;  // made from a listener's connection request
  };

  EndpointId Adopt(ucp_ep_h ep, bool accepted) {
    const EndpointId id = next_endpoint_++;
    endpoints_.emplace(id, EndpointRecord{ep, accepted});
    ids_.emplace(ep, id);
    if (accepted) ++accepted_open_;
    return id;
  }

  void Close(EndpointId id) {
    auto it = endpoints_.find(id);
    if (it == endpoints_.end()) return;
    const EndpointRecord record = it->second;
    endpoints_.erase(it);
    ids_.erase(record.ep);
    if (record.accepted) --accepted_open_;
    auto* op = new Operation{this, "ucp_ep_close_nbx", nullptr, {}};
    ucp_request_param_t param = ParamFor(op);
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    Started(api_.ep_close_nbx(record.ep, &param), op);
  }

  EndpointId IdOf(ucp_ep_h ep) const {
    auto it = ids_.find(ep);
    return it == ids_.end() ? 0 : it->second;
  }

  // A peer failed (UCX's error handling): the endpoint is closed, as UCX requires.
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* state = static_cast<WorkerState*>(arg);
    const EndpointId id = state->IdOf(ep);
    log::Debug("UCX endpoint {} failed: {}", id, state->api_.StatusText(status));
    state->Close(id);
  }

  ucp_err_handler_t ErrorHandler() {
    return ucp_err_handler_t{&WorkerState::OnEndpointError, this};
  }

  static void OnConnectRequest(ucp_conn_request_h request, void* arg) {
    static_cast<WorkerState*>(arg)->Accept(request);
  }
  void Accept(ucp_conn_request_h request) {
    if (accepted_open_ >= max_accepted_) {
      log::Warn("UCX: a peer's connection refused: {} endpoints are open already", accepted_open_);
      api_.listener_reject(listener_, request);
      return;
    }
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.conn_request = request;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler = ErrorHandler();
    ucp_ep_h ep = nullptr;
    const ucs_status_t status = api_.ep_create(worker_, &params, &ep);
    if (status != UCS_OK) {
      log::Warn("UCX: accepting a peer failed: {}", api_.StatusText(status));
      return;
    }
    Adopt(ep, /*accepted=*/true);
  }

  // --- messages --------------------------------------------------------------------------------
  struct HandlerSlot {
    WorkerState* state;
    unsigned id;
    Worker::Handler handler;
  };

  static ucs_status_t OnMessage(void* arg, const void* header, size_t header_length, void* data,
                                size_t length, const ucp_am_recv_param_t* param) {
    auto* slot = static_cast<HandlerSlot*>(arg);
    Worker::Message message;
    message.id = slot->id;
    message.header = std::string_view(static_cast<const char*>(header), header_length);
    message.bytes = length;
    const bool at_sender = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    message.data = at_sender ? nullptr : data;
    message.descriptor = at_sender ? data : nullptr;
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0)
      message.from = slot->state->IdOf(param->reply_ep);
    Worker::Guard held(slot->state);
    slot->handler(held, message);
    // Data not received by the handler is dropped: UCX releases it (and tells a rendezvous
    // sender its send is complete).
    return UCS_OK;
  }

  const UcxApi api_;  // a copy: the library is never unloaded, the runtime may go first
  const ucp_context_h context_;
  Mutex mu_;
  ucp_worker_h worker_ = nullptr;  // set by Start, then constant
  int event_fd_ = -1;              // the worker's; closed by ucp_worker_destroy
  ucp_listener_h listener_ = nullptr;
  size_t max_accepted_ = 0;
  size_t accepted_open_ = 0;
  EndpointId next_endpoint_ = 1;
  std::unordered_map<EndpointId, EndpointRecord> endpoints_;
  std::unordered_map<ucp_ep_h, EndpointId> ids_;
  std::map<unsigned, std::unique_ptr<HandlerSlot>> handlers_;
  size_t in_flight_ = 0;
};

Worker::Guard::Guard(Worker& worker) NO_THREAD_SAFETY_ANALYSIS : state_(worker.state_.get()),
                                                                 owns_(true) {
  state_->mu_.Lock();
}

Worker::Guard::~Guard() NO_THREAD_SAFETY_ANALYSIS {
  if (owns_) state_->mu_.Unlock();
}

Result<std::unique_ptr<Worker>> Worker::Open(const UcxRuntime& runtime,
                                             std::string_view net_devices) {
  KVPORT_RETURN_IF_ERROR(runtime.RequireUsable("a UCX worker"));
  const UcxApi& api = *device_internal::UcxApiOf(runtime);
  KVPORT_ASSIGN_OR_RETURN(ucp_context_h context, api.CreateContext(net_devices));
  auto state = std::make_shared<WorkerState>(api, context);  // owns the context from here
  KVPORT_RETURN_IF_ERROR(state->Start());
  return std::unique_ptr<Worker>(new Worker(std::move(state)));
}

Worker::~Worker() {
  Guard held(*this);
  WorkerState& w = *state_;
  if (w.listener_ != nullptr) {
    w.api_.listener_destroy(w.listener_);
    w.listener_ = nullptr;
  }
  std::vector<EndpointId> open;
  for (const auto& [id, record] : w.endpoints_)
    open.push_back(id);
  for (EndpointId id : open)
    w.Close(id);
  // Every operation completes once its endpoint is closed by force; their callbacks hold
  // references the owner is about to free, so they must have run before this returns.
  const auto deadline = MonotonicClock::now() + std::chrono::seconds(30);
  if (!ProgressUntil(
          held, [&w] { return w.in_flight_ == 0; }, deadline)) {
    log::Warn("UCX: {} operations still in flight when the worker closed", w.in_flight_);
  }
}

Result<uint16_t> Worker::Listen(Guard&, const std::string& host, uint16_t port,
                                size_t max_endpoints) {
  WorkerState& w = *state_;
  if (w.listener_ != nullptr) return Status::InvalidArgument("UCX: this worker listens already");
  sockaddr_storage address{};
  socklen_t length = 0;
  KVPORT_RETURN_IF_ERROR(NumericAddress(host, port, &address, &length));
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&address);
  params.sockaddr.addrlen = length;
  params.conn_handler.cb = &WorkerState::OnConnectRequest;
  params.conn_handler.arg = &w;
  w.max_accepted_ = max_endpoints;
  ucs_status_t status = w.api_.listener_create(w.worker_, &params, &w.listener_);
  if (status != UCS_OK) {
    w.listener_ = nullptr;
    return w.Failed(fmt::format("ucp_listener_create on {}:{}", host, port), status);
  }
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  status = w.api_.listener_query(w.listener_, &attr);
  if (status != UCS_OK) return w.Failed("ucp_listener_query", status);
  const auto* bound = reinterpret_cast<const sockaddr*>(&attr.sockaddr);
  if (bound->sa_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(bound)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(bound)->sin6_port);
}

Result<EndpointId> Worker::Connect(Guard&, const std::string& host, uint16_t port) {
  WorkerState& w = *state_;
  sockaddr_storage address{};
  socklen_t length = 0;
  KVPORT_RETURN_IF_ERROR(NumericAddress(host, port, &address, &length));
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&address);
  params.sockaddr.addrlen = length;
  // A peer that dies fails this endpoint's operations instead of hanging them, and a call past
  // its deadline can be ended by closing the endpoint by force: both need UCX's peer failure
  // handling.
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler = w.ErrorHandler();
  ucp_ep_h ep = nullptr;
  const ucs_status_t status = w.api_.ep_create(w.worker_, &params, &ep);
  if (status != UCS_OK) return w.Failed(fmt::format("ucp_ep_create to {}:{}", host, port), status);
  return w.Adopt(ep, /*accepted=*/false);
}

void Worker::Close(Guard&, EndpointId endpoint) {
  state_->Close(endpoint);
}

bool Worker::IsOpen(Guard&, EndpointId endpoint) const {
  return state_->endpoints_.count(endpoint) != 0;
}

size_t Worker::open_endpoints(Guard&) const {
  return state_->endpoints_.size();
}

Status Worker::SetHandler(Guard&, unsigned id, Handler handler) {
  WorkerState& w = *state_;
  auto slot = std::make_unique<WorkerState::HandlerSlot>(
      WorkerState::HandlerSlot{&w, id, std::move(handler)});
  ucp_am_handler_param_t params{};
  params.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  params.id = id;
  params.flags = UCP_AM_FLAG_WHOLE_MSG;
  params.cb = &WorkerState::OnMessage;
  params.arg = slot.get();
  const ucs_status_t status = w.api_.worker_set_am_recv_handler(w.worker_, &params);
  if (status != UCS_OK) return w.Failed("ucp_worker_set_am_recv_handler", status);
  w.handlers_[id] = std::move(slot);  // replaces (and frees) an earlier one for this id
  return Status::Ok();
}

void Worker::Send(Guard& held, EndpointId to, unsigned id, std::string_view header,
                  const void* data, size_t bytes, Done done) {
  WorkerState& w = *state_;
  auto it = w.endpoints_.find(to);
  if (it == w.endpoints_.end()) {
    if (done) done(held, Status::Unavailable("the UCX endpoint is closed"));
    return;
  }
  auto* op =
      new WorkerState::Operation{&w, "ucp_am_send_nbx", std::move(done), std::string(header)};
  ucp_request_param_t param = w.ParamFor(op);
  param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_REPLY;  // the receiver learns which endpoint it came through
  // UCX 1.13 would send even megabytes eagerly, reassembled by the receiver's UCX before its
  // handler sees them; past kEagerBytes the data waits at the sender for the handler's Receive.
  if (bytes > kEagerBytes) param.flags |= UCP_AM_SEND_FLAG_RNDV;
  w.Started(w.api_.am_send_nbx(it->second.ep, id, op->header.data(), op->header.size(), data, bytes,
                               &param),
            op);
}

void Worker::Receive(Guard& held, const Message& message, void* to, Done done) {
  WorkerState& w = *state_;
  if (message.descriptor == nullptr) {
    if (done) done(held, Status::InvalidArgument("UCX: the message's data is not at its sender"));
    return;
  }
  auto* op = new WorkerState::Operation{&w, "ucp_am_recv_data_nbx", std::move(done), {}};
  ucp_request_param_t param = w.ParamFor(op);
  param.cb.recv_am = &WorkerState::OnReceived;
  w.Started(w.api_.am_recv_data_nbx(w.worker_, message.descriptor, to, message.bytes, &param), op);
}

unsigned Worker::Progress(Guard&) {
  return state_->api_.worker_progress(state_->worker_);
}

bool Worker::ProgressUntil(Guard& held, const std::function<bool()>& finished,
                           MonotonicClock::time_point deadline) {
  while (!finished()) {
    if (MonotonicClock::now() >= deadline) return false;
    Progress(held);
  }
  return true;
}

size_t Worker::operations_in_flight(Guard&) const {
  return state_->in_flight_;
}

int Worker::event_fd() const {
  return state_->event_fd_;
}

bool Worker::Arm(Guard&) {
  // UCS_ERR_BUSY: events arrived since the last progress; anything else is as good as armed
  // for the caller, whose next wait then returns at its own timeout at worst.
  return state_->api_.worker_arm(state_->worker_) != UCS_ERR_BUSY;
}

#else  // !KVPORT_HAVE_UCX

struct WorkerState {};

namespace {
Status NoUcx() {
  return Status::NotSupported("this build of kvport has no UCX support");
}
}  // namespace

Worker::Guard::Guard(Worker& worker) : state_(worker.state_.get()), owns_(false) {}
Worker::Guard::~Guard() = default;
Result<std::unique_ptr<Worker>> Worker::Open(const UcxRuntime& runtime, std::string_view) {
  KVPORT_RETURN_IF_ERROR(runtime.RequireUsable("a UCX worker"));
  return NoUcx();
}
Worker::~Worker() = default;
Result<uint16_t> Worker::Listen(Guard&, const std::string&, uint16_t, size_t) {
  return NoUcx();
}
Result<EndpointId> Worker::Connect(Guard&, const std::string&, uint16_t) {
  return NoUcx();
}
void Worker::Close(Guard&, EndpointId) {}
bool Worker::IsOpen(Guard&, EndpointId) const {
  return false;
}
size_t Worker::open_endpoints(Guard&) const {
  return 0;
}
Status Worker::SetHandler(Guard&, unsigned, Handler) {
  return NoUcx();
}
void Worker::Send(Guard& held, EndpointId, unsigned, std::string_view, const void*, size_t,
                  Done done) {
  if (done) done(held, NoUcx());
}
void Worker::Receive(Guard& held, const Message&, void*, Done done) {
  if (done) done(held, NoUcx());
}
unsigned Worker::Progress(Guard&) {
  return 0;
}
bool Worker::ProgressUntil(Guard&, const std::function<bool()>& finished,
                           MonotonicClock::time_point) {
  return finished();
}
size_t Worker::operations_in_flight(Guard&) const {
  return 0;
}
int Worker::event_fd() const {
  return -1;
}
bool Worker::Arm(Guard&) {
  return true;
}

#endif

}  // namespace kvport::ucx
