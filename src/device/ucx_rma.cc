// SPDX-License-Identifier: Apache-2.0
#include "device/ucx_rma.h"

#include <fmt/core.h>

#include <utility>
#include <vector>

#include "common/thread_annotations.h"
#include "device/ucx_api.h"

namespace kvport::ucx {

#if KVPORT_HAVE_UCX

using device_internal::UcxApi;

// The context, the worker and the mutex every call on them takes; destroyed with the last
// object made from them.
struct WorkerState {
  WorkerState(const UcxApi& api, ucp_context_h context) : api_(api), context_(context) {}
  ~WorkerState() {
    if (worker_ != nullptr) api_.worker_destroy(worker_);
    api_.cleanup(context_);
  }

  Status Start() {
    ucp_worker_params_t params{};
    params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    params.thread_mode = UCS_THREAD_MODE_SINGLE;  // every call is made under mu_
    ucs_status_t status = api_.worker_create(context_, &params, &worker_);
    if (status != UCS_OK) return Failed("ucp_worker_create", status);
    ucp_address_t* address = nullptr;
    size_t length = 0;
    status = api_.worker_get_address(worker_, &address, &length);
    if (status != UCS_OK) return Failed("ucp_worker_get_address", status);
    address_.assign(reinterpret_cast<const char*>(address), length);
    api_.worker_release_address(worker_, address);
    status = api_.worker_get_efd(worker_, &event_fd_);
    if (status != UCS_OK) return Failed("ucp_worker_get_efd", status);
    return Status::Ok();
  }

  Status Failed(std::string_view call, ucs_status_t status) const {
    return Status::Unavailable(fmt::format("{} failed: {}", call, api_.StatusText(status)));
  }

  // A nonblocking call's request (or its immediate status), and where its outcome goes.
  struct Posted {
    ucs_status_ptr_t request;
    Status* outcome;
  };

  // Waits for every posted request to complete, progressing the worker, and sets each outcome.
  // At the deadline `on_deadline` is called once (it must make the requests complete: closing
  // their endpoint by force does), and the wait goes on until they have: a request is never
  // left to write into memory after its call returned.
  template <typename OnDeadline>
  void WaitAll(std::string_view call, std::span<Posted> posted, MonotonicClock::time_point deadline,
               OnDeadline on_deadline) REQUIRES(mu_) {
    size_t open = 0;
    for (Posted& p : posted) {
      if (UCS_PTR_IS_ERR(p.request)) {
        *p.outcome = Failed(call, UCS_PTR_STATUS(p.request));
        p.request = nullptr;
      } else if (p.request == nullptr) {
        *p.outcome = Status::Ok();
      } else {
        ++open;
      }
    }
    bool expired = false;
    while (open > 0) {
      api_.worker_progress(worker_);
      for (Posted& p : posted) {
        if (p.request == nullptr) continue;
        const ucs_status_t status = api_.request_check_status(p.request);
        if (status == UCS_INPROGRESS) continue;
        api_.request_free(p.request);
        p.request = nullptr;
        --open;
        if (status == UCS_OK) {
          *p.outcome = Status::Ok();
        } else if (expired) {
          *p.outcome =
              Status::Timeout(fmt::format("{} did not complete before its deadline", call));
        } else {
          *p.outcome = Failed(call, status);
        }
      }
      if (open > 0 && !expired && MonotonicClock::now() >= deadline) {
        expired = true;
        on_deadline();
      }
    }
  }

  // WaitAll for one request.
  template <typename OnDeadline>
  Status Wait(std::string_view call, ucs_status_ptr_t request, MonotonicClock::time_point deadline,
              OnDeadline on_deadline) REQUIRES(mu_) {
    Status outcome;
    Posted posted{request, &outcome};
    WaitAll(call, std::span<Posted>(&posted, 1), deadline, on_deadline);
    return outcome;
  }

  const UcxApi api_;  // a copy: the library is never unloaded, the runtime may go first
  const ucp_context_h context_;
  Mutex mu_;
  ucp_worker_h worker_ = nullptr;  // set by Start, then constant
  std::string address_;
  int event_fd_ = -1;  // the worker's; closed by ucp_worker_destroy
};

// One endpoint; closed with the last object made from it (its peer, its remote regions), or
// by force when one of its operations runs past its deadline.
struct EndpointState {
  EndpointState(std::shared_ptr<WorkerState> worker, ucp_ep_h ep)
      : worker_(std::move(worker)), ep_(ep) {}
  ~EndpointState() {
    MutexLock lock(worker_->mu_);
    Close();
  }

  // Closes the endpoint by force: every operation on it completes (with an error), none waits
  // for a peer that may be gone. With the worker's mutex held.
  void Close() REQUIRES(worker_->mu_) {
    if (ep_ == nullptr) return;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    const ucs_status_ptr_t request = worker_->api_.ep_close_nbx(ep_, &param);
    ep_ = nullptr;
    // Nothing to do about a close that failed: the endpoint is gone either way.
    (void)worker_->Wait("ucp_ep_close_nbx", request, MonotonicClock::time_point::max(), [] {});
  }

  // Waits for operations on this endpoint; past the deadline, closes it.
  Status Wait(std::string_view call, ucs_status_ptr_t request, MonotonicClock::time_point deadline)
      REQUIRES(worker_->mu_) {
    // The analysis cannot see that WorkerState::Wait, which calls it, holds worker_->mu_.
    return worker_->Wait(call, request, deadline, [this]() NO_THREAD_SAFETY_ANALYSIS { Close(); });
  }
  void WaitAll(std::string_view call, std::span<WorkerState::Posted> posted,
               MonotonicClock::time_point deadline) REQUIRES(worker_->mu_) {
    worker_->WaitAll(call, posted, deadline, [this]() NO_THREAD_SAFETY_ANALYSIS { Close(); });
  }

  // Unavailable once the endpoint was closed (an operation ran past its deadline).
  Status CheckOpen() const REQUIRES(worker_->mu_) {
    if (ep_ != nullptr) return Status::Ok();
    return Status::Unavailable("the UCX endpoint was closed after an operation timed out");
  }

  const std::shared_ptr<WorkerState> worker_;
  ucp_ep_h ep_ GUARDED_BY(worker_->mu_);
};

Result<std::unique_ptr<Worker>> Worker::Open(const UcxRuntime& runtime,
                                             std::string_view net_devices) {
  KVPORT_RETURN_IF_ERROR(runtime.RequireUsable("a UCX worker"));
  const UcxApi& api = *device_internal::UcxApiOf(runtime);
  KVPORT_ASSIGN_OR_RETURN(ucp_context_h context, api.CreateContext(net_devices));
  auto state = std::make_shared<WorkerState>(api, context);  // owns the context from here
  KVPORT_RETURN_IF_ERROR(state->Start());
  return std::unique_ptr<Worker>(new Worker(std::move(state)));
}

Worker::~Worker() = default;

const std::string& Worker::address() const {
  return state_->address_;
}

unsigned Worker::Progress() {
  MutexLock lock(state_->mu_);
  return state_->api_.worker_progress(state_->worker_);
}

int Worker::event_fd() const {
  return state_->event_fd_;
}

bool Worker::Arm() {
  MutexLock lock(state_->mu_);
  // UCS_ERR_BUSY: events arrived since the last progress; anything else is as good as armed
  // for the caller, whose next wait then returns at its own timeout at worst.
  return state_->api_.worker_arm(state_->worker_) != UCS_ERR_BUSY;
}

Result<std::unique_ptr<LocalRegion>> Worker::Register(void* base, size_t bytes) {
  if (base == nullptr || bytes == 0) {
    return Status::InvalidArgument("UCX register: a null or empty memory range");
  }
  WorkerState& w = *state_;
  MutexLock lock(w.mu_);
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = base;
  params.length = bytes;
  ucp_mem_h memh = nullptr;
  ucs_status_t status = w.api_.mem_map(w.context_, &params, &memh);
  if (status != UCS_OK) return w.Failed(fmt::format("ucp_mem_map of {} bytes", bytes), status);
  void* packed = nullptr;
  size_t packed_size = 0;
  status = w.api_.rkey_pack(w.context_, memh, &packed, &packed_size);
  if (status != UCS_OK) {
    w.api_.mem_unmap(w.context_, memh);
    return w.Failed("ucp_rkey_pack", status);
  }
  std::string key(static_cast<const char*>(packed), packed_size);
  w.api_.rkey_buffer_release(packed);
  return std::unique_ptr<LocalRegion>(
      new LocalRegion(state_, memh, reinterpret_cast<uintptr_t>(base), bytes, std::move(key)));
}

Result<std::unique_ptr<Peer>> Worker::Connect(std::string_view remote) {
  if (remote.empty()) return Status::InvalidArgument("UCX connect: an empty worker address");
  WorkerState& w = *state_;
  MutexLock lock(w.mu_);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(remote.data());
  // A peer that dies fails this endpoint's operations instead of hanging them, and an
  // operation past its deadline can be ended by closing the endpoint by force: both need UCX's
  // peer failure handling, so an endpoint without it (UCX 1.13's shared-memory transports
  // alone cannot) is refused rather than made unbounded.
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ucp_ep_h ep = nullptr;
  ucs_status_t status = w.api_.ep_create(w.worker_, &params, &ep);
  if (status == UCS_ERR_UNREACHABLE) {
    return Status::Unavailable(
        "ucp_ep_create failed: " + w.api_.StatusText(status) +
        " (none of the UCX transports allowed here detects a peer's failure, which kvport "
        "needs to bound its calls: add tcp to UCX_TLS)");
  }
  if (status != UCS_OK) return w.Failed("ucp_ep_create", status);
  return std::unique_ptr<Peer>(new Peer(std::make_shared<EndpointState>(state_, ep)));
}

LocalRegion::LocalRegion(std::shared_ptr<WorkerState> worker, void* memh, uint64_t base,
                         size_t bytes, std::string packed_key)
    : worker_(std::move(worker)),
      memh_(memh),
      base_(base),
      bytes_(bytes),
      packed_key_(std::move(packed_key)) {}

LocalRegion::~LocalRegion() {
  MutexLock lock(worker_->mu_);
  worker_->api_.mem_unmap(worker_->context_, static_cast<ucp_mem_h>(memh_));
}

RemoteRegion::~RemoteRegion() {
  WorkerState& w = *endpoint_->worker_;
  MutexLock lock(w.mu_);
  w.api_.rkey_destroy(static_cast<ucp_rkey_h>(rkey_));
}

Peer::~Peer() = default;

Result<std::unique_ptr<RemoteRegion>> Peer::Attach(std::string_view packed_key, uint64_t base,
                                                   size_t bytes) {
  if (packed_key.empty() || bytes == 0 || base + bytes < base) {
    return Status::InvalidArgument("UCX attach: an empty key or an empty or wrapping range");
  }
  EndpointState& e = *endpoint_;
  MutexLock lock(e.worker_->mu_);
  KVPORT_RETURN_IF_ERROR(e.CheckOpen());
  ucp_rkey_h rkey = nullptr;
  ucs_status_t status = e.worker_->api_.ep_rkey_unpack(e.ep_, packed_key.data(), &rkey);
  if (status != UCS_OK) return e.worker_->Failed("ucp_ep_rkey_unpack", status);
  return std::unique_ptr<RemoteRegion>(new RemoteRegion(endpoint_, rkey, base, bytes));
}

namespace {

// The remote address of [offset, offset + bytes) of `region`, or why it is not inside it.
Result<uint64_t> RemoteAddress(const RemoteRegion& region, uint64_t offset, size_t bytes,
                               std::string_view op) {
  if (offset > region.bytes() || bytes > region.bytes() - offset) {
    return Status::InvalidArgument(
        fmt::format("UCX {} of {} bytes at offset {}: outside the peer's region of {} bytes", op,
                    bytes, offset, region.bytes()));
  }
  return region.base() + offset;
}

}  // namespace

void Peer::Move(std::span<Transfer> transfers, const RemoteRegion& region,
                MonotonicClock::time_point deadline, bool put) {
  EndpointState& e = *endpoint_;
  std::vector<WorkerState::Posted> posted;
  posted.reserve(transfers.size());
  MutexLock lock(e.worker_->mu_);
  const Status open = e.CheckOpen();
  for (Transfer& t : transfers) {
    Result<uint64_t> remote = RemoteAddress(region, t.offset, t.bytes, put ? "put" : "get");
    if (!remote.ok()) {
      t.status = remote.status();
      continue;
    }
    if (t.bytes == 0 || !open.ok()) {
      t.status = t.bytes == 0 ? Status::Ok() : open;
      continue;
    }
    ucp_request_param_t param{};
    const auto rkey = static_cast<ucp_rkey_h>(region.rkey_);
    posted.push_back({put ? e.worker_->api_.put_nbx(e.ep_, t.local, t.bytes, *remote, rkey, &param)
                          : e.worker_->api_.get_nbx(e.ep_, t.local, t.bytes, *remote, rkey, &param),
                      &t.status});
  }
  if (posted.empty()) return;
  e.WaitAll(put ? "ucp_put_nbx" : "ucp_get_nbx", posted, deadline);
  if (!put) return;
  // A put completes locally once its buffer may be reused; one flush makes them all remote.
  Status flushed = e.CheckOpen();
  if (flushed.ok()) {
    ucp_request_param_t param{};
    flushed = e.Wait("ucp_ep_flush_nbx", e.worker_->api_.ep_flush_nbx(e.ep_, &param), deadline);
  }
  if (flushed.ok()) return;
  for (const WorkerState::Posted& p : posted) {
    if (p.outcome->ok()) *p.outcome = flushed;
  }
}

void Peer::GetAll(std::span<Transfer> transfers, const RemoteRegion& region,
                  MonotonicClock::time_point deadline) {
  Move(transfers, region, deadline, /*put=*/false);
}

void Peer::PutAll(std::span<Transfer> transfers, const RemoteRegion& region,
                  MonotonicClock::time_point deadline) {
  Move(transfers, region, deadline, /*put=*/true);
}

Status Peer::Get(void* local, size_t bytes, const RemoteRegion& region, uint64_t offset,
                 MonotonicClock::time_point deadline) {
  Transfer t{local, bytes, offset, Status::Ok()};
  Move(std::span<Transfer>(&t, 1), region, deadline, /*put=*/false);
  return t.status;
}

Status Peer::Put(const void* local, size_t bytes, const RemoteRegion& region, uint64_t offset,
                 MonotonicClock::time_point deadline) {
  Transfer t{const_cast<void*>(local), bytes, offset, Status::Ok()};  // only read
  Move(std::span<Transfer>(&t, 1), region, deadline, /*put=*/true);
  return t.status;
}

#else  // !KVPORT_HAVE_UCX

struct WorkerState {};
struct EndpointState {};

Result<std::unique_ptr<Worker>> Worker::Open(const UcxRuntime& runtime, std::string_view) {
  KVPORT_RETURN_IF_ERROR(runtime.RequireUsable("a UCX worker"));
  return Status::NotSupported("this build of kvport has no UCX support");
}
Worker::~Worker() = default;
const std::string& Worker::address() const {
  static const std::string none;
  return none;
}
unsigned Worker::Progress() {
  return 0;
}
Result<std::unique_ptr<LocalRegion>> Worker::Register(void*, size_t) {
  return Status::NotSupported("this build of kvport has no UCX support");
}
Result<std::unique_ptr<Peer>> Worker::Connect(std::string_view) {
  return Status::NotSupported("this build of kvport has no UCX support");
}
LocalRegion::~LocalRegion() = default;
RemoteRegion::~RemoteRegion() {
  (void)rkey_;
}  // never made without UCX
Peer::~Peer() = default;
Result<std::unique_ptr<RemoteRegion>> Peer::Attach(std::string_view, uint64_t, size_t) {
  return Status::NotSupported("this build of kvport has no UCX support");
}
Status Peer::Get(void*, size_t, const RemoteRegion&, uint64_t, MonotonicClock::time_point) {
  return Status::NotSupported("this build of kvport has no UCX support");
}
Status Peer::Put(const void*, size_t, const RemoteRegion&, uint64_t, MonotonicClock::time_point) {
  return Status::NotSupported("this build of kvport has no UCX support");
}
void Peer::Move(std::span<Transfer> transfers, const RemoteRegion&, MonotonicClock::time_point,
                bool) {
  for (Transfer& t : transfers)
    t.status = Status::NotSupported("this build of kvport has no UCX support");
}
void Peer::GetAll(std::span<Transfer> transfers, const RemoteRegion& region,
                  MonotonicClock::time_point deadline) {
  Move(transfers, region, deadline, false);
}
void Peer::PutAll(std::span<Transfer> transfers, const RemoteRegion& region,
                  MonotonicClock::time_point deadline) {
  Move(transfers, region, deadline, true);
}

#endif

}  // namespace kvport::ucx
