// SPDX-License-Identifier: Apache-2.0
// MGET: pin every hit and send its bytes straight from the arena. An any-namespace MGET pins the
// first match of each key (the default namespace first, then the others by name). Keys only the
// disk tier held were brought into memory, in one batch and off the I/O thread, before the
// request was served (KvportProtocol::WaitForDisk).
//
// An answer never carries more value bytes than the node's arena holds: the objects pinned at
// once fit in it, so only a key repeated within one request can go past it (a 45 KB MGET naming
// one 1 MiB key 4096 times asks for 4 GiB). Such a request is refused whole (TooLarge), the
// connection going on.
#include <fmt/core.h>

#include <memory>
#include <variant>
#include <vector>

#include "server/command_table.h"

namespace kvport::server {

Result<HandlerOutcome> HandleMget(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& mget = std::get<protocol::MgetRequest>(request);
  const size_t n = mget.keys.size();
  protocol::MgetResponse& reply = ctx.session.scratch.mget;
  reply.meta_only = mget.meta_only;
  reply.results.assign(n, protocol::MgetResult{});
  // One pin per hit, all in the session's pin block (ReplyScratch::pins) when its last answer
  // is written, else in a new one; metas in `reply` are views into them, so they live until
  // encoded.
  std::shared_ptr<ReplyScratch::PinBlock>& kept = ctx.session.scratch.pins;
  if (kept == nullptr || kept.use_count() > 1) kept = std::make_shared<ReplyScratch::PinBlock>();
  const std::shared_ptr<ReplyScratch::PinBlock> pins = kept;
  pins->handles.clear();
  pins->handles.resize(n);
  const uint64_t answer_limit = ctx.service.arena_bytes();
  uint64_t answer_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    protocol::MgetResult& result = reply.results[i];
    store::ReadHandle& pin = pins->handles[i];
    // kTooLarge: the caller's buffer cannot take it (meta-only reads take any length).
    result.status = ctx.service.PinToRead(
        ctx.grant(), mget.ns, mget.keys[i].key, mget.any_namespace,
        mget.meta_only ? protocol::kUnlimitedCapacity : mget.keys[i].buffer_capacity, &pin);
    if (!pin.valid()) continue;
    result.meta = pin.meta();
    result.value_length = pin.size();
    result.checksum = pin.checksum();
    if (result.status == StatusCode::kOk) result.value = pin.data();
    if (!mget.meta_only && result.status == StatusCode::kOk) answer_bytes += pin.size();
  }
  if (answer_bytes > answer_limit) {
    pins->handles.clear();
    return Status::TooLarge(fmt::format(
        "an MGET answer of {} value bytes is more than the node holds ({}): a key is repeated "
        "in the request",
        answer_bytes, answer_limit));
  }

  protocol::EncodedFrame& frame = ctx.session.scratch.frame;
  Status encoded = protocol::EncodeResponse(ctx.header.request_id, reply, ctx.service.limits(),
                                            &frame, ctx.header.version);
  if (!encoded.ok()) return encoded.WithContext("encoding the MGET response");

  // The payload section is the values of the items that carry one, in item order. The ranges
  // share the pin block, so the pins end together, once the answer is written; the pins of
  // meta-only and too-large items end now, their metas being encoded.
  Response response;
  response.head = std::move(frame.head);
  response.payloads = std::move(ctx.session.scratch.payloads);
  response.payloads.clear();
  response.payloads.reserve(frame.payloads.size());
  for (size_t i = 0; i < n; ++i) {
    store::ReadHandle& pin = pins->handles[i];
    if (!reply.CarriesPayload(i) || reply.results[i].value_length == 0) {
      pin = store::ReadHandle();
      continue;
    }
    response.payloads.push_back(Response::Span{pin.data(), static_cast<size_t>(pin.size()),
                                               std::shared_ptr<const void>(pins, &pin)});
  }
  return HandlerOutcome{std::move(response), nullptr};
}

}  // namespace kvport::server
