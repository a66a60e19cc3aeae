// SPDX-License-Identifier: Apache-2.0
// MSET, MGET, MEXIST and MDEL: the batched key operations.
#include <fmt/core.h>

#include <limits>

#include "protocol/codec_util.h"
#include "protocol/messages.h"

namespace kvport::protocol {

using internal::AnyNamespaceFlag;
using internal::BeginFrame;
using internal::CarriesChecksums;
using internal::CheckAnyNamespaceDecoded;
using internal::CheckAnyNamespaceToEncode;
using internal::CheckBatchToEncode;
using internal::CheckFrameFor;
using internal::CheckOverall;
using internal::CheckResultDecoded;
using internal::CheckResultToEncode;
using internal::CheckStatusToEncode;
using internal::DecodeStatuses;
using internal::EncodeStatuses;
using internal::FinishFrame;
using internal::ItemError;
using internal::MsetItemFixedBytes;
using internal::ReadCount;
using internal::ReadKey;
using internal::ReadMgetDescriptor;
using internal::ReadMsetDescriptor;
using internal::ReadNamespace;
using internal::ReadOverall;
using internal::ReadStatusCode;
using internal::WriteMgetDescriptor;
using internal::WriteMsetDescriptor;
using internal::WriteNamespace;

namespace {

// Smallest encoding of one item (with a 1-byte key where there is a key), used to bound counts.
constexpr uint64_t kKeyMinBytes = 2 + 1;
constexpr uint64_t kExistResultBytes = 1 + 8;
constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

// Bytes of one MGET result in a frame of `version`, without its meta: u8 status, u32 meta_len,
// u64 value_len and, from kChecksumVersion on, u64 checksum.
constexpr uint64_t MgetResultFixedBytes(uint8_t version) {
  return CarriesChecksums(version) ? 1 + 4 + 8 + 8 : 1 + 4 + 8;
}

// MEXIST and MDEL requests: namespace, count, keys.
Status EncodeKeys(Opcode op, uint64_t request_id, std::string_view ns,
                  const std::vector<std::string_view>& keys, bool any_namespace, const Limits& l,
                  uint8_t version, EncodedFrame* out) {
  const std::string context = fmt::format("{} request", OpcodeName(op));
  KVPORT_RETURN_IF_ERROR(CheckAnyNamespaceToEncode(context, any_namespace, ns, version));
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(context, keys.size(), l));
  size_t bytes = 8 + ns.size();
  for (std::string_view key : keys)
    bytes += 2 + key.size();
  BeginFrame(out, bytes);
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
  size_t bytes = 16 + m.ns.size();
  for (const MsetItem& item : m.items)
    bytes += MsetItemFixedBytes(version) + item.key.size() + item.meta.size();
  BeginFrame(out, bytes);
  WireWriter w(&out->head);
  KVPORT_RETURN_IF_ERROR(WriteMsetDescriptor(w, "MSET request", m.ns, m.ttl_seconds, m.items, l,
                                             version, &out->payloads));
  return FinishFrame(Opcode::kMset, 0, request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     MsetRequest* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kMset, /*response=*/false));
  WireReader r(descriptor, "MSET request");
  uint64_t payload = 0;
  KVPORT_RETURN_IF_ERROR(
      ReadMsetDescriptor(r, l, h.version, &out->ns, &out->ttl_seconds, &out->items, &payload));
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
  size_t bytes = 8 + m.ns.size();
  for (const MgetKey& key : m.keys)
    bytes += 10 + key.key.size();
  BeginFrame(out, bytes);
  WireWriter w(&out->head);
  KVPORT_RETURN_IF_ERROR(
      WriteMgetDescriptor(w, "MGET request", m.ns, m.keys, m.any_namespace, l, version));
  return FinishFrame(Opcode::kMget,
                     (m.meta_only ? kFlagMetaOnly : 0) | AnyNamespaceFlag(m.any_namespace),
                     request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     MgetRequest* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kMget, /*response=*/false));
  WireReader r(descriptor, "MGET request");
  out->meta_only = h.meta_only();
  out->any_namespace = h.any_namespace();
  return ReadMgetDescriptor(r, h, l, &out->ns, &out->keys);
}

BatchStatus MgetResponse::overall() const {
  return internal::OverallOf(results);
}

Status EncodeResponse(uint64_t request_id, const MgetResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "MGET response";
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(kContext, m.results.size(), l));
  const bool checksums = CarriesChecksums(version);
  size_t bytes = 5;
  for (const MgetResult& res : m.results)
    bytes += MgetResultFixedBytes(version) + res.meta.size();
  BeginFrame(out, bytes);
  if (!m.meta_only) out->payloads.reserve(m.results.size());
  WireWriter w(&out->head);
  w.PutU8(static_cast<uint8_t>(m.overall()));
  w.PutU32(static_cast<uint32_t>(m.results.size()));
  for (size_t i = 0; i < m.results.size(); ++i) {
    const MgetResult& res = m.results[i];
    KVPORT_RETURN_IF_ERROR(
        CheckResultToEncode(kContext, i, res.status, res.meta, res.value_length, res.checksum, l));
    const bool carried = m.CarriesPayload(i);
    if (carried && res.value == nullptr && res.value_length != 0)
      return ItemError(kContext, i,
                       Status::InvalidArgument(
                           fmt::format("value is null but value_length is {}", res.value_length)));
    w.PutU8(static_cast<uint8_t>(res.status));
    w.PutU32(static_cast<uint32_t>(res.meta.size()));
    w.PutU64(res.value_length);
    if (checksums) w.PutU64(res.checksum);
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
  KVPORT_RETURN_IF_ERROR(ReadCount(r, l, MgetResultFixedBytes(h.version), &count));
  out->results.resize(count);
  const bool checksums = CarriesChecksums(h.version);
  uint64_t payload = 0;
  for (uint32_t i = 0; i < count; ++i) {
    MgetResult& res = out->results[i];
    uint32_t meta_length = 0;
    KVPORT_RETURN_IF_ERROR(ReadStatusCode(r, i, &res.status));
    KVPORT_RETURN_IF_ERROR(r.ReadU32("meta_length", &meta_length));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("value_length", &res.value_length));
    res.checksum = 0;  // the result may be reused from an earlier decode
    if (checksums) KVPORT_RETURN_IF_ERROR(r.ReadU64("checksum", &res.checksum));
    KVPORT_RETURN_IF_ERROR(
        CheckResultDecoded(r, i, res.status, meta_length, res.value_length, res.checksum, l));
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
  return internal::OverallOf(results);
}

Status EncodeResponse(uint64_t request_id, const MexistResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "MEXIST response";
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(kContext, m.results.size(), l));
  BeginFrame(out, 5 + 9 * m.results.size());
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
