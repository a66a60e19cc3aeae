// SPDX-License-Identifier: Apache-2.0
// MSET: reserve every item, read payloads straight into the arena, commit when all are in.
#include <variant>
#include <vector>

#include "server/command_table.h"

namespace kvport::server {

namespace {

// The socket's side of a WriteBatch: its destinations, in item order, as the ranges the
// session reads the payload into (a refused item's bytes are read and dropped).
//
// Items are reserved as their bytes arrive, not when the header does: Prepare() reserves every
// item whose first payload byte is in the socket (an empty item once the bytes before it are),
// so a client that announces a large value and sends nothing, or stalls between items, makes
// the store evict nothing for it. (The alternative, reserving everything up front and letting
// eviction reclaim a stalled writer's reservations, would need the session to be told mid-read
// that its destination is gone; reserving late keeps one owner per extent.) The request's
// deadline (session.h) bounds how long an item's reservation may wait for its last byte.
//
// `mset` (its keys and metas view the session's descriptor buffer) outlives the receiver.
class MsetReceiver final : public PayloadReceiver {
 public:
  MsetReceiver(const RequestContext& ctx, const protocol::MsetRequest& mset)
      : limits_(ctx.service.limits()),
        request_id_(ctx.header.request_id),
        version_(ctx.header.version),
        mset_(mset),
        batch_(&ctx.service, ctx.session.access.shared_grant()) {
    for (const protocol::MsetItem& item : mset.items)
      total_ += item.value_length;
    remaining_ = total_;
  }

  void Prepare(uint64_t available) override {
    // Payload bytes known to be here: those read, and those the socket holds.
    const uint64_t known = added_ - reader_.remaining() + available;
    while (next_ < mset_.items.size()) {
      const protocol::MsetItem& item = mset_.items[next_];
      if (item.value_length == 0 ? added_ > known : added_ >= known) break;
      batch_.Reserve(mset_.ns, item.key, item.value_length, item.meta, mset_.ttl_seconds);
      uint8_t* destination = batch_.destination(batch_.size() - 1);
      if (destination != nullptr) {
        reader_.Add(destination, item.value_length);
      } else {
        reader_.AddDiscard(item.value_length);  // refused: its bytes are read and dropped
      }
      added_ += item.value_length;
      ++next_;
    }
  }

  net::ScatterReader& reader() override { return reader_; }

  void OnProgress() override { remaining_ = total_ - (added_ - reader_.remaining()); }

  uint64_t remaining() const override { return remaining_; }

  Result<Response> Finish() override {
    Prepare(0);  // empty items after the last byte
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
  const protocol::MsetRequest& mset_;
  WriteBatch batch_;
  net::ScatterReader reader_;
  size_t next_ = 0;         // first item not reserved yet
  uint64_t added_ = 0;      // payload bytes of the items reserved (or discarded) so far
  uint64_t remaining_ = 0;  // payload bytes not read yet
  uint64_t total_ = 0;
};

}  // namespace

Result<HandlerOutcome> HandleMset(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& mset = std::get<protocol::MsetRequest>(request);
  return HandlerOutcome{Response{}, std::make_unique<MsetReceiver>(ctx, mset)};
}

}  // namespace kvport::server
