// SPDX-License-Identifier: Apache-2.0
// MGET: pin every hit and send its bytes straight from the arena. An any-namespace MGET pins the
// first match of each key (the default namespace first, then the others by name).
#include <memory>
#include <variant>
#include <vector>

#include "server/command_table.h"

namespace kvport::server {

Result<HandlerOutcome> HandleMget(const RequestContext& ctx, protocol::AnyRequest& request) {
  auto& mget = std::get<protocol::MgetRequest>(request);
  const size_t n = mget.keys.size();
  protocol::MgetResponse reply;
  reply.meta_only = mget.meta_only;
  reply.results.resize(n);
  // One pin per hit; metas in `reply` are views into them, so they live until encoded.
  std::vector<std::shared_ptr<const store::ReadHandle>> pins(n);
  for (size_t i = 0; i < n; ++i) {
    protocol::MgetResult& result = reply.results[i];
    store::ReadHandle found;
    // kTooLarge: the caller's buffer cannot take it (meta-only reads take any length).
    result.status = ctx.service.PinToRead(
        ctx.grant(), mget.ns, mget.keys[i].key, mget.any_namespace,
        mget.meta_only ? protocol::kUnlimitedCapacity : mget.keys[i].buffer_capacity, &found);
    if (!found.valid()) continue;
    auto pin = std::make_shared<const store::ReadHandle>(std::move(found));
    result.meta = pin->meta();
    result.value_length = pin->size();
    if (result.status == StatusCode::kOk) result.value = pin->data();
    pins[i] = std::move(pin);
  }

  protocol::EncodedFrame frame;
  Status encoded = protocol::EncodeResponse(ctx.header.request_id, reply, ctx.service.limits(),
                                            &frame, ctx.header.version);
  if (!encoded.ok()) return encoded.WithContext("encoding the MGET response");

  // The payload section is the values of the items that carry one, in item order. Each range
  // keeps its own pin, so the session releases pins one by one as their bytes go out; pins
  // of misses, meta-only and too-large items are dropped when this function returns.
  Response response;
  response.head = std::move(frame.head);
  for (size_t i = 0; i < n; ++i) {
    if (!reply.CarriesPayload(i) || reply.results[i].value_length == 0) continue;
    response.payloads.push_back(
        Response::Span{pins[i]->data(), static_cast<size_t>(pins[i]->size()), pins[i]});
  }
  return HandlerOutcome{std::move(response), nullptr};
}

}  // namespace kvport::server
