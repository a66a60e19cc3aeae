// MSET, MGET, MEXIST and MDEL: the batched key operations.
#include <fmt/core.h>

#include <limits>

#include "protocol/codec_util.h"
#include "protocol/messages.h"

namespace kvport::protocol {

using internal::BeginFrame;
using internal::CheckFrameFor;
using internal::CheckOverall;
using internal::FinishFrame;
using internal::IsKnownStatusCode;
using internal::ItemError;
using internal::ReadCount;
using internal::ReadKey;
using internal::ReadNamespace;
using internal::ReadOverall;
using internal::ReadStatusCode;
using internal::WriteNamespace;

namespace {

// Smallest encoding of one item (with a 1-byte key where there is a key), used to bound counts.
constexpr uint64_t kMsetItemMinBytes = 2 + 4 + 8 + 1;
constexpr uint64_t kMgetKeyMinBytes = 2 + 8 + 1;
constexpr uint64_t kKeyMinBytes = 2 + 1;
constexpr uint64_t kStatusItemBytes = 1;
constexpr uint64_t kMgetResultMinBytes = 1 + 4 + 8;
constexpr uint64_t kExistResultBytes = 1 + 8;
constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

// True when a per-key status may come with a meta and a value length (MGET).
bool HasObjectInfo(StatusCode code) {
  return code == StatusCode::kOk || code == StatusCode::kTooLarge;
}

Status CheckStatusToEncode(std::string_view context, size_t i, StatusCode code) {
  if (!IsKnownStatusCode(static_cast<uint8_t>(code)))
    return Status::InvalidArgument(
        fmt::format("{}: item {}: unknown status code {}", context, i, static_cast<int>(code)));
  return Status::Ok();
}

Status CheckBatchToEncode(std::string_view context, uint64_t count, const Limits& l) {
  Status s = CheckBatchCount(count, l);
  return s.ok() ? s : s.WithContext(context);
}

// An any-namespace request names no namespace and needs version kAnyNamespaceVersion.
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

// Decoder side of the same rule (the header's flag and version were checked by CheckFrameFor).
Status CheckAnyNamespaceDecoded(const WireReader& r, const FrameHeader& h, std::string_view ns) {
  if (!h.any_namespace() || ns.empty()) return Status::Ok();
  return r.Error(StatusCode::kInvalidArgument,
                 fmt::format("namespace of {} bytes with the any-namespace flag; it must be empty",
                             ns.size()));
}

uint16_t AnyNamespaceFlag(bool any_namespace) {
  return any_namespace ? kFlagAnyNamespace : 0;
}

// MSET and MDEL responses: overall, count, one status byte per key.
Status EncodeStatuses(Opcode op, uint64_t request_id, const std::vector<StatusCode>& statuses,
                      const Limits& l, uint8_t version, EncodedFrame* out) {
  const std::string context = fmt::format("{} response", OpcodeName(op));
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(context, statuses.size(), l));
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU8(static_cast<uint8_t>(OverallStatus(statuses)));
  w.PutU32(static_cast<uint32_t>(statuses.size()));
  for (size_t i = 0; i < statuses.size(); ++i) {
    KVPORT_RETURN_IF_ERROR(CheckStatusToEncode(context, i, statuses[i]));
    w.PutU8(static_cast<uint8_t>(statuses[i]));
  }
  return FinishFrame(op, kFlagResponse, request_id, l, version, out);
}

Status DecodeStatuses(Opcode op, const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      std::vector<StatusCode>* statuses) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, op, /*response=*/true));
  const std::string context = fmt::format("{} response", OpcodeName(op));
  WireReader r(descriptor, context);
  BatchStatus overall = BatchStatus::kOk;
  uint32_t count = 0;
  KVPORT_RETURN_IF_ERROR(ReadOverall(r, &overall));
  KVPORT_RETURN_IF_ERROR(ReadCount(r, l, kStatusItemBytes, &count));
  statuses->resize(count);
  for (uint32_t i = 0; i < count; ++i)
    KVPORT_RETURN_IF_ERROR(ReadStatusCode(r, i, &(*statuses)[i]));
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  return CheckOverall(r, overall, OverallStatus(*statuses));
}

// MEXIST and MDEL requests: namespace, count, keys.
Status EncodeKeys(Opcode op, uint64_t request_id, std::string_view ns,
                  const std::vector<std::string_view>& keys, bool any_namespace, const Limits& l,
                  uint8_t version, EncodedFrame* out) {
  const std::string context = fmt::format("{} request", OpcodeName(op));
  KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceToEncode(context, any_namespace, ns, version));
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(context, keys.size(), l));
  BeginFrame(out);
  WireWriter w(&out->head);
  KVPORT_RETURN_IF_ERROR(WriteNamespace(w, ns, l, context));
  w.PutU32(static_cast<uint32_t>(keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    Status s = CheckKey(keys[i], l);
    if (!s.ok()) return ItemError(context, i, s);
    w.PutU16(static_cast<uint16_t>(keys[i].size()));
    w.PutBytes(keys[i]);
  }
  return FinishFrame(op, AnyNamespaceFlag(any_namespace), request_id, l, version, out);
}

Status DecodeKeys(Opcode op, const FrameHeader& h, std::string_view descriptor, const Limits& l,
                  std::string_view* ns, std::vector<std::string_view>* keys, bool* any_namespace) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, op, /*response=*/false));
  const std::string context = fmt::format("{} request", OpcodeName(op));
  WireReader r(descriptor, context);
  uint32_t count = 0;
  *any_namespace = h.any_namespace();
  KVPORT_RETURN_IF_ERROR(ReadNamespace(r, l, ns));
  KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceDecoded(r, h, *ns));
  KVPORT_RETURN_IF_ERROR(ReadCount(r, l, kKeyMinBytes, &count));
  keys->resize(count);
  for (uint32_t i = 0; i < count; ++i)
    KVPORT_RETURN_IF_ERROR(ReadKey(r, l, i, &(*keys)[i]));
  return r.ExpectEnd();
}

}  // namespace

// ---- MSET --------------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const MsetRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t version) {
  constexpr std::string_view kContext = "MSET request";
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(kContext, m.items.size(), l));
  BeginFrame(out);
  WireWriter w(&out->head);
  KVPORT_RETURN_IF_ERROR(WriteNamespace(w, m.ns, l, kContext));
  w.PutU32(m.ttl_seconds);
  w.PutU32(static_cast<uint32_t>(m.items.size()));
  for (size_t i = 0; i < m.items.size(); ++i) {
    const MsetItem& item = m.items[i];
    for (const Status& s :
         {CheckKey(item.key, l), CheckMeta(item.meta, l), CheckValueLength(item.value_length, l)})
      if (!s.ok()) return ItemError(kContext, i, s);
    if (item.value == nullptr && item.value_length != 0)
      return ItemError(kContext, i,
                       Status::InvalidArgument(
                           fmt::format("value is null but value_length is {}", item.value_length)));
    w.PutU16(static_cast<uint16_t>(item.key.size()));
    w.PutU32(static_cast<uint32_t>(item.meta.size()));
    w.PutU64(item.value_length);
    w.PutBytes(item.key);
    w.PutBytes(item.meta);
    if (item.value_length != 0) out->payloads.push_back({item.value, item.value_length});
  }
  return FinishFrame(Opcode::kMset, 0, request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     MsetRequest* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kMset, /*response=*/false));
  WireReader r(descriptor, "MSET request");
  uint32_t count = 0;
  KVPORT_RETURN_IF_ERROR(ReadNamespace(r, l, &out->ns));
  KVPORT_RETURN_IF_ERROR(r.ReadU32("ttl_seconds", &out->ttl_seconds));
  KVPORT_RETURN_IF_ERROR(ReadCount(r, l, kMsetItemMinBytes, &count));
  out->items.resize(count);
  uint64_t payload = 0;
  for (uint32_t i = 0; i < count; ++i) {
    MsetItem& item = out->items[i];
    uint16_t key_length = 0;
    uint32_t meta_length = 0;
    KVPORT_RETURN_IF_ERROR(r.ReadU16("key_length", &key_length));
    KVPORT_RETURN_IF_ERROR(r.ReadU32("meta_length", &meta_length));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("value_length", &item.value_length));
    if (key_length == 0)
      return r.Error(StatusCode::kInvalidArgument, fmt::format("item {}: empty key", i));
    if (key_length > l.max_key_bytes)
      return r.Error(StatusCode::kTooLarge,
                     fmt::format("item {}: key_length {} exceeds max_key_bytes {}", i, key_length,
                                 l.max_key_bytes));
    if (meta_length > l.max_meta_bytes)
      return r.Error(StatusCode::kTooLarge,
                     fmt::format("item {}: meta_length {} exceeds max_meta_bytes {}", i,
                                 meta_length, l.max_meta_bytes));
    if (item.value_length > l.max_value_bytes)
      return r.Error(StatusCode::kTooLarge,
                     fmt::format("item {}: value_length {} exceeds max_value_bytes {}", i,
                                 item.value_length, l.max_value_bytes));
    KVPORT_RETURN_IF_ERROR(r.ReadBytes("key", key_length, &item.key));
    KVPORT_RETURN_IF_ERROR(r.ReadBytes("meta", meta_length, &item.meta));
    item.value = nullptr;
    if (item.value_length > kMaxU64 - payload)  // only reachable with unvalidated limits
      return r.Error(StatusCode::kTooLarge, "value lengths overflow 64 bits");
    payload += item.value_length;
  }
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  if (payload != h.payload_length)
    return r.Error(
        StatusCode::kCorruption,
        fmt::format("value lengths sum to {} but payload_length is {}", payload, h.payload_length));
  return Status::Ok();
}

Status EncodeResponse(uint64_t request_id, const MsetResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  return EncodeStatuses(Opcode::kMset, request_id, m.statuses, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      MsetResponse* out) {
  return DecodeStatuses(Opcode::kMset, h, descriptor, l, &out->statuses);
}

// ---- MGET --------------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const MgetRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t version) {
  constexpr std::string_view kContext = "MGET request";
  KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceToEncode(kContext, m.any_namespace, m.ns, version));
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(kContext, m.keys.size(), l));
  BeginFrame(out);
  WireWriter w(&out->head);
  KVPORT_RETURN_IF_ERROR(WriteNamespace(w, m.ns, l, kContext));
  w.PutU32(static_cast<uint32_t>(m.keys.size()));
  for (size_t i = 0; i < m.keys.size(); ++i) {
    Status s = CheckKey(m.keys[i].key, l);
    if (!s.ok()) return ItemError(kContext, i, s);
    w.PutU16(static_cast<uint16_t>(m.keys[i].key.size()));
    w.PutU64(m.keys[i].buffer_capacity);
    w.PutBytes(m.keys[i].key);
  }
  return FinishFrame(Opcode::kMget,
                     (m.meta_only ? kFlagMetaOnly : 0) | AnyNamespaceFlag(m.any_namespace),
                     request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     MgetRequest* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kMget, /*response=*/false));
  WireReader r(descriptor, "MGET request");
  uint32_t count = 0;
  out->meta_only = h.meta_only();
  out->any_namespace = h.any_namespace();
  KVPORT_RETURN_IF_ERROR(ReadNamespace(r, l, &out->ns));
  KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceDecoded(r, h, out->ns));
  KVPORT_RETURN_IF_ERROR(ReadCount(r, l, kMgetKeyMinBytes, &count));
  out->keys.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    MgetKey& key = out->keys[i];
    uint16_t key_length = 0;
    KVPORT_RETURN_IF_ERROR(r.ReadU16("key_length", &key_length));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("buffer_capacity", &key.buffer_capacity));
    if (key_length == 0)
      return r.Error(StatusCode::kInvalidArgument, fmt::format("item {}: empty key", i));
    if (key_length > l.max_key_bytes)
      return r.Error(StatusCode::kTooLarge,
                     fmt::format("item {}: key_length {} exceeds max_key_bytes {}", i, key_length,
                                 l.max_key_bytes));
    KVPORT_RETURN_IF_ERROR(r.ReadBytes("key", key_length, &key.key));
  }
  return r.ExpectEnd();
}

BatchStatus MgetResponse::overall() const {
  size_t ok = 0;
  for (const MgetResult& res : results)
    ok += res.status == StatusCode::kOk;
  return internal::OverallFromCounts(ok, results.size());
}

Status EncodeResponse(uint64_t request_id, const MgetResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "MGET response";
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(kContext, m.results.size(), l));
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU8(static_cast<uint8_t>(m.overall()));
  w.PutU32(static_cast<uint32_t>(m.results.size()));
  for (size_t i = 0; i < m.results.size(); ++i) {
    const MgetResult& res = m.results[i];
    KVPORT_RETURN_IF_ERROR(CheckStatusToEncode(kContext, i, res.status));
    if (HasObjectInfo(res.status)) {
      for (const Status& s : {CheckMeta(res.meta, l), CheckValueLength(res.value_length, l)})
        if (!s.ok()) return ItemError(kContext, i, s);
    } else if (!res.meta.empty() || res.value_length != 0) {
      return ItemError(kContext, i,
                       Status::InvalidArgument(fmt::format("status {} with a meta or value length",
                                                           StatusCodeName(res.status))));
    }
    const bool carried = m.CarriesPayload(i);
    if (carried && res.value == nullptr && res.value_length != 0)
      return ItemError(kContext, i,
                       Status::InvalidArgument(
                           fmt::format("value is null but value_length is {}", res.value_length)));
    w.PutU8(static_cast<uint8_t>(res.status));
    w.PutU32(static_cast<uint32_t>(res.meta.size()));
    w.PutU64(res.value_length);
    w.PutBytes(res.meta);
    if (carried && res.value_length != 0) out->payloads.push_back({res.value, res.value_length});
  }
  return FinishFrame(Opcode::kMget, kFlagResponse | (m.meta_only ? kFlagMetaOnly : 0), request_id,
                     l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      MgetResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kMget, /*response=*/true));
  WireReader r(descriptor, "MGET response");
  BatchStatus overall = BatchStatus::kOk;
  uint32_t count = 0;
  out->meta_only = h.meta_only();
  KVPORT_RETURN_IF_ERROR(ReadOverall(r, &overall));
  KVPORT_RETURN_IF_ERROR(ReadCount(r, l, kMgetResultMinBytes, &count));
  out->results.resize(count);
  uint64_t payload = 0;
  for (uint32_t i = 0; i < count; ++i) {
    MgetResult& res = out->results[i];
    uint32_t meta_length = 0;
    KVPORT_RETURN_IF_ERROR(ReadStatusCode(r, i, &res.status));
    KVPORT_RETURN_IF_ERROR(r.ReadU32("meta_length", &meta_length));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("value_length", &res.value_length));
    if (!HasObjectInfo(res.status) && (meta_length != 0 || res.value_length != 0))
      return r.Error(StatusCode::kCorruption,
                     fmt::format("item {}: status {} with meta_length {} and value_length {}", i,
                                 StatusCodeName(res.status), meta_length, res.value_length));
    if (meta_length > l.max_meta_bytes)
      return r.Error(StatusCode::kTooLarge,
                     fmt::format("item {}: meta_length {} exceeds max_meta_bytes {}", i,
                                 meta_length, l.max_meta_bytes));
    if (res.value_length > l.max_value_bytes)
      return r.Error(StatusCode::kTooLarge,
                     fmt::format("item {}: value_length {} exceeds max_value_bytes {}", i,
                                 res.value_length, l.max_value_bytes));
    KVPORT_RETURN_IF_ERROR(r.ReadBytes("meta", meta_length, &res.meta));
    res.value = nullptr;
    if (out->CarriesPayload(i)) {
      if (res.value_length > kMaxU64 - payload)  // only reachable with unvalidated limits
        return r.Error(StatusCode::kTooLarge, "value lengths overflow 64 bits");
      payload += res.value_length;
    }
  }
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  KVPORT_RETURN_IF_ERROR(CheckOverall(r, overall, out->overall()));
  if (payload != h.payload_length)
    return r.Error(StatusCode::kCorruption,
                   fmt::format("value lengths of the hits sum to {} but payload_length is {}",
                               payload, h.payload_length));
  return Status::Ok();
}

Status CheckMgetResponse(const MgetRequest& request, const MgetResponse& response) {
  if (response.results.size() != request.keys.size())
    return Status::Corruption(fmt::format("MGET response: {} results for {} keys",
                                          response.results.size(), request.keys.size()));
  if (response.meta_only != request.meta_only)
    return Status::Corruption("MGET response: meta-only flag differs from the request");
  for (size_t i = 0; i < response.results.size(); ++i) {
    if (response.CarriesPayload(i) &&
        response.results[i].value_length > request.keys[i].buffer_capacity)
      return Status::Corruption(fmt::format(
          "MGET response: item {}: value_length {} exceeds the buffer_capacity {} asked for", i,
          response.results[i].value_length, request.keys[i].buffer_capacity));
  }
  return Status::Ok();
}

// ---- MEXIST ------------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const MexistRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version) {
  return EncodeKeys(Opcode::kMexist, request_id, m.ns, m.keys, m.any_namespace, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     MexistRequest* out) {
  return DecodeKeys(Opcode::kMexist, h, descriptor, l, &out->ns, &out->keys, &out->any_namespace);
}

BatchStatus MexistResponse::overall() const {
  size_t ok = 0;
  for (const ExistResult& res : results)
    ok += res.status == StatusCode::kOk;
  return internal::OverallFromCounts(ok, results.size());
}

Status EncodeResponse(uint64_t request_id, const MexistResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "MEXIST response";
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(kContext, m.results.size(), l));
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU8(static_cast<uint8_t>(m.overall()));
  w.PutU32(static_cast<uint32_t>(m.results.size()));
  for (size_t i = 0; i < m.results.size(); ++i) {
    const ExistResult& res = m.results[i];
    KVPORT_RETURN_IF_ERROR(CheckStatusToEncode(kContext, i, res.status));
    if (res.status != StatusCode::kOk && res.value_length != 0)
      return ItemError(
          kContext, i,
          Status::InvalidArgument(fmt::format("status {} with value_length {}",
                                              StatusCodeName(res.status), res.value_length)));
    Status s = CheckValueLength(res.value_length, l);
    if (!s.ok()) return ItemError(kContext, i, s);
    w.PutU8(static_cast<uint8_t>(res.status));
    w.PutU64(res.value_length);
  }
  return FinishFrame(Opcode::kMexist, kFlagResponse, request_id, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      MexistResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kMexist, /*response=*/true));
  WireReader r(descriptor, "MEXIST response");
  BatchStatus overall = BatchStatus::kOk;
  uint32_t count = 0;
  KVPORT_RETURN_IF_ERROR(ReadOverall(r, &overall));
  KVPORT_RETURN_IF_ERROR(ReadCount(r, l, kExistResultBytes, &count));
  out->results.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    ExistResult& res = out->results[i];
    KVPORT_RETURN_IF_ERROR(ReadStatusCode(r, i, &res.status));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("value_length", &res.value_length));
    if (res.status != StatusCode::kOk && res.value_length != 0)
      return r.Error(StatusCode::kCorruption,
                     fmt::format("item {}: status {} with value_length {}", i,
                                 StatusCodeName(res.status), res.value_length));
    if (res.value_length > l.max_value_bytes)
      return r.Error(StatusCode::kTooLarge,
                     fmt::format("item {}: value_length {} exceeds max_value_bytes {}", i,
                                 res.value_length, l.max_value_bytes));
  }
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  return CheckOverall(r, overall, out->overall());
}

// ---- MDEL --------------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const MdelRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t version) {
  return EncodeKeys(Opcode::kMdel, request_id, m.ns, m.keys, m.any_namespace, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     MdelRequest* out) {
  return DecodeKeys(Opcode::kMdel, h, descriptor, l, &out->ns, &out->keys, &out->any_namespace);
}

Status EncodeResponse(uint64_t request_id, const MdelResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  return EncodeStatuses(Opcode::kMdel, request_id, m.statuses, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      MdelResponse* out) {
  return DecodeStatuses(Opcode::kMdel, h, descriptor, l, &out->statuses);
}

}  // namespace kvport::protocol
