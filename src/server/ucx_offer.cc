// SPDX-License-Identifier: Apache-2.0
#include "server/ucx_offer.h"

#include <sys/epoll.h>

#include <vector>

#include "kvport/log.h"

namespace kvport::server {

Result<std::unique_ptr<UcxOffer>> UcxOffer::Create(std::string_view library, uint8_t* arena,
                                                   uint64_t arena_bytes, const void* words,
                                                   uint64_t words_bytes) {
  std::unique_ptr<UcxOffer> offer(new UcxOffer);
  offer->runtime_ = OpenUcxRuntime(library);
  KVPORT_RETURN_IF_ERROR(offer->runtime_->RequireUsable("ucx (kvport serve --ucx)"));
  KVPORT_ASSIGN_OR_RETURN(offer->worker_, ucx::Worker::Open(*offer->runtime_));
  KVPORT_ASSIGN_OR_RETURN(offer->arena_, offer->worker_->Register(arena, arena_bytes));
  // Clients only read the lease words; UCX registers memory for both directions.
  KVPORT_ASSIGN_OR_RETURN(offer->words_,
                          offer->worker_->Register(const_cast<void*>(words), words_bytes));
  return offer;
}

UcxOffer::~UcxOffer() = default;

Status UcxOffer::Watch(net::EventLoop* loop) {
  OnEvents(0);  // armed before the loop first sleeps, or the fd would never wake it
  return loop->Watch(worker_->event_fd(), EPOLLIN, this);
}

void UcxOffer::OnEvents(uint32_t) {
  // Progress until nothing is left, then arm the fd; events that came in meanwhile make Arm
  // refuse, and the loop goes round again.
  do {
    while (worker_->Progress() != 0) {
    }
  } while (!worker_->Arm());
}

std::string UcxOffer::Describe() const {
  const std::vector<std::string> transports = UcxTransportNames(runtime_->info());
  std::string text = "UCX " + runtime_->info().version + " (";
  for (size_t i = 0; i < transports.size(); ++i)
    text += (i == 0 ? "" : ", ") + transports[i];
  return text + ")";
}

}  // namespace kvport::server
