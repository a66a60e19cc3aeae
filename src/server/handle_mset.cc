// MSET: reserve every item, read payloads straight into the arena, commit when all are in.
#include <variant>
#include <vector>

#include "kvport/log.h"
#include "server/command_table.h"

namespace kvport::server {

namespace {

class MsetReceiver final : public PayloadReceiver {
 public:
  MsetReceiver(const RequestContext& ctx, size_t items)
      : store_(ctx.server.store),
        limits_(ctx.server.limits),
        counters_(ctx.server.counters),
        request_id_(ctx.header.request_id),
        version_(ctx.header.version) {
    handles_.reserve(items);
    statuses_.reserve(items);
  }

  ~MsetReceiver() override {
    if (!finished_ && !handles_.empty()) counters_->CountAbortedMset();
    // handles_ die here: every reservation not committed is aborted by its WriteHandle.
  }

  void Add(Result<store::WriteHandle> reserved, uint64_t value_length) {
    if (reserved.ok()) {
      reader_.Add(reserved->data(), value_length);
      statuses_.push_back(StatusCode::kOk);
      handles_.push_back(std::move(reserved).value());
    } else {
      // Refused before any payload byte was read; its bytes still arrive and are dropped.
      reader_.AddDiscard(value_length);
      statuses_.push_back(reserved.status().code());
      handles_.emplace_back();
    }
  }

  net::ScatterReader& reader() override { return reader_; }

  void OnProgress() override {}

  Result<Response> Finish() override {
    finished_ = true;
    // Item order, so that a key written twice in one batch ends with its last value.
    for (size_t i = 0; i < handles_.size(); ++i) {
      if (!handles_[i].valid()) continue;
      Status committed = store_->Commit(std::move(handles_[i]));
      if (!committed.ok()) {
        log::Error("MSET commit of item {} failed: {}", i, committed.ToString());
        statuses_[i] = committed.code();
      }
    }
    protocol::MsetResponse reply;
    reply.statuses = std::move(statuses_);
    protocol::EncodedFrame frame;
    KVPORT_RETURN_IF_ERROR(protocol::EncodeResponse(request_id_, reply, limits_, &frame, version_));
    Response response;
    response.head = std::move(frame.head);
    return response;
  }

 private:
  store::ObjectStore* store_;
  const protocol::Limits& limits_;
  ServerCounters* counters_;
  uint64_t request_id_;
  uint8_t version_;  // the request's, which the response carries
  net::ScatterReader reader_;
  std::vector<store::WriteHandle> handles_;  // invalid where the item was refused
  std::vector<StatusCode> statuses_;
  bool finished_ = false;
};

}  // namespace

Result<HandlerOutcome> HandleMset(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& mset = std::get<protocol::MsetRequest>(request);
  auto receiver = std::make_unique<MsetReceiver>(ctx, mset.items.size());
  for (const protocol::MsetItem& item : mset.items) {
    receiver->Add(ctx.server.store->Reserve(mset.ns, item.key, item.value_length, item.meta,
                                            mset.ttl_seconds),
                  item.value_length);
  }
  return HandlerOutcome{Response{}, std::move(receiver)};
}

}  // namespace kvport::server
