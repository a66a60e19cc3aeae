// SPDX-License-Identifier: Apache-2.0
// The stream transport: values in the frames' payload sections, over TCP or a Unix socket.
#include <utility>

#include "client/stream_transport.h"

namespace kvport::client {

Result<Transport::Loan> Transport::Lend(const GetBatch&, Deadline) {
  return Status::NotSupported(
      "reading values in place needs the shared-memory transport (a node on this host); this "
      "client uses " +
      std::string(name()));
}

StreamTransport::StreamTransport(std::unique_ptr<ConnectionPool> pool, std::string name)
    : pool_(std::move(pool)), name_(std::move(name)) {}

std::vector<FrameResult> StreamTransport::Put(const PutBatch& batch, Deadline deadline) {
  using Handler = DecodingHandler<protocol::MsetRequest, protocol::MsetResponse>;
  auto calls = RunFrames<Handler>(batch.slices, batch.first, *pool_, deadline,
                                  EncodeWith<Handler>([&](FrameCall<Handler>& call) {
                                    FillPutRequest(batch, call.slice, &call.handler.request);
                                  }));
  std::vector<FrameResult> results;
  results.reserve(calls.size());
  for (auto& call : calls) {
    FrameResult& r = results.emplace_back(StartResult(*call));
    if (r.status.ok()) r.codes = std::move(call->handler.response.statuses);
  }
  return results;
}

std::vector<FrameResult> StreamTransport::Get(const GetBatch& batch, Deadline deadline) {
  auto calls = RunFrames<MgetHandler>(batch.slices, batch.first, *pool_, deadline,
                                      EncodeWith<MgetHandler>([&](FrameCall<MgetHandler>& call) {
                                        FillGetRequest(batch, call.slice, &call.handler.request);
                                        call.handler.destinations.assign(
                                            batch.destinations.begin() + call.slice.begin,
                                            batch.destinations.begin() + call.slice.end);
                                      }));
  std::vector<FrameResult> results;
  results.reserve(calls.size());
  for (auto& call : calls) {
    FrameResult& r = results.emplace_back(StartResult(*call));
    if (!r.status.ok()) continue;
    for (const protocol::MgetResult& got : call->handler.response.results) {
      r.codes.push_back(got.status);
      r.value_lengths.push_back(got.value_length);
      r.metas.emplace_back(got.meta);
    }
  }
  return results;
}

}  // namespace kvport::client
