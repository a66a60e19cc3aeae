// SPDX-License-Identifier: Apache-2.0
// The stream transport: values in the frames' payload sections, over TCP or a Unix socket.
#include "client/stream_transport.h"

#include <utility>

#include "common/xxh3.h"

namespace kvport::client {

namespace {

class FailedTransportCall final : public TransportCall {
 public:
  explicit FailedTransportCall(std::vector<FrameResult> results) : results_(std::move(results)) {}
  bool Ready() override { return true; }
  std::span<FrameResult> Finish(Deadline) override { return results_; }

 private:
  std::vector<FrameResult> results_;
};

// What an answered frame brings back, per transport call kind.
struct CollectPut {
  void operator()(FrameCall<DecodingHandler<protocol::MsetRequest, protocol::MsetResponse>>& call,
                  FrameResult* r) const {
    r->codes.assign(call.handler.response.statuses.begin(), call.handler.response.statuses.end());
  }
};
struct CollectGet {
  void operator()(FrameCall<MgetHandler>& call, FrameResult* r) const {
    for (const protocol::MgetResult& got : call.handler.response.results) {
      r->codes.push_back(got.status);
      r->value_lengths.push_back(got.value_length);
      r->metas.emplace_back(got.meta);
      r->checksums.push_back(got.checksum);
    }
    if (call.handler.hash_values) {
      for (size_t i = 0; i < call.handler.response.results.size(); ++i)
        r->received_checksums.push_back(call.handler.ReceivedChecksum(i));
    }
  }
};
using PutFrames =
    FramesCall<DecodingHandler<protocol::MsetRequest, protocol::MsetResponse>, CollectPut>;
using GetFrames = FramesCall<MgetHandler, CollectGet>;

}  // namespace

void FailedCall(std::span<const FrameSlice> slices, Status status,
                std::unique_ptr<TransportCall>* call) {
  std::vector<FrameResult> results(slices.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    results[i].slice = slices[i];
    results[i].status = status;
  }
  *call = std::make_unique<FailedTransportCall>(std::move(results));
}

StreamTransport::StreamTransport(std::unique_ptr<ConnectionPool> pool, std::string name)
    : pool_(std::move(pool)), name_(std::move(name)) {}

void StreamTransport::StartPut(const PutBatch& batch, Deadline deadline,
                               std::unique_ptr<TransportCall>* call) {
  using Handler = DecodingHandler<protocol::MsetRequest, protocol::MsetResponse>;
  PutFrames* frames = ReusableCall<PutFrames>(call);
  SendFrames<Handler>(batch.slices, batch.first, *pool_, deadline,
                      EncodeWith<Handler>([&](FrameCall<Handler>& frame_call) {
                        FillPutRequest(batch, frame_call.slice, &frame_call.handler.request);
                        // The descriptor, sent before the values, carries their checksums: a
                        // pass over each value before it goes (no copy here to fuse it with).
                        if (batch.hash_values) {
                          for (protocol::MsetItem& item : frame_call.handler.request.items) {
                            if (item.value_length > 0) {
                              item.checksum = Xxh3(item.value, item.value_length);
                            }
                          }
                        }
                      }),
                      frames->calls(), frames->frame());
}

void StreamTransport::StartGet(const GetBatch& batch, Deadline deadline, Loan* loan,
                               std::unique_ptr<TransportCall>* call) {
  if (loan != nullptr) {
    FailedCall(batch.slices,
               Status::NotSupported("reading values in place needs the shared-memory "
                                    "transport (a node on this host); this client uses " +
                                    name_),
               call);
    return;
  }
  GetFrames* frames = ReusableCall<GetFrames>(call);
  SendFrames<MgetHandler>(batch.slices, batch.first, *pool_, deadline,
                          EncodeWith<MgetHandler>([&](FrameCall<MgetHandler>& frame_call) {
                            FillGetRequest(batch, frame_call.slice, &frame_call.handler.request);
                            frame_call.handler.destinations.assign(
                                batch.destinations.begin() + frame_call.slice.begin,
                                batch.destinations.begin() + frame_call.slice.end);
                            frame_call.handler.hash_values = batch.hash_values;
                          }),
                          frames->calls(), frames->frame());
}

}  // namespace kvport::client
