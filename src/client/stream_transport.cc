// SPDX-License-Identifier: Apache-2.0
// The stream transport: values in the frames' payload sections, over TCP or a Unix socket.
#include "client/stream_transport.h"

#include <utility>

namespace kvport::client {

namespace {

class FailedTransportCall final : public TransportCall {
 public:
  explicit FailedTransportCall(std::vector<FrameResult> results) : results_(std::move(results)) {}
  bool Ready() override { return true; }
  std::vector<FrameResult> Finish(Deadline) override { return std::move(results_); }

 private:
  std::vector<FrameResult> results_;
};

}  // namespace

std::unique_ptr<TransportCall> FailedCall(std::span<const FrameSlice> slices, Status status) {
  std::vector<FrameResult> results(slices.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    results[i].slice = slices[i];
    results[i].status = status;
  }
  return std::make_unique<FailedTransportCall>(std::move(results));
}

StreamTransport::StreamTransport(std::unique_ptr<ConnectionPool> pool, std::string name)
    : pool_(std::move(pool)), name_(std::move(name)) {}

std::unique_ptr<TransportCall> StreamTransport::StartPut(const PutBatch& batch, Deadline deadline) {
  using Handler = DecodingHandler<protocol::MsetRequest, protocol::MsetResponse>;
  auto calls = SendFrames<Handler>(batch.slices, batch.first, *pool_, deadline,
                                   EncodeWith<Handler>([&](FrameCall<Handler>& call) {
                                     FillPutRequest(batch, call.slice, &call.handler.request);
                                   }));
  return MakeFramesCall(std::move(calls), [](FrameCall<Handler>& call, FrameResult* r) {
    r->codes = std::move(call.handler.response.statuses);
  });
}

std::unique_ptr<TransportCall> StreamTransport::StartGet(const GetBatch& batch, Deadline deadline,
                                                         Loan* loan) {
  if (loan != nullptr) {
    return FailedCall(batch.slices,
                      Status::NotSupported("reading values in place needs the shared-memory "
                                           "transport (a node on this host); this client uses " +
                                           name_));
  }
  auto calls = SendFrames<MgetHandler>(batch.slices, batch.first, *pool_, deadline,
                                       EncodeWith<MgetHandler>([&](FrameCall<MgetHandler>& call) {
                                         FillGetRequest(batch, call.slice, &call.handler.request);
                                         call.handler.destinations.assign(
                                             batch.destinations.begin() + call.slice.begin,
                                             batch.destinations.begin() + call.slice.end);
                                       }));
  return MakeFramesCall(std::move(calls), [](FrameCall<MgetHandler>& call, FrameResult* r) {
    const size_t n = call.handler.response.results.size();
    r->codes.reserve(n);
    r->value_lengths.reserve(n);
    r->metas.reserve(n);
    for (const protocol::MgetResult& got : call.handler.response.results) {
      r->codes.push_back(got.status);
      r->value_lengths.push_back(got.value_length);
      r->metas.emplace_back(got.meta);
    }
  });
}

}  // namespace kvport::client
