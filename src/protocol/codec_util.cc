#include "protocol/codec_util.h"

#include <fmt/core.h>

namespace kvport::protocol::internal {

bool IsKnownStatusCode(uint8_t v) {
  return v <= static_cast<uint8_t>(StatusCode::kInternal);
}

BatchStatus OverallFromCounts(size_t ok, size_t total) {
  if (ok == total) return BatchStatus::kOk;
  return ok == 0 ? BatchStatus::kFailed : BatchStatus::kPartial;
}

void BeginFrame(EncodedFrame* out) {
  out->head.clear();
  out->head.resize(kFrameHeaderSize);
  out->payloads.clear();
}

Status FinishFrame(Opcode op, uint16_t flags, uint64_t request_id, const Limits& limits,
                   uint8_t version, EncodedFrame* out) {
  const bool response = (flags & kFlagResponse) != 0;
  const bool frozen = op == Opcode::kHello || op == Opcode::kError;
  if (!frozen && (version < kMinProtocolVersion || version > kMaxProtocolVersion))
    return Status::InvalidArgument(fmt::format(
        "{} {}: protocol version {}; this build speaks {}..{}", OpcodeName(op),
        response ? "response" : "request", version, kMinProtocolVersion, kMaxProtocolVersion));
  const uint64_t max_head = response ? MaxResponseFrameBytes(limits) : limits.max_frame_bytes;
  if (out->head.size() > max_head)
    return Status::TooLarge(
        fmt::format("{} {}: {} header+descriptor bytes exceed {} ({}); split the batch",
                    OpcodeName(op), response ? "response" : "request", out->head.size(), max_head,
                    response ? "the response frame limit" : "max_frame_bytes"));
  FrameHeader h;
  h.version = frozen ? kHelloVersion : version;
  h.opcode = op;
  h.flags = flags;
  h.request_id = request_id;
  h.descriptor_length = static_cast<uint32_t>(out->head.size() - kFrameHeaderSize);
  h.payload_length = out->payload_length();
  std::string header;
  header.reserve(kFrameHeaderSize);
  AppendFrameHeader(h, &header);
  out->head.replace(0, kFrameHeaderSize, header);
  return Status::Ok();
}

Status ItemError(std::string_view context, size_t index, const Status& status) {
  return Status(status.code(), fmt::format("{}: item {}: {}", context, index, status.message()));
}

Status CheckFrameFor(const FrameHeader& h, std::string_view descriptor, Opcode op, bool response) {
  if (h.opcode != op || h.is_response() != response)
    return Status::InvalidArgument(fmt::format(
        "{} {} decoder given a {} {} frame", OpcodeName(op), response ? "response" : "request",
        OpcodeName(h.opcode), h.is_response() ? "response" : "request"));
  if (descriptor.size() != h.descriptor_length)
    return Status::InvalidArgument(fmt::format(
        "{} {} decoder given {} descriptor bytes; the header announced {}", OpcodeName(op),
        response ? "response" : "request", descriptor.size(), h.descriptor_length));
  if (h.meta_only() && op != Opcode::kMget)
    return Status::Corruption(fmt::format("{}: meta-only flag set", OpcodeName(op)));
  if (h.any_namespace() && (response || !AcceptsAnyNamespace(op)))
    return Status::Corruption(fmt::format("{} {}: any-namespace flag set", OpcodeName(op),
                                          response ? "response" : "request"));
  if (h.any_namespace() && h.version < kAnyNamespaceVersion)
    return Status::Corruption(
        fmt::format("{} request: any-namespace flag in a version {} frame (it needs version {})",
                    OpcodeName(op), h.version, kAnyNamespaceVersion));
  if (!CarriesPayload(op, response) && h.payload_length != 0)
    return Status::Corruption(fmt::format("{} {}: payload_length {} on a frame without payload",
                                          OpcodeName(op), response ? "response" : "request",
                                          h.payload_length));
  return Status::Ok();
}

Status WriteNamespace(WireWriter& w, std::string_view ns, const Limits& limits,
                      std::string_view context) {
  Status s = CheckNamespace(ns, limits);
  if (!s.ok()) return s.WithContext(context);
  w.PutU8(static_cast<uint8_t>(ns.size()));
  w.PutBytes(ns);
  return Status::Ok();
}

Status ReadNamespace(WireReader& r, const Limits& limits, std::string_view* ns) {
  uint8_t len = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU8("namespace_length", &len));
  if (len > limits.max_namespace_bytes)
    return r.Error(StatusCode::kTooLarge,
                   fmt::format("namespace_length {} exceeds max_namespace_bytes {}", len,
                               limits.max_namespace_bytes));
  return r.ReadBytes("namespace", len, ns);
}

Status ReadKey(WireReader& r, const Limits& limits, size_t index, std::string_view* key) {
  uint16_t len = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU16("key_length", &len));
  if (len == 0)
    return r.Error(StatusCode::kInvalidArgument, fmt::format("item {}: empty key", index));
  if (len > limits.max_key_bytes)
    return r.Error(StatusCode::kTooLarge,
                   fmt::format("item {}: key_length {} exceeds max_key_bytes {}", index, len,
                               limits.max_key_bytes));
  return r.ReadBytes("key", len, key);
}

Status ReadListCount(WireReader& r, std::string_view field, uint64_t min_item_bytes,
                     uint32_t* count) {
  uint32_t n = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU32(field, &n));
  if (static_cast<uint64_t>(n) * min_item_bytes > r.remaining())
    return r.Error(StatusCode::kCorruption,
                   fmt::format("{} {} needs at least {} bytes, only {} left", field, n,
                               static_cast<uint64_t>(n) * min_item_bytes, r.remaining()));
  *count = n;
  return Status::Ok();
}

Status ReadCount(WireReader& r, const Limits& limits, uint64_t min_item_bytes, uint32_t* count) {
  uint32_t n = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU32("count", &n));
  if (n > limits.max_batch_keys)
    return r.Error(StatusCode::kTooLarge,
                   fmt::format("count {} exceeds max_batch_keys {}", n, limits.max_batch_keys));
  if (static_cast<uint64_t>(n) * min_item_bytes > r.remaining())
    return r.Error(StatusCode::kCorruption,
                   fmt::format("count {} needs at least {} bytes, only {} left", n,
                               static_cast<uint64_t>(n) * min_item_bytes, r.remaining()));
  *count = n;
  return Status::Ok();
}

Status ReadStatusCode(WireReader& r, size_t index, StatusCode* code) {
  uint8_t v = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU8("status", &v));
  if (!IsKnownStatusCode(v))
    return r.Error(StatusCode::kCorruption,
                   fmt::format("item {}: unknown status code {}", index, v));
  *code = static_cast<StatusCode>(v);
  return Status::Ok();
}

Status ReadOverall(WireReader& r, BatchStatus* overall) {
  uint8_t v = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU8("overall_status", &v));
  if (v > static_cast<uint8_t>(BatchStatus::kFailed))
    return r.Error(StatusCode::kCorruption, fmt::format("unknown overall_status {}", v));
  *overall = static_cast<BatchStatus>(v);
  return Status::Ok();
}

Status CheckOverall(const WireReader& r, BatchStatus wire, BatchStatus derived) {
  if (wire == derived) return Status::Ok();
  return r.Error(StatusCode::kCorruption,
                 fmt::format("overall_status {} disagrees with the per-key statuses ({})",
                             BatchStatusName(wire), BatchStatusName(derived)));
}

}  // namespace kvport::protocol::internal
