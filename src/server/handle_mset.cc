// SPDX-License-Identifier: Apache-2.0
// MSET: reserve every item, read payloads straight into the arena, commit when all are in.
#include <algorithm>
#include <variant>
#include <vector>

#include "server/command_table.h"

namespace kvport::server {

namespace {

// The socket's side of a WriteBatch: its destinations, in item order, as the ranges the
// session reads the payload into (a refused item's bytes are read and dropped).
//
// Items are reserved as their bytes arrive, not when the header does: Prepare() reserves the
// next item once its first payload byte is in the socket (an empty item once the bytes before
// it are), WriteBatch::kReserveAhead of it (all of a smaller one); it grows the item (Grow) to
// WriteBatch::kReserveAhead past what has been read as more arrives. So a client that announces a
// large value and sends a few bytes of it, or stalls between items, makes the store evict for what
// it sent plus one step, and hold no more (a 64 MiB MSET stalled after 10 bytes holds about one
// step, not a 64 MiB node's whole arena). What the items hold reserved and not yet written counts
// against the node's max_reserved_bytes and, on a node with tokens, against the token's share of it
// (WriteBatch); the request's deadline (stream_connection.h) bounds how long any of it may wait for
// its last byte. (The alternative, reserving everything up front and letting eviction reclaim a
// stalled writer's reservations, would need the session to be told mid-read that its destination is
// gone; reserving late keeps one owner per extent.)
//
// `mset` (its keys and metas view the session's descriptor buffer) outlives the receiver.
class MsetReceiver final : public PayloadReceiver {
 public:
  MsetReceiver(const RequestContext& ctx, const protocol::MsetRequest& mset)
      : limits_(ctx.service.limits()),
        request_id_(ctx.header.request_id),
        version_(ctx.header.version),
        mset_(mset),
        batch_(&ctx.service, ctx.session.access.shared_grant(), /*stepwise=*/true,
               ctx.session.durability),
        step_(batch_.StepBytes(WriteBatch::kReserveAhead)) {
    for (const protocol::MsetItem& item : mset.items)
      total_ += item.value_length;
    remaining_ = total_;
  }

  void Prepare(uint64_t available) override {
    // Payload bytes known to be here: those read, and those the socket holds.
    const uint64_t read = added_ - reader_.remaining();
    const uint64_t known = read + available;
    MarkWritten(read);
    if (growing_) GrowCurrent(read, known);
    while (!growing_ && next_ < mset_.items.size()) {
      const protocol::MsetItem& item = mset_.items[next_];
      if (item.value_length == 0 ? added_ > known : added_ >= known) break;
      // A step of it (all of a small one), however much of it is here already.
      const uint64_t first = std::min(item.value_length, step_);
      batch_.Reserve(mset_.ns, item.key, item.value_length, item.meta, mset_.ttl_seconds, first);
      const size_t i = batch_.size() - 1;
      batch_.SetChecksum(i, item.checksum);
      if (uint8_t* destination = batch_.destination(i); destination != nullptr) {
        const uint64_t capacity = batch_.capacity(i);
        reader_.Add(destination, capacity);
        if (capacity < item.value_length) {
          growing_ = true;
          current_start_ = added_;
        }
        added_ += capacity;
      } else {
        reader_.AddDiscard(item.value_length);  // refused: its bytes are read and dropped
        added_ += item.value_length;
      }
      ++next_;
    }
  }

  net::ScatterReader& reader() override { return reader_; }

  void OnProgress() override {
    const uint64_t read = added_ - reader_.remaining();
    remaining_ = total_ - read;
    MarkWritten(read);
  }

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
  // Tells the batch how much of each item the `read` payload bytes so far have written.
  void MarkWritten(uint64_t read) {
    while (marked_ < next_) {
      const uint64_t length = mset_.items[marked_].value_length;
      if (read < marked_start_ + length) {
        batch_.MarkWritten(marked_, read - marked_start_);
        return;
      }
      batch_.MarkWritten(marked_, length);
      marked_start_ += length;
      ++marked_;
    }
  }

  // The item being received (the last reserved), when bytes of it are here beyond its room,
  // grows to a step past what is written; refused, the rest of its bytes are read and dropped
  // (and the item fails).
  void GrowCurrent(uint64_t read, uint64_t known) {
    const size_t i = next_ - 1;
    const uint64_t length = mset_.items[i].value_length;
    const uint64_t capacity = batch_.capacity(i);
    if (std::min(length, known - current_start_) <= capacity) return;
    if (batch_.Grow(i, std::min(length, read - current_start_ + step_))) {
      const uint64_t grown = batch_.capacity(i);
      reader_.ReplaceLast(batch_.destination(i), grown);
      added_ += grown - capacity;
      growing_ = grown < length;
    } else {
      reader_.AddDiscard(length - capacity);
      added_ += length - capacity;
      growing_ = false;
    }
  }

  const protocol::Limits& limits_;
  uint64_t request_id_;
  uint8_t version_;  // the request's, which the response carries
  const protocol::MsetRequest& mset_;
  WriteBatch batch_;
  const uint64_t step_;  // kReserveAhead, or less under small caps (WriteBatch::StepBytes)
  net::ScatterReader reader_;
  size_t next_ = 0;             // first item not reserved yet
  bool growing_ = false;        // item next_ - 1 is reserved in part (stepwise)
  uint64_t current_start_ = 0;  // payload offset of that item
  uint64_t added_ = 0;          // payload bytes given to the reader (reserved or discarded)
  size_t marked_ = 0;           // first item not marked wholly written
  uint64_t marked_start_ = 0;   // its payload offset
  uint64_t remaining_ = 0;      // payload bytes not read yet
  uint64_t total_ = 0;
};

}  // namespace

Result<HandlerOutcome> HandleMset(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& mset = std::get<protocol::MsetRequest>(request);
  return HandlerOutcome{Response{}, std::make_unique<MsetReceiver>(ctx, mset)};
}

}  // namespace kvport::server
