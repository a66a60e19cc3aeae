// SPDX-License-Identifier: Apache-2.0
// MSET: reserve every item, read payloads straight into the arena, commit when all are in.
#include <variant>
#include <vector>

#include "server/command_table.h"

namespace kvport::server {

namespace {

// The socket's side of a WriteBatch: its destinations, in item order, as the ranges the
// session reads the payload into (a refused item's bytes are read and dropped).
class MsetReceiver final : public PayloadReceiver {
 public:
  MsetReceiver(const RequestContext& ctx, const protocol::MsetRequest& mset)
      : limits_(ctx.service.limits()),
        request_id_(ctx.header.request_id),
        version_(ctx.header.version),
        batch_(&ctx.service) {
    for (const protocol::MsetItem& item : mset.items) {
      batch_.Reserve(mset.ns, item.key, item.value_length, item.meta, mset.ttl_seconds);
      uint8_t* destination = batch_.destination(batch_.size() - 1);
      if (destination != nullptr) {
        reader_.Add(destination, item.value_length);
      } else {
        reader_.AddDiscard(item.value_length);  // refused before any payload byte was read
      }
    }
  }

  net::ScatterReader& reader() override { return reader_; }

  void OnProgress() override {}

  Result<Response> Finish() override {
    protocol::MsetResponse reply;
    reply.statuses = batch_.Commit();
    protocol::EncodedFrame frame;
    KVPORT_RETURN_IF_ERROR(protocol::EncodeResponse(request_id_, reply, limits_, &frame, version_));
    Response response;
    response.head = std::move(frame.head);
    return response;
  }

 private:
  const protocol::Limits& limits_;
  uint64_t request_id_;
  uint8_t version_;  // the request's, which the response carries
  WriteBatch batch_;
  net::ScatterReader reader_;
};

}  // namespace

Result<HandlerOutcome> HandleMset(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& mset = std::get<protocol::MsetRequest>(request);
  return HandlerOutcome{Response{}, std::make_unique<MsetReceiver>(ctx, mset)};
}

}  // namespace kvport::server
