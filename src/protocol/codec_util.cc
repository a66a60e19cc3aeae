// SPDX-License-Identifier: Apache-2.0
#include "protocol/codec_util.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <string>

namespace kvport::protocol::internal {

namespace {

// Smallest encoding of one item (with a 1-byte key), used to bound counts. MSET items:
// MsetItemFixedBytes(version) + 1.
constexpr uint64_t kMgetKeyMinBytes = 2 + 8 + 1;
constexpr uint64_t kStatusItemBytes = 1;
constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

}  // namespace

bool IsKnownStatusCode(uint8_t v) {
  return v <= static_cast<uint8_t>(StatusCode::kPermissionDenied);
}

BatchStatus OverallFromCounts(size_t ok, size_t total) {
  if (ok == total) return BatchStatus::kOk;
  return ok == 0 ? BatchStatus::kFailed : BatchStatus::kPartial;
}

void BeginFrame(EncodedFrame* out, size_t descriptor_bytes) {
  out->head.clear();
  // At least 256: most descriptors then fit without the string growing as they are written.
  out->head.reserve(kFrameHeaderSize + std::max<size_t>(descriptor_bytes, 256));
  out->head.resize(kFrameHeaderSize);
  out->payloads.clear();
}

Status CheckVersionToEncode(Opcode op, bool response, uint8_t version) {
  if (op == Opcode::kHello || op == Opcode::kError) return Status::Ok();
  if (version < kMinProtocolVersion || version > kMaxProtocolVersion)
    return Status::InvalidArgument(fmt::format(
        "{} {}: protocol version {}; this build speaks {}..{}", OpcodeName(op),
        response ? "response" : "request", version, kMinProtocolVersion, kMaxProtocolVersion));
  if (version < OpcodeMinVersion(op))
    return Status::NotSupported(
        fmt::format("{} {}: needs protocol version {}; this frame is version {}", OpcodeName(op),
                    response ? "response" : "request", OpcodeMinVersion(op), version));
  return Status::Ok();
}

Status FinishFrame(Opcode op, uint16_t flags, uint64_t request_id, const Limits& limits,
                   uint8_t version, EncodedFrame* out) {
  const bool response = (flags & kFlagResponse) != 0;
  const bool frozen = op == Opcode::kHello || op == Opcode::kError;
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(op, response, version));
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
  StoreFrameHeader(h, out->head.data());
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
  if (h.version < OpcodeMinVersion(op))
    return Status::Corruption(fmt::format("{} {}: a version {} frame; it needs protocol version {}",
                                          OpcodeName(op), response ? "response" : "request",
                                          h.version, OpcodeMinVersion(op)));
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

Status WriteName(WireWriter& w, std::string_view context, std::string_view field,
                 std::string_view name) {
  if (name.size() > kMaxNameBytes)
    return Status::InvalidArgument(
        fmt::format("{}: {} of {} bytes exceeds {}", context, field, name.size(), kMaxNameBytes));
  w.PutU8(static_cast<uint8_t>(name.size()));
  w.PutBytes(name);
  return Status::Ok();
}

Status ReadName(WireReader& r, std::string_view field, std::string_view* name) {
  uint8_t len = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU8(field, &len));
  return r.ReadBytes(field, len, name);
}

namespace {

// The one rule for a decoded key length: 1..max_key_bytes.
Status CheckKeyLength(const WireReader& r, const Limits& limits, size_t index, uint16_t len) {
  if (len == 0)
    return r.Error(StatusCode::kInvalidArgument, fmt::format("item {}: empty key", index));
  if (len > limits.max_key_bytes)
    return r.Error(StatusCode::kTooLarge,
                   fmt::format("item {}: key_length {} exceeds max_key_bytes {}", index, len,
                               limits.max_key_bytes));
  return Status::Ok();
}

}  // namespace

Status ReadKey(WireReader& r, const Limits& limits, size_t index, std::string_view* key) {
  uint16_t len = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU16("key_length", &len));
  KVPORT_RETURN_IF_ERROR(CheckKeyLength(r, limits, index, len));
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

Status ReadResponseStatus(WireReader& r, StatusCode* code) {
  uint8_t v = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU8("status", &v));
  if (!IsKnownStatusCode(v))
    return r.Error(StatusCode::kCorruption, fmt::format("unknown status code {}", v));
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

// ---- Encoder-side checks -----------------------------------------------------------------

Status CheckStatusToEncode(std::string_view context, size_t index, StatusCode code) {
  if (!IsKnownStatusCode(static_cast<uint8_t>(code)))
    return Status::InvalidArgument(
        fmt::format("{}: item {}: unknown status code {}", context, index, static_cast<int>(code)));
  return Status::Ok();
}

Status CheckBatchToEncode(std::string_view context, uint64_t count, const Limits& limits) {
  Status s = CheckBatchCount(count, limits);
  return s.ok() ? s : s.WithContext(context);
}

Status CheckAnyNamespaceToEncode(std::string_view context, bool any_namespace, std::string_view ns,
                                 uint8_t version) {
  if (!any_namespace) return Status::Ok();
  if (!ns.empty())
    return Status::InvalidArgument(
        fmt::format("{}: any-namespace request with a namespace of {} bytes; it must be empty",
                    context, ns.size()));
  // (A version this build does not speak at all is FinishFrame's InvalidArgument.)
  if (version >= kMinProtocolVersion && version < kAnyNamespaceVersion)
    return Status::NotSupported(
        fmt::format("{}: any-namespace requests need protocol version {}; this frame is version {}",
                    context, kAnyNamespaceVersion, version));
  return Status::Ok();
}

Status CheckAnyNamespaceDecoded(const WireReader& r, const FrameHeader& h, std::string_view ns) {
  if (!h.any_namespace() || ns.empty()) return Status::Ok();
  return r.Error(StatusCode::kInvalidArgument,
                 fmt::format("namespace of {} bytes with the any-namespace flag; it must be empty",
                             ns.size()));
}

// ---- Layouts shared by several opcodes ---------------------------------------------------

Status CheckResultToEncode(std::string_view context, size_t index, StatusCode status,
                           std::string_view meta, uint64_t value_length, uint64_t checksum,
                           const Limits& limits) {
  KVPORT_RETURN_IF_ERROR(CheckStatusToEncode(context, index, status));
  if (HasObjectInfo(status)) {
    for (const Status& s : {CheckMeta(meta, limits), CheckValueLength(value_length, limits)})
      if (!s.ok()) return ItemError(context, index, s);
  } else if (!meta.empty() || value_length != 0) {
    return ItemError(context, index,
                     Status::InvalidArgument(fmt::format("status {} with a meta or value length",
                                                         StatusCodeName(status))));
  } else if (checksum != 0) {
    return ItemError(context, index,
                     Status::InvalidArgument(fmt::format("status {} with checksum {:#x}",
                                                         StatusCodeName(status), checksum)));
  }
  return Status::Ok();
}

Status CheckResultDecoded(const WireReader& r, size_t index, StatusCode status,
                          uint32_t meta_length, uint64_t value_length, uint64_t checksum,
                          const Limits& limits) {
  if (!HasObjectInfo(status) && (meta_length != 0 || value_length != 0))
    return r.Error(StatusCode::kCorruption,
                   fmt::format("item {}: status {} with meta_length {} and value_length {}", index,
                               StatusCodeName(status), meta_length, value_length));
  if (!HasObjectInfo(status) && checksum != 0)
    return r.Error(StatusCode::kCorruption, fmt::format("item {}: status {} with checksum {:#x}",
                                                        index, StatusCodeName(status), checksum));
  if (meta_length > limits.max_meta_bytes)
    return r.Error(StatusCode::kTooLarge,
                   fmt::format("item {}: meta_length {} exceeds max_meta_bytes {}", index,
                               meta_length, limits.max_meta_bytes));
  if (value_length > limits.max_value_bytes)
    return r.Error(StatusCode::kTooLarge,
                   fmt::format("item {}: value_length {} exceeds max_value_bytes {}", index,
                               value_length, limits.max_value_bytes));
  return Status::Ok();
}

Status WriteMsetDescriptor(WireWriter& w, std::string_view context, std::string_view ns,
                           uint32_t ttl_seconds, const std::vector<MsetItem>& items,
                           const Limits& limits, uint8_t version,
                           std::vector<PayloadSpan>* payloads) {
  const bool checksums = CarriesChecksums(version);
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(context, items.size(), limits));
  KVPORT_RETURN_IF_ERROR(WriteNamespace(w, ns, limits, context));
  if (payloads != nullptr) payloads->reserve(items.size());
  w.PutU32(ttl_seconds);
  w.PutU32(static_cast<uint32_t>(items.size()));
  for (size_t i = 0; i < items.size(); ++i) {
    const MsetItem& item = items[i];
    for (const Status& s : {CheckKey(item.key, limits), CheckMeta(item.meta, limits),
                            CheckValueLength(item.value_length, limits)})
      if (!s.ok()) return ItemError(context, i, s);
    if (payloads != nullptr && item.value == nullptr && item.value_length != 0)
      return ItemError(context, i,
                       Status::InvalidArgument(
                           fmt::format("value is null but value_length is {}", item.value_length)));
    w.PutU16(static_cast<uint16_t>(item.key.size()));
    w.PutU32(static_cast<uint32_t>(item.meta.size()));
    w.PutU64(item.value_length);
    if (checksums) w.PutU64(item.checksum);
    w.PutBytes(item.key);
    w.PutBytes(item.meta);
    if (payloads != nullptr && item.value_length != 0)
      payloads->push_back({item.value, item.value_length});
  }
  return Status::Ok();
}

Status ReadMsetDescriptor(WireReader& r, const Limits& limits, uint8_t version,
                          std::string_view* ns, uint32_t* ttl_seconds, std::vector<MsetItem>* items,
                          uint64_t* value_bytes) {
  const bool checksums = CarriesChecksums(version);
  uint32_t count = 0;
  KVPORT_RETURN_IF_ERROR(ReadNamespace(r, limits, ns));
  KVPORT_RETURN_IF_ERROR(r.ReadU32("ttl_seconds", ttl_seconds));
  KVPORT_RETURN_IF_ERROR(ReadCount(r, limits, MsetItemFixedBytes(version) + 1, &count));
  items->resize(count);
  uint64_t sum = 0;
  for (uint32_t i = 0; i < count; ++i) {
    MsetItem& item = (*items)[i];
    uint16_t key_length = 0;
    uint32_t meta_length = 0;
    KVPORT_RETURN_IF_ERROR(r.ReadU16("key_length", &key_length));
    KVPORT_RETURN_IF_ERROR(r.ReadU32("meta_length", &meta_length));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("value_length", &item.value_length));
    item.checksum = 0;  // the item may be reused from an earlier decode
    if (checksums) KVPORT_RETURN_IF_ERROR(r.ReadU64("checksum", &item.checksum));
    KVPORT_RETURN_IF_ERROR(CheckKeyLength(r, limits, i, key_length));
    if (meta_length > limits.max_meta_bytes)
      return r.Error(StatusCode::kTooLarge,
                     fmt::format("item {}: meta_length {} exceeds max_meta_bytes {}", i,
                                 meta_length, limits.max_meta_bytes));
    if (item.value_length > limits.max_value_bytes)
      return r.Error(StatusCode::kTooLarge,
                     fmt::format("item {}: value_length {} exceeds max_value_bytes {}", i,
                                 item.value_length, limits.max_value_bytes));
    KVPORT_RETURN_IF_ERROR(r.ReadBytes("key", key_length, &item.key));
    KVPORT_RETURN_IF_ERROR(r.ReadBytes("meta", meta_length, &item.meta));
    item.value = nullptr;
    if (item.value_length > kMaxU64 - sum)  // only reachable with unvalidated limits
      return r.Error(StatusCode::kTooLarge, "value lengths overflow 64 bits");
    sum += item.value_length;
  }
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  *value_bytes = sum;
  return Status::Ok();
}

Status WriteMgetDescriptor(WireWriter& w, std::string_view context, std::string_view ns,
                           const std::vector<MgetKey>& keys, bool any_namespace,
                           const Limits& limits, uint8_t version) {
  KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceToEncode(context, any_namespace, ns, version));
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(context, keys.size(), limits));
  KVPORT_RETURN_IF_ERROR(WriteNamespace(w, ns, limits, context));
  w.PutU32(static_cast<uint32_t>(keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    Status s = CheckKey(keys[i].key, limits);
    if (!s.ok()) return ItemError(context, i, s);
    w.PutU16(static_cast<uint16_t>(keys[i].key.size()));
    w.PutU64(keys[i].buffer_capacity);
    w.PutBytes(keys[i].key);
  }
  return Status::Ok();
}

Status ReadMgetDescriptor(WireReader& r, const FrameHeader& h, const Limits& limits,
                          std::string_view* ns, std::vector<MgetKey>* keys) {
  uint32_t count = 0;
  KVPORT_RETURN_IF_ERROR(ReadNamespace(r, limits, ns));
  KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceDecoded(r, h, *ns));
  KVPORT_RETURN_IF_ERROR(ReadCount(r, limits, kMgetKeyMinBytes, &count));
  keys->resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    MgetKey& key = (*keys)[i];
    uint16_t key_length = 0;
    KVPORT_RETURN_IF_ERROR(r.ReadU16("key_length", &key_length));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("buffer_capacity", &key.buffer_capacity));
    KVPORT_RETURN_IF_ERROR(CheckKeyLength(r, limits, i, key_length));
    KVPORT_RETURN_IF_ERROR(r.ReadBytes("key", key_length, &key.key));
  }
  return r.ExpectEnd();
}

Status EncodeStatuses(Opcode op, uint64_t request_id, const std::vector<StatusCode>& statuses,
                      const Limits& limits, uint8_t version, EncodedFrame* out) {
  const std::string context = fmt::format("{} response", OpcodeName(op));
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(op, /*response=*/true, version));
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(context, statuses.size(), limits));
  BeginFrame(out, 5 + statuses.size());
  WireWriter w(&out->head);
  w.PutU8(static_cast<uint8_t>(OverallStatus(statuses)));
  w.PutU32(static_cast<uint32_t>(statuses.size()));
  for (size_t i = 0; i < statuses.size(); ++i) {
    KVPORT_RETURN_IF_ERROR(CheckStatusToEncode(context, i, statuses[i]));
    w.PutU8(static_cast<uint8_t>(statuses[i]));
  }
  return FinishFrame(op, kFlagResponse, request_id, limits, version, out);
}

Status DecodeStatuses(Opcode op, const FrameHeader& h, std::string_view descriptor,
                      const Limits& limits, std::vector<StatusCode>* statuses) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, op, /*response=*/true));
  const std::string context = fmt::format("{} response", OpcodeName(op));
  WireReader r(descriptor, context);
  BatchStatus overall = BatchStatus::kOk;
  uint32_t count = 0;
  KVPORT_RETURN_IF_ERROR(ReadOverall(r, &overall));
  KVPORT_RETURN_IF_ERROR(ReadCount(r, limits, kStatusItemBytes, &count));
  statuses->resize(count);
  for (uint32_t i = 0; i < count; ++i)
    KVPORT_RETURN_IF_ERROR(ReadStatusCode(r, i, &(*statuses)[i]));
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  return CheckOverall(r, overall, OverallStatus(*statuses));
}

Status EncodeEmpty(Opcode op, uint64_t request_id, const Limits& l, uint8_t version,
                   EncodedFrame* out) {
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(op, /*response=*/false, version));
  BeginFrame(out);
  return FinishFrame(op, 0, request_id, l, version, out);
}

Status DecodeEmpty(Opcode op, const FrameHeader& h, std::string_view descriptor) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, op, /*response=*/false));
  return WireReader(descriptor, fmt::format("{} request", OpcodeName(op))).ExpectEnd();
}

}  // namespace kvport::protocol::internal
