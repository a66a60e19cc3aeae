// SPDX-License-Identifier: Apache-2.0
// HELLO, PING, STATS, LIST and ERROR, the batch-status helpers, and opcode dispatch.
// (NODE_INFO, SHM_ATTACH and the ARENA_* opcodes of version 3 are in arena_codec.cc.)
#include <fmt/core.h>

#include <algorithm>
#include <type_traits>

#include "protocol/codec_util.h"
#include "protocol/messages.h"

namespace kvport::protocol {

using internal::BeginFrame;
using internal::CheckFrameFor;
using internal::FinishFrame;
using internal::IsKnownStatusCode;
using internal::ItemError;
using internal::ReadCount;
using internal::ReadKey;
using internal::ReadListCount;
using internal::ReadName;
using internal::ReadNamespace;
using internal::WriteName;
using internal::WriteNamespace;

namespace {

Status CheckVersionRange(std::string_view context, uint8_t min_version, uint8_t max_version,
                         StatusCode code) {
  if (min_version < 1 || min_version > max_version)
    return Status(code, fmt::format("{}: version range {}..{} is empty or starts below 1", context,
                                    min_version, max_version));
  return Status::Ok();
}

// The limits in a HELLO response, in wire order.
uint64_t* LimitField(Limits& l, int i) {
  uint64_t* fields[] = {&l.max_key_bytes,   &l.max_namespace_bytes, &l.max_meta_bytes,
                        &l.max_value_bytes, &l.max_batch_keys,      &l.max_frame_bytes};
  return fields[i];
}
constexpr std::string_view kLimitNames[] = {"max_key_bytes",  "max_namespace_bytes",
                                            "max_meta_bytes", "max_value_bytes",
                                            "max_batch_keys", "max_frame_bytes"};
constexpr int kLimitCount = 6;

}  // namespace

std::string_view BatchStatusName(BatchStatus s) {
  switch (s) {
    case BatchStatus::kOk:
      return "OK";
    case BatchStatus::kPartial:
      return "PARTIAL";
    case BatchStatus::kFailed:
      return "FAILED";
  }
  return "UNKNOWN";
}

BatchStatus OverallStatus(const std::vector<StatusCode>& codes) {
  size_t ok = 0;
  for (StatusCode c : codes)
    ok += c == StatusCode::kOk;
  return internal::OverallFromCounts(ok, codes.size());
}

// ---- HELLO -------------------------------------------------------------------------------

Result<uint8_t> NegotiateVersion(const HelloRequest& request) {
  const uint8_t low = std::max(request.min_version, kMinProtocolVersion);
  const uint8_t high = std::min(request.max_version, kMaxProtocolVersion);
  if (request.min_version > request.max_version || low > high)
    return Status::NotSupported(fmt::format(
        "no common protocol version: the client speaks {}..{}, this server {}..{}",
        request.min_version, request.max_version, kMinProtocolVersion, kMaxProtocolVersion));
  return high;
}

Status EncodeRequest(uint64_t request_id, const HelloRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t /*version*/) {
  constexpr std::string_view kContext = "HELLO request";
  KVPORT_RETURN_IF_ERROR(
      CheckVersionRange(kContext, m.min_version, m.max_version, StatusCode::kInvalidArgument));
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU8(m.min_version);
  w.PutU8(m.max_version);
  KVPORT_RETURN_IF_ERROR(WriteName(w, kContext, "client_name", m.client_name));
  if (!m.token.empty()) {
    if (m.max_version < kAccessVersion)
      return Status::InvalidArgument(fmt::format("{}: a token needs max_version {} or more, got {}",
                                                 kContext, kAccessVersion, m.max_version));
    KVPORT_RETURN_IF_ERROR(WriteName(w, kContext, "token", m.token));
  }
  return FinishFrame(Opcode::kHello, 0, request_id, l, kHelloVersion, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits&,
                     HelloRequest* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kHello, /*response=*/false));
  WireReader r(descriptor, "HELLO request");
  KVPORT_RETURN_IF_ERROR(r.ReadU8("min_version", &out->min_version));
  KVPORT_RETURN_IF_ERROR(r.ReadU8("max_version", &out->max_version));
  KVPORT_RETURN_IF_ERROR(ReadName(r, "client_name", &out->client_name));
  out->token = {};
  if (r.remaining() > 0 && out->max_version >= kAccessVersion) {
    KVPORT_RETURN_IF_ERROR(ReadName(r, "token", &out->token));
    if (out->token.empty()) return r.Error(StatusCode::kCorruption, "empty token");
  }
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  return CheckVersionRange("HELLO request", out->min_version, out->max_version,
                           StatusCode::kInvalidArgument);
}

Status EncodeResponse(uint64_t request_id, const HelloResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t /*version*/) {
  constexpr std::string_view kContext = "HELLO response";
  if (m.version < kMinProtocolVersion || m.version > kMaxProtocolVersion)
    return Status::InvalidArgument(
        fmt::format("{}: version {} is not one this build speaks", kContext, m.version));
  Status valid = ValidateLimits(m.limits);
  if (!valid.ok()) return valid.WithContext(kContext);
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU8(m.version);
  Limits announced = m.limits;
  for (int i = 0; i < kLimitCount; ++i)
    w.PutU64(*LimitField(announced, i));
  KVPORT_RETURN_IF_ERROR(WriteName(w, kContext, "server_name", m.server_name));
  if (m.version >= kDefaultNamespaceVersion) {
    w.PutU8(m.default_namespace.has_value() ? 1 : 0);
    if (m.default_namespace)
      KVPORT_RETURN_IF_ERROR(WriteNamespace(w, *m.default_namespace, m.limits, kContext));
  } else if (m.default_namespace) {
    return Status::NotSupported(
        fmt::format("{}: version {} cannot carry a default namespace", kContext, m.version));
  }
  return FinishFrame(Opcode::kHello, kFlagResponse, request_id, l, kHelloVersion, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits&,
                      HelloResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kHello, /*response=*/true));
  WireReader r(descriptor, "HELLO response");
  KVPORT_RETURN_IF_ERROR(r.ReadU8("version", &out->version));
  // First: what follows depends on the version.
  if (out->version < kMinProtocolVersion || out->version > kMaxProtocolVersion)
    return r.Error(StatusCode::kNotSupported,
                   fmt::format("server chose version {}; this build speaks {}..{}", out->version,
                               kMinProtocolVersion, kMaxProtocolVersion));
  for (int i = 0; i < kLimitCount; ++i)
    KVPORT_RETURN_IF_ERROR(r.ReadU64(kLimitNames[i], LimitField(out->limits, i)));
  KVPORT_RETURN_IF_ERROR(ReadName(r, "server_name", &out->server_name));
  out->default_namespace.reset();
  if (out->version >= kDefaultNamespaceVersion) {
    uint8_t present = 0;
    KVPORT_RETURN_IF_ERROR(r.ReadU8("default_namespace present", &present));
    if (present > 1)
      return r.Error(StatusCode::kCorruption, "default_namespace present is not 0 or 1");
    if (present == 1) {
      std::string_view ns;
      KVPORT_RETURN_IF_ERROR(ReadNamespace(r, out->limits, &ns));
      out->default_namespace = ns;
    }
  }
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  Status valid = ValidateLimits(out->limits);
  if (!valid.ok()) return r.Error(StatusCode::kCorruption, "unusable limits: " + valid.message());
  return Status::Ok();
}

// ---- PING / STATS ------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const PingRequest&, const Limits& l, EncodedFrame* out,
                     uint8_t version) {
  BeginFrame(out);
  return FinishFrame(Opcode::kPing, 0, request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits&,
                     PingRequest*) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kPing, /*response=*/false));
  return WireReader(descriptor, "PING request").ExpectEnd();
}

Status EncodeResponse(uint64_t request_id, const PingResponse&, const Limits& l, EncodedFrame* out,
                      uint8_t version) {
  BeginFrame(out);
  return FinishFrame(Opcode::kPing, kFlagResponse, request_id, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits&,
                      PingResponse*) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kPing, /*response=*/true));
  return WireReader(descriptor, "PING response").ExpectEnd();
}

// Version 4 STATS request: u8 from_start, namespace after, u32 max_namespaces.
Status EncodeRequest(uint64_t request_id, const StatsRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t version) {
  constexpr std::string_view kContext = "STATS request";
  BeginFrame(out);
  if (version >= kAccessVersion) {
    if (m.from_start && !m.after.empty())
      return Status::InvalidArgument("STATS request: `after` is set but from_start is too");
    WireWriter w(&out->head);
    w.PutU8(m.from_start ? 1 : 0);
    KVPORT_RETURN_IF_ERROR(WriteNamespace(w, m.after, l, kContext));
    w.PutU32(m.max_namespaces);
  } else if (!m.from_start || m.max_namespaces != 0) {
    return Status::NotSupported(fmt::format(
        "STATS request: pages of namespaces need protocol version {}, the connection has {}",
        kAccessVersion, version));
  }
  return FinishFrame(Opcode::kStats, 0, request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     StatsRequest* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kStats, /*response=*/false));
  WireReader r(descriptor, "STATS request");
  *out = StatsRequest{};
  if (h.version >= kAccessVersion) {
    uint8_t from_start = 0;
    KVPORT_RETURN_IF_ERROR(r.ReadU8("from_start", &from_start));
    if (from_start > 1)
      return r.Error(StatusCode::kCorruption, fmt::format("from_start is {}", from_start));
    out->from_start = from_start == 1;
    KVPORT_RETURN_IF_ERROR(ReadNamespace(r, l, &out->after));
    KVPORT_RETURN_IF_ERROR(r.ReadU32("max_namespaces", &out->max_namespaces));
    if (out->from_start && !out->after.empty())
      return r.Error(StatusCode::kCorruption, "`after` is set but from_start is too");
  }
  return r.ExpectEnd();
}

Status EncodeResponse(uint64_t request_id, const StatsResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "STATS response";
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU32(static_cast<uint32_t>(m.counters.size()));
  for (size_t i = 0; i < m.counters.size(); ++i) {
    const StatsCounter& c = m.counters[i];
    if (c.name.empty())
      return ItemError(kContext, i, Status::InvalidArgument("counter with an empty name"));
    KVPORT_RETURN_IF_ERROR(WriteName(w, kContext, "counter name", c.name));
    w.PutU64(c.value);
  }
  w.PutU32(static_cast<uint32_t>(m.namespaces.size()));
  for (const NamespaceUsage& u : m.namespaces) {
    KVPORT_RETURN_IF_ERROR(WriteNamespace(w, u.ns, l, kContext));
    w.PutU64(u.objects);
    w.PutU64(u.bytes);
  }
  if (version >= kAccessVersion) {
    w.PutU8(m.more ? 1 : 0);
  } else if (m.more) {
    return Status::NotSupported(
        fmt::format("STATS response: `more` needs protocol version {}, the connection has {}",
                    kAccessVersion, version));
  }
  return FinishFrame(Opcode::kStats, kFlagResponse, request_id, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      StatsResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kStats, /*response=*/true));
  WireReader r(descriptor, "STATS response");
  uint32_t count = 0;
  KVPORT_RETURN_IF_ERROR(ReadListCount(r, "counter_count", 1 + 1 + 8, &count));
  out->counters.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    StatsCounter& c = out->counters[i];
    KVPORT_RETURN_IF_ERROR(ReadName(r, "counter_name", &c.name));
    if (c.name.empty())
      return r.Error(StatusCode::kCorruption, fmt::format("counter {} has an empty name", i));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("counter_value", &c.value));
  }
  KVPORT_RETURN_IF_ERROR(ReadListCount(r, "namespace_count", 1 + 8 + 8, &count));
  out->namespaces.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    NamespaceUsage& u = out->namespaces[i];
    KVPORT_RETURN_IF_ERROR(ReadNamespace(r, l, &u.ns));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("objects", &u.objects));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("bytes", &u.bytes));
  }
  out->more = false;
  if (h.version >= kAccessVersion) {
    uint8_t more = 0;
    KVPORT_RETURN_IF_ERROR(r.ReadU8("more", &more));
    if (more > 1) return r.Error(StatusCode::kCorruption, fmt::format("more is {}", more));
    out->more = more == 1;
  }
  return r.ExpectEnd();
}

// ---- LIST --------------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const ListRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t version) {
  constexpr std::string_view kContext = "LIST request";
  if (m.max_keys == 0) return Status::InvalidArgument("LIST request: max_keys is 0");
  Status s = CheckBatchCount(m.max_keys, l);
  if (!s.ok()) return s.WithContext(kContext);
  BeginFrame(out);
  WireWriter w(&out->head);
  KVPORT_RETURN_IF_ERROR(WriteNamespace(w, m.ns, l, kContext));
  w.PutU64(m.cursor);
  w.PutU32(m.max_keys);
  return FinishFrame(Opcode::kList, 0, request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     ListRequest* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kList, /*response=*/false));
  WireReader r(descriptor, "LIST request");
  KVPORT_RETURN_IF_ERROR(ReadNamespace(r, l, &out->ns));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("cursor", &out->cursor));
  KVPORT_RETURN_IF_ERROR(r.ReadU32("max_keys", &out->max_keys));
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  if (out->max_keys == 0) return r.Error(StatusCode::kInvalidArgument, "max_keys is 0");
  if (out->max_keys > l.max_batch_keys)
    return r.Error(StatusCode::kTooLarge, fmt::format("max_keys {} exceeds max_batch_keys {}",
                                                      out->max_keys, l.max_batch_keys));
  return Status::Ok();
}

Status EncodeResponse(uint64_t request_id, const ListResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "LIST response";
  Status s = CheckBatchCount(m.keys.size(), l);
  if (!s.ok()) return s.WithContext(kContext);
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU64(m.next_cursor);
  w.PutU32(static_cast<uint32_t>(m.keys.size()));
  for (size_t i = 0; i < m.keys.size(); ++i) {
    Status k = CheckKey(m.keys[i], l);
    if (!k.ok()) return ItemError(kContext, i, k);
    w.PutU16(static_cast<uint16_t>(m.keys[i].size()));
    w.PutBytes(m.keys[i]);
  }
  return FinishFrame(Opcode::kList, kFlagResponse, request_id, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      ListResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kList, /*response=*/true));
  WireReader r(descriptor, "LIST response");
  uint32_t count = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU64("next_cursor", &out->next_cursor));
  KVPORT_RETURN_IF_ERROR(ReadCount(r, l, 2 + 1, &count));
  out->keys.resize(count);
  for (uint32_t i = 0; i < count; ++i)
    KVPORT_RETURN_IF_ERROR(ReadKey(r, l, i, &out->keys[i]));
  return r.ExpectEnd();
}

// ---- ERROR -------------------------------------------------------------------------------

Status EncodeResponse(uint64_t request_id, const ErrorResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t /*version*/) {
  const uint8_t code = static_cast<uint8_t>(m.code);
  if (m.code == StatusCode::kOk || !IsKnownStatusCode(code))
    return Status::InvalidArgument(
        fmt::format("ERROR response: code {} is not a known error code", code));
  const std::string_view message = m.message.substr(0, kMaxErrorMessageBytes);
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU8(code);
  w.PutU16(static_cast<uint16_t>(message.size()));
  w.PutBytes(message);
  return FinishFrame(Opcode::kError, kFlagResponse, request_id, l, kHelloVersion, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits&,
                      ErrorResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kError, /*response=*/true));
  WireReader r(descriptor, "ERROR response");
  uint8_t code = 0;
  uint16_t length = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU8("code", &code));
  if (code == 0 || !IsKnownStatusCode(code))
    return r.Error(StatusCode::kCorruption, fmt::format("code {} is not a known error code", code));
  KVPORT_RETURN_IF_ERROR(r.ReadU16("message_length", &length));
  if (length > kMaxErrorMessageBytes)
    return r.Error(StatusCode::kTooLarge,
                   fmt::format("message_length {} exceeds {}", length, kMaxErrorMessageBytes));
  KVPORT_RETURN_IF_ERROR(r.ReadBytes("message", length, &out->message));
  out->code = static_cast<StatusCode>(code);
  return r.ExpectEnd();
}

// ---- Dispatch ----------------------------------------------------------------------------

namespace {

// The batched requests' decoders set every field, so a variant already holding one is decoded
// into as it is: its lists keep their capacity (a session decodes without allocating).
template <typename T>
constexpr bool kDecodedInPlace = std::is_same_v<T, MsetRequest> || std::is_same_v<T, MgetRequest> ||
                                 std::is_same_v<T, MexistRequest> || std::is_same_v<T, MdelRequest>;

template <typename T, bool kResponse, typename Variant>
Status DecodeAs(const FrameHeader& h, std::string_view descriptor, const Limits& l, Variant* out) {
  T* message = kDecodedInPlace<T> ? std::get_if<T>(out) : nullptr;
  if (message == nullptr) message = &out->template emplace<T>();
  if constexpr (kResponse) {
    return DecodeResponse(h, descriptor, l, message);
  } else {
    return DecodeRequest(h, descriptor, l, message);
  }
}

}  // namespace

Status DecodeAnyRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                        AnyRequest* out) {
  if (h.is_response())
    return Status::InvalidArgument(
        fmt::format("a {} response where a request was expected", OpcodeName(h.opcode)));
  switch (h.opcode) {
    case Opcode::kHello:
      return DecodeAs<HelloRequest, false>(h, descriptor, l, out);
    case Opcode::kPing:
      return DecodeAs<PingRequest, false>(h, descriptor, l, out);
    case Opcode::kStats:
      return DecodeAs<StatsRequest, false>(h, descriptor, l, out);
    case Opcode::kMset:
      return DecodeAs<MsetRequest, false>(h, descriptor, l, out);
    case Opcode::kMget:
      return DecodeAs<MgetRequest, false>(h, descriptor, l, out);
    case Opcode::kMexist:
      return DecodeAs<MexistRequest, false>(h, descriptor, l, out);
    case Opcode::kMdel:
      return DecodeAs<MdelRequest, false>(h, descriptor, l, out);
    case Opcode::kList:
      return DecodeAs<ListRequest, false>(h, descriptor, l, out);
    case Opcode::kNodeInfo:
      return DecodeAs<NodeInfoRequest, false>(h, descriptor, l, out);
    case Opcode::kShmAttach:
      return DecodeAs<ShmAttachRequest, false>(h, descriptor, l, out);
    case Opcode::kArenaReserve:
      return DecodeAs<ArenaReserveRequest, false>(h, descriptor, l, out);
    case Opcode::kArenaCommit:
      return DecodeAs<ArenaCommitRequest, false>(h, descriptor, l, out);
    case Opcode::kArenaGet:
      return DecodeAs<ArenaGetRequest, false>(h, descriptor, l, out);
    case Opcode::kArenaRelease:
      return DecodeAs<ArenaReleaseRequest, false>(h, descriptor, l, out);
    case Opcode::kUcxAttach:
      return DecodeAs<UcxAttachRequest, false>(h, descriptor, l, out);
    case Opcode::kError:
      break;
  }
  return Status::InvalidArgument(
      fmt::format("opcode {} is not a request", static_cast<int>(h.opcode)));
}

Status DecodeAnyResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                         AnyResponse* out) {
  if (!h.is_response())
    return Status::InvalidArgument(
        fmt::format("a {} request where a response was expected", OpcodeName(h.opcode)));
  switch (h.opcode) {
    case Opcode::kHello:
      return DecodeAs<HelloResponse, true>(h, descriptor, l, out);
    case Opcode::kPing:
      return DecodeAs<PingResponse, true>(h, descriptor, l, out);
    case Opcode::kStats:
      return DecodeAs<StatsResponse, true>(h, descriptor, l, out);
    case Opcode::kMset:
      return DecodeAs<MsetResponse, true>(h, descriptor, l, out);
    case Opcode::kMget:
      return DecodeAs<MgetResponse, true>(h, descriptor, l, out);
    case Opcode::kMexist:
      return DecodeAs<MexistResponse, true>(h, descriptor, l, out);
    case Opcode::kMdel:
      return DecodeAs<MdelResponse, true>(h, descriptor, l, out);
    case Opcode::kList:
      return DecodeAs<ListResponse, true>(h, descriptor, l, out);
    case Opcode::kNodeInfo:
      return DecodeAs<NodeInfoResponse, true>(h, descriptor, l, out);
    case Opcode::kShmAttach:
      return DecodeAs<ShmAttachResponse, true>(h, descriptor, l, out);
    case Opcode::kArenaReserve:
      return DecodeAs<ArenaReserveResponse, true>(h, descriptor, l, out);
    case Opcode::kArenaCommit:
      return DecodeAs<ArenaCommitResponse, true>(h, descriptor, l, out);
    case Opcode::kArenaGet:
      return DecodeAs<ArenaGetResponse, true>(h, descriptor, l, out);
    case Opcode::kArenaRelease:
      return DecodeAs<ArenaReleaseResponse, true>(h, descriptor, l, out);
    case Opcode::kUcxAttach:
      return DecodeAs<UcxAttachResponse, true>(h, descriptor, l, out);
    case Opcode::kError:
      return DecodeAs<ErrorResponse, true>(h, descriptor, l, out);
  }
  return Status::InvalidArgument(
      fmt::format("opcode {} is not a response", static_cast<int>(h.opcode)));
}

}  // namespace kvport::protocol
