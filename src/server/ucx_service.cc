// SPDX-License-Identifier: Apache-2.0
#include "server/ucx_service.h"

#include <sys/epoll.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "kvport/log.h"
#include "net/interfaces.h"
#include "protocol/messages.h"

namespace kvport::server {

namespace {

using protocol::UcxMessage;
using ucx::Worker;

// UCX_NET_DEVICES for a node listening on `host`: the interfaces that hold the address (UCX's tcp
// transport listens on each device it is allowed), and every RDMA device (verbs devices take no
// TCP connections: their peers arrive through the listener). Empty: every device.
Result<std::string> DevicesFor(const UcxInfo& info, std::string_view host,
                               std::string* numeric_host) {
  KVPORT_ASSIGN_OR_RETURN(net::AddressInterfaces found, net::InterfacesOf(host));
  *numeric_host = found.numeric_host;
  if (found.wildcard) return std::string();
  std::vector<std::string> devices = found.names;
  if (UcxHasRdma(info)) {
    for (const UcxResource& r : info.resources) {
      UcxInfo one;
      one.resources = {r};
      if (UcxHasRdma(one) && std::find(devices.begin(), devices.end(), r.device) == devices.end())
        devices.push_back(r.device);
    }
  }
  std::string joined;
  for (const std::string& d : devices)
    joined += (joined.empty() ? "" : ",") + d;
  return joined;
}

std::string RandomKey() {
  std::random_device random;  // the kernel's randomness (getrandom)
  std::string key(protocol::kUcxSessionKeyBytes, '\0');
  for (size_t i = 0; i < key.size(); i += 4) {
    const uint32_t word = random();
    for (size_t b = 0; b < 4 && i + b < key.size(); ++b)
      key[i + b] = static_cast<char>(word >> (8 * b));
  }
  return key;
}

}  // namespace

Result<std::unique_ptr<UcxService>> UcxService::Create(std::string_view library,
                                                       std::string_view listen_host,
                                                       size_t max_endpoints) {
  std::unique_ptr<UcxService> service(new UcxService);
  service->runtime_ = OpenUcxRuntime(library);
  KVPORT_RETURN_IF_ERROR(service->runtime_->RequireUsable("ucx (kvport serve --ucx)"));
  KVPORT_ASSIGN_OR_RETURN(service->interfaces_,
                          DevicesFor(service->runtime_->info(), listen_host, &service->host_));
  KVPORT_ASSIGN_OR_RETURN(service->worker_, Worker::Open(*service->runtime_, service->interfaces_));
  Worker& worker = *service->worker_;
  Worker::Guard held(worker);
  UcxService* raw = service.get();
  KVPORT_RETURN_IF_ERROR(
      worker.SetHandler(held, static_cast<unsigned>(UcxMessage::kPut),
                        [raw](Worker::Guard& h, const Worker::Message& m) { raw->OnPut(h, m); }));
  KVPORT_RETURN_IF_ERROR(
      worker.SetHandler(held, static_cast<unsigned>(UcxMessage::kGet),
                        [raw](Worker::Guard& h, const Worker::Message& m) { raw->OnGet(h, m); }));
  KVPORT_ASSIGN_OR_RETURN(service->port_, worker.Listen(held, service->host_, 0, max_endpoints));
  return service;
}

UcxService::~UcxService() = default;

Status UcxService::Watch(net::EventLoop* loop) {
  OnEvents(0);  // armed before the loop first sleeps, or the fd would never wake it
  return loop->Watch(worker_->event_fd(), EPOLLIN, this);
}

void UcxService::OnEvents(uint32_t) {
  // Progress until nothing is left, then arm the fd; events that came in meanwhile make Arm
  // refuse, and the loop goes round again.
  Worker::Guard held(*worker_);
  do {
    while (worker_->Progress(held) != 0) {
    }
  } while (!worker_->Arm(held));
}

std::string UcxService::Open(std::shared_ptr<ArenaWindow> window) {
  MutexLock lock(mu_);
  std::string key;
  do {
    key = RandomKey();
  } while (windows_.count(key) != 0);
  windows_.emplace(key, std::move(window));
  return key;
}

void UcxService::Close(const std::string& key) {
  std::shared_ptr<ArenaWindow> window;
  {
    MutexLock lock(mu_);
    auto it = windows_.find(key);
    if (it == windows_.end()) return;
    window = std::move(it->second);
    windows_.erase(it);
  }
  const std::vector<uint64_t> endpoints = window->Shut();
  if (endpoints.empty()) return;
  Worker::Guard held(*worker_);  // taken with no other lock held (handlers take ours inside it)
  for (uint64_t endpoint : endpoints)
    worker_->Close(held, endpoint);
}

size_t UcxService::sessions() const {
  MutexLock lock(mu_);
  return windows_.size();
}

std::shared_ptr<ArenaWindow> UcxService::Find(std::string_view key) const {
  MutexLock lock(mu_);
  auto it = windows_.find(std::string(key));
  return it == windows_.end() ? nullptr : it->second;
}

Result<std::shared_ptr<ArenaWindow>> UcxService::Admit(std::string_view key,
                                                       ucx::EndpointId from) const {
  std::shared_ptr<ArenaWindow> window = Find(key);
  if (window == nullptr) return Status::NotFound("no live session has this UCX session key");
  KVPORT_RETURN_IF_ERROR(window->Admit(from));
  return window;
}

void UcxService::Answer(Worker::Guard& held, ucx::EndpointId to, UcxMessage kind, uint64_t token,
                        const Status& outcome) {
  worker_->Send(held, to, static_cast<unsigned>(kind),
                protocol::EncodeUcxDone({token, outcome.code()}), nullptr, 0, nullptr);
}

void UcxService::OnPut(Worker::Guard& held, const Worker::Message& message) {
  protocol::UcxPut put;
  if (message.from == 0 || !protocol::DecodeUcxPut(message.header, &put).ok()) {
    return;  // nobody to answer, or no token to answer with: dropped
  }
  Result<std::shared_ptr<ArenaWindow>> window = Admit(put.session_key, message.from);
  if (!window.ok()) {
    Answer(held, message.from, UcxMessage::kPutDone, put.token, window.status());
    return;
  }
  if (message.data != nullptr || message.bytes == 0) {
    Answer(held, message.from, UcxMessage::kPutDone, put.token,
           (*window)->Write(put.offset, message.data, message.bytes));
    return;
  }
  uint64_t reservation = 0;
  Result<uint8_t*> to = (*window)->BeginWrite(put.offset, message.bytes, &reservation);
  if (!to.ok()) {
    Answer(held, message.from, UcxMessage::kPutDone, put.token, to.status());
    return;
  }
  worker_->Receive(held, message, *to,
                   [this, window = *window, reservation, from = message.from, token = put.token](
                       Worker::Guard& h, Status outcome) {
                     window->EndWrite(reservation);
                     Answer(h, from, UcxMessage::kPutDone, token, outcome);
                   });
}

void UcxService::OnGet(Worker::Guard& held, const Worker::Message& message) {
  protocol::UcxGet get;
  if (message.from == 0 || !protocol::DecodeUcxGet(message.header, &get).ok()) return;
  Result<std::shared_ptr<ArenaWindow>> window = Admit(get.session_key, message.from);
  if (!window.ok()) {
    Answer(held, message.from, UcxMessage::kGetDone, get.token, window.status());
    return;
  }
  if (get.bytes == 0) {  // a read of nothing: the client's check that its key is live
    Answer(held, message.from, UcxMessage::kGetDone, get.token, Status::Ok());
    return;
  }
  const uint8_t* at = nullptr;
  Result<store::ReadHandle> pin = (*window)->BeginRead(get.offset, get.bytes, &at);
  if (!pin.ok()) {
    Answer(held, message.from, UcxMessage::kGetDone, get.token, pin.status());
    return;
  }
  // The pin keeps the bytes until UCX no longer reads them.
  worker_->Send(held, message.from, static_cast<unsigned>(UcxMessage::kGetDone),
                protocol::EncodeUcxDone({get.token, StatusCode::kOk}), at, get.bytes,
                [pin = std::move(pin).value()](Worker::Guard&, Status) mutable { pin.Reset(); });
}

std::string UcxService::Describe() const {
  const std::vector<std::string> transports = UcxTransportNames(runtime_->info());
  std::string text = "UCX " + runtime_->info().version + " (";
  for (size_t i = 0; i < transports.size(); ++i)
    text += (i == 0 ? "" : ", ") + transports[i];
  text += ") on " + host_ + ":" + std::to_string(port_) + " (" +
          (interfaces_.empty() ? std::string("every interface") : "devices " + interfaces_) + ")";
  if (!has_rdma()) text += ", software transports only: node-checked copies, no faster than TCP";
  return text;
}

bool UcxService::has_rdma() const {
  return UcxHasRdma(runtime_->info());
}

}  // namespace kvport::server
