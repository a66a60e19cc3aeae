// SPDX-License-Identifier: Apache-2.0
// Version 3: NODE_INFO and the shared-memory opcodes SHM_ATTACH, ARENA_RESERVE, ARENA_COMMIT,
// ARENA_GET and ARENA_RELEASE. None carries a payload; ARENA_RESERVE and ARENA_GET requests reuse
// the MSET and MGET request descriptors, ARENA_COMMIT responses the MSET response layout. From
// kChecksumVersion on, ARENA_RESERVE items (as MSET items), ARENA_COMMIT requests and ARENA_GET
// results carry value checksums.
#include <fmt/core.h>

#include <string>

#include "protocol/codec_util.h"
#include "protocol/messages.h"

namespace kvport::protocol {

using internal::AnyNamespaceFlag;
using internal::BeginFrame;
using internal::CarriesChecksums;
using internal::CheckBatchToEncode;
using internal::CheckFrameFor;
using internal::CheckOverall;
using internal::CheckResultDecoded;
using internal::CheckResultToEncode;
using internal::CheckStatusToEncode;
using internal::CheckVersionToEncode;
using internal::DecodeEmpty;
using internal::DecodeStatuses;
using internal::EncodeEmpty;
using internal::EncodeStatuses;
using internal::FinishFrame;
using internal::IsKnownStatusCode;
using internal::ItemError;
using internal::ReadCount;
using internal::ReadMgetDescriptor;
using internal::ReadMsetDescriptor;
using internal::ReadName;
using internal::ReadOverall;
using internal::ReadResponseStatus;
using internal::ReadStatusCode;
using internal::WriteMgetDescriptor;
using internal::WriteMsetDescriptor;
using internal::WriteName;

namespace {

// Smallest encoding of one item, used to bound counts.
constexpr uint64_t kReservationBytes = 1 + 8;
constexpr uint64_t kLeaseIdBytes = 8;

// Bytes of one ARENA_COMMIT item in a frame of `version`: its commit byte and, from
// kChecksumVersion on, its u64 checksum (in the checksum table after the commit bytes).
constexpr uint64_t CommitItemBytes(uint8_t version) {
  return CarriesChecksums(version) ? 1 + 8 : 1;
}
// Bytes of one ARENA_GET result in a frame of `version`, without its meta: u8 status, u32
// meta_len, u64 value_len, u64 offset and, from kChecksumVersion on, u64 checksum.
constexpr uint64_t ArenaGetResultFixedBytes(uint8_t version) {
  return CarriesChecksums(version) ? 1 + 4 + 8 + 8 + 8 : 1 + 4 + 8 + 8;
}

// The id rule of ARENA_RESERVE and ARENA_GET responses: an id (reservation, lease) iff some item is
// kOk.
bool IdAgrees(uint64_t id, size_t ok) {
  return (id != 0) == (ok != 0);
}

// The offset rule of ARENA_RESERVE and ARENA_GET items: an arena offset only for kOk. As the
// encoders' InvalidArgument and the decoders' Corruption.
Status CheckOffsetToEncode(std::string_view context, size_t i, StatusCode status, uint64_t offset) {
  if (status == StatusCode::kOk || offset == 0) return Status::Ok();
  return ItemError(context, i,
                   Status::InvalidArgument(
                       fmt::format("status {} with offset {}", StatusCodeName(status), offset)));
}

Status CheckOffsetDecoded(const WireReader& r, size_t i, StatusCode status, uint64_t offset) {
  if (status == StatusCode::kOk || offset == 0) return Status::Ok();
  return r.Error(StatusCode::kCorruption, fmt::format("item {}: status {} with offset {}", i,
                                                      StatusCodeName(status), offset));
}

// [offset, offset + length) within [0, arena_bytes), without overflow.
bool WithinArena(uint64_t offset, uint64_t length, uint64_t arena_bytes) {
  return offset <= arena_bytes && length <= arena_bytes - offset;
}

}  // namespace

// ---- NODE_INFO ---------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const NodeInfoRequest&, const Limits& l,
                     EncodedFrame* out, uint8_t version) {
  return EncodeEmpty(Opcode::kNodeInfo, request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits&,
                     NodeInfoRequest*) {
  return DecodeEmpty(Opcode::kNodeInfo, h, descriptor);
}

Status EncodeResponse(uint64_t request_id, const NodeInfoResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "NODE_INFO response";
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(Opcode::kNodeInfo, /*response=*/true, version));
  if (m.unix_path.size() > kMaxUnixPathBytes)
    return Status::InvalidArgument(fmt::format("{}: unix_path of {} bytes exceeds {}", kContext,
                                               m.unix_path.size(), kMaxUnixPathBytes));
  if ((m.offers & kOfferSharedMemory) != 0 && m.unix_path.empty())
    return Status::InvalidArgument(
        fmt::format("{}: offers shared memory without a unix_path", kContext));
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU64(m.node_id);
  w.PutU32(m.offers);
  KVPORT_RETURN_IF_ERROR(WriteName(w, kContext, "host_id", m.host_id));
  w.PutU16(static_cast<uint16_t>(m.unix_path.size()));
  w.PutBytes(m.unix_path);
  return FinishFrame(Opcode::kNodeInfo, kFlagResponse, request_id, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits&,
                      NodeInfoResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kNodeInfo, /*response=*/true));
  WireReader r(descriptor, "NODE_INFO response");
  uint16_t path_length = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU64("node_id", &out->node_id));
  KVPORT_RETURN_IF_ERROR(r.ReadU32("offers", &out->offers));
  KVPORT_RETURN_IF_ERROR(ReadName(r, "host_id", &out->host_id));
  KVPORT_RETURN_IF_ERROR(r.ReadU16("unix_path_length", &path_length));
  if (path_length > kMaxUnixPathBytes)
    return r.Error(StatusCode::kTooLarge,
                   fmt::format("unix_path_length {} exceeds {}", path_length, kMaxUnixPathBytes));
  KVPORT_RETURN_IF_ERROR(r.ReadBytes("unix_path", path_length, &out->unix_path));
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  if ((out->offers & kOfferSharedMemory) != 0 && out->unix_path.empty())
    return r.Error(StatusCode::kCorruption, "offers shared memory without a unix_path");
  return Status::Ok();
}

// ---- SHM_ATTACH --------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const ShmAttachRequest&, const Limits& l,
                     EncodedFrame* out, uint8_t version) {
  return EncodeEmpty(Opcode::kShmAttach, request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits&,
                     ShmAttachRequest*) {
  return DecodeEmpty(Opcode::kShmAttach, h, descriptor);
}

Status EncodeResponse(uint64_t request_id, const ShmAttachResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "SHM_ATTACH response";
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(Opcode::kShmAttach, /*response=*/true, version));
  const uint8_t code = static_cast<uint8_t>(m.status);
  if (!IsKnownStatusCode(code))
    return Status::InvalidArgument(fmt::format("{}: unknown status code {}", kContext, code));
  const std::string_view reason = m.reason.substr(0, kMaxErrorMessageBytes);
  if (m.status == StatusCode::kOk && (m.arena_bytes == 0 || !reason.empty()))
    return Status::InvalidArgument(
        fmt::format("{}: OK with arena_bytes {} and a reason of {} bytes; it needs arena_bytes > 0 "
                    "and no reason",
                    kContext, m.arena_bytes, reason.size()));
  if (m.status != StatusCode::kOk && (m.arena_bytes != 0 || reason.empty()))
    return Status::InvalidArgument(
        fmt::format("{}: status {} with arena_bytes {} and a reason of {} bytes; it needs "
                    "arena_bytes 0 and a reason",
                    kContext, StatusCodeName(m.status), m.arena_bytes, reason.size()));
  if (m.status != StatusCode::kOk && (m.lease_word_offset != 0 || m.lease_generation != 0))
    return Status::InvalidArgument(fmt::format("{}: a lease word without OK", kContext));
  if (m.lease_word_offset % 8 != 0)
    return Status::InvalidArgument(fmt::format("{}: lease_word_offset {} is not 8-byte aligned",
                                               kContext, m.lease_word_offset));
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU8(code);
  w.PutU64(m.arena_bytes);
  if (version >= kLeaseWordVersion) {
    w.PutU64(m.lease_word_offset);
    w.PutU64(m.lease_generation);
  }
  w.PutU16(static_cast<uint16_t>(reason.size()));
  w.PutBytes(reason);
  return FinishFrame(Opcode::kShmAttach, kFlagResponse, request_id, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits&,
                      ShmAttachResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kShmAttach, /*response=*/true));
  WireReader r(descriptor, "SHM_ATTACH response");
  uint16_t length = 0;
  KVPORT_RETURN_IF_ERROR(ReadResponseStatus(r, &out->status));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("arena_bytes", &out->arena_bytes));
  out->lease_word_offset = 0;
  out->lease_generation = 0;
  if (h.version >= kLeaseWordVersion) {
    KVPORT_RETURN_IF_ERROR(r.ReadU64("lease_word_offset", &out->lease_word_offset));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("lease_generation", &out->lease_generation));
    if (out->lease_word_offset % 8 != 0)
      return r.Error(
          StatusCode::kCorruption,
          fmt::format("lease_word_offset {} is not 8-byte aligned", out->lease_word_offset));
    if (out->status != StatusCode::kOk &&
        (out->lease_word_offset != 0 || out->lease_generation != 0))
      return r.Error(StatusCode::kCorruption, "a lease word without OK");
  }
  KVPORT_RETURN_IF_ERROR(r.ReadU16("reason_length", &length));
  if (length > kMaxErrorMessageBytes)
    return r.Error(StatusCode::kTooLarge,
                   fmt::format("reason_length {} exceeds {}", length, kMaxErrorMessageBytes));
  KVPORT_RETURN_IF_ERROR(r.ReadBytes("reason", length, &out->reason));
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  if (out->status == StatusCode::kOk && (out->arena_bytes == 0 || length != 0))
    return r.Error(StatusCode::kCorruption,
                   fmt::format("OK with arena_bytes {} and reason_length {}; it needs "
                               "arena_bytes > 0 and no reason",
                               out->arena_bytes, length));
  if (out->status != StatusCode::kOk && (out->arena_bytes != 0 || length == 0))
    return r.Error(StatusCode::kCorruption,
                   fmt::format("status {} with arena_bytes {} and reason_length {}; it needs "
                               "arena_bytes 0 and a reason",
                               StatusCodeName(out->status), out->arena_bytes, length));
  return Status::Ok();
}

// ---- ARENA_RESERVE -------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const ArenaReserveRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version) {
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(Opcode::kArenaReserve, /*response=*/false, version));
  BeginFrame(out);
  WireWriter w(&out->head);
  // From kChecksumVersion on the items carry MsetItem::checksum as MSET's do (one item layout for
  // both); the node ignores it here, the checksums that count come with ARENA_COMMIT.
  KVPORT_RETURN_IF_ERROR(WriteMsetDescriptor(w, "ARENA_RESERVE request", m.ns, m.ttl_seconds,
                                             m.items, l, version, /*payloads=*/nullptr));
  return FinishFrame(Opcode::kArenaReserve, 0, request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     ArenaReserveRequest* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kArenaReserve, /*response=*/false));
  WireReader r(descriptor, "ARENA_RESERVE request");
  uint64_t value_bytes = 0;  // no payload: the values go to the arena, not over the socket
  return ReadMsetDescriptor(r, l, h.version, &out->ns, &out->ttl_seconds, &out->items,
                            &value_bytes);
}

BatchStatus ArenaReserveResponse::overall() const {
  return internal::OverallOf(items);
}

Status EncodeResponse(uint64_t request_id, const ArenaReserveResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "ARENA_RESERVE response";
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(Opcode::kArenaReserve, /*response=*/true, version));
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(kContext, m.items.size(), l));
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU8(static_cast<uint8_t>(m.overall()));
  w.PutU64(m.reservation_id);
  w.PutU32(static_cast<uint32_t>(m.items.size()));
  size_t ok = 0;
  for (size_t i = 0; i < m.items.size(); ++i) {
    const ArenaReservation& item = m.items[i];
    KVPORT_RETURN_IF_ERROR(CheckStatusToEncode(kContext, i, item.status));
    KVPORT_RETURN_IF_ERROR(CheckOffsetToEncode(kContext, i, item.status, item.offset));
    ok += item.status == StatusCode::kOk;
    w.PutU8(static_cast<uint8_t>(item.status));
    w.PutU64(item.offset);
  }
  if (!IdAgrees(m.reservation_id, ok))
    return Status::InvalidArgument(
        fmt::format("{}: reservation_id {} with {} reserved items; it is non-zero iff one is",
                    kContext, m.reservation_id, ok));
  return FinishFrame(Opcode::kArenaReserve, kFlagResponse, request_id, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      ArenaReserveResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kArenaReserve, /*response=*/true));
  WireReader r(descriptor, "ARENA_RESERVE response");
  BatchStatus overall = BatchStatus::kOk;
  uint32_t count = 0;
  KVPORT_RETURN_IF_ERROR(ReadOverall(r, &overall));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("reservation_id", &out->reservation_id));
  KVPORT_RETURN_IF_ERROR(ReadCount(r, l, kReservationBytes, &count));
  out->items.resize(count);
  size_t ok = 0;
  for (uint32_t i = 0; i < count; ++i) {
    ArenaReservation& item = out->items[i];
    KVPORT_RETURN_IF_ERROR(ReadStatusCode(r, i, &item.status));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("offset", &item.offset));
    KVPORT_RETURN_IF_ERROR(CheckOffsetDecoded(r, i, item.status, item.offset));
    ok += item.status == StatusCode::kOk;
  }
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  KVPORT_RETURN_IF_ERROR(CheckOverall(r, overall, out->overall()));
  if (!IdAgrees(out->reservation_id, ok))
    return r.Error(
        StatusCode::kCorruption,
        fmt::format("reservation_id {} with {} reserved items; it is non-zero iff one is",
                    out->reservation_id, ok));
  return Status::Ok();
}

Status CheckArenaReserveResponse(const ArenaReserveRequest& request,
                                 const ArenaReserveResponse& response, uint64_t arena_bytes) {
  if (response.items.size() != request.items.size())
    return Status::Corruption(fmt::format("ARENA_RESERVE response: {} reservations for {} items",
                                          response.items.size(), request.items.size()));
  for (size_t i = 0; i < response.items.size(); ++i) {
    const ArenaReservation& item = response.items[i];
    const uint64_t length = request.items[i].value_length;
    if (item.status == StatusCode::kOk && !WithinArena(item.offset, length, arena_bytes))
      return Status::Corruption(fmt::format(
          "ARENA_RESERVE response: item {}: {} bytes at offset {} overrun the arena of {} bytes", i,
          length, item.offset, arena_bytes));
  }
  return Status::Ok();
}

// ---- ARENA_COMMIT --------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const ArenaCommitRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "ARENA_COMMIT request";
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(Opcode::kArenaCommit, /*response=*/false, version));
  if (m.reservation_id == 0)
    return Status::InvalidArgument(fmt::format("{}: reservation_id is 0", kContext));
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(kContext, m.commit.size(), l));
  // Checksums: one per item from kChecksumVersion on (none given: all 0, "no checksum"); before
  // it the frame cannot carry them, and a caller that has some must not lose them silently.
  const bool checksums = CarriesChecksums(version);
  if (checksums && !m.checksums.empty() && m.checksums.size() != m.commit.size())
    return Status::InvalidArgument(
        fmt::format("{}: {} checksums for {} items; give one per item or none", kContext,
                    m.checksums.size(), m.commit.size()));
  if (!checksums && !m.checksums.empty())
    return Status::InvalidArgument(
        fmt::format("{}: {} checksums in a version {} frame; they need protocol version {}",
                    kContext, m.checksums.size(), version, kChecksumVersion));
  BeginFrame(out, 12 + CommitItemBytes(version) * m.commit.size());
  WireWriter w(&out->head);
  w.PutU64(m.reservation_id);
  w.PutU32(static_cast<uint32_t>(m.commit.size()));
  for (size_t i = 0; i < m.commit.size(); ++i) {
    if (m.commit[i] > 1)
      return ItemError(kContext, i,
                       Status::InvalidArgument(fmt::format(
                           "commit byte {}; it is 1 (commit) or 0 (abort)", m.commit[i])));
    w.PutU8(m.commit[i]);
  }
  if (checksums) {
    for (size_t i = 0; i < m.commit.size(); ++i)
      w.PutU64(m.checksums.empty() ? 0 : m.checksums[i]);
  }
  return FinishFrame(Opcode::kArenaCommit, 0, request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     ArenaCommitRequest* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kArenaCommit, /*response=*/false));
  WireReader r(descriptor, "ARENA_COMMIT request");
  uint32_t count = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU64("reservation_id", &out->reservation_id));
  if (out->reservation_id == 0) return r.Error(StatusCode::kCorruption, "reservation_id is 0");
  KVPORT_RETURN_IF_ERROR(ReadCount(r, l, CommitItemBytes(h.version), &count));
  out->commit.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    KVPORT_RETURN_IF_ERROR(r.ReadU8("commit", &out->commit[i]));
    if (out->commit[i] > 1)
      return r.Error(
          StatusCode::kCorruption,
          fmt::format("item {}: commit byte {}; it is 1 (commit) or 0 (abort)", i, out->commit[i]));
  }
  // The checksum table, one u64 per item after the commit bytes, from kChecksumVersion on; any
  // value is valid (0: none; an aborted item's is ignored by the node).
  out->checksums.clear();
  if (CarriesChecksums(h.version)) {
    out->checksums.resize(count);
    for (uint32_t i = 0; i < count; ++i)
      KVPORT_RETURN_IF_ERROR(r.ReadU64("checksum", &out->checksums[i]));
  }
  return r.ExpectEnd();
}

Status EncodeResponse(uint64_t request_id, const ArenaCommitResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  return EncodeStatuses(Opcode::kArenaCommit, request_id, m.statuses, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      ArenaCommitResponse* out) {
  return DecodeStatuses(Opcode::kArenaCommit, h, descriptor, l, &out->statuses);
}

// ---- ARENA_GET -----------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const ArenaGetRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version) {
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(Opcode::kArenaGet, /*response=*/false, version));
  BeginFrame(out);
  WireWriter w(&out->head);
  KVPORT_RETURN_IF_ERROR(
      WriteMgetDescriptor(w, "ARENA_GET request", m.ns, m.keys, m.any_namespace, l, version));
  return FinishFrame(Opcode::kArenaGet, AnyNamespaceFlag(m.any_namespace), request_id, l, version,
                     out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     ArenaGetRequest* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kArenaGet, /*response=*/false));
  WireReader r(descriptor, "ARENA_GET request");
  out->any_namespace = h.any_namespace();
  return ReadMgetDescriptor(r, h, l, &out->ns, &out->keys);
}

BatchStatus ArenaGetResponse::overall() const {
  return internal::OverallOf(results);
}

Status EncodeResponse(uint64_t request_id, const ArenaGetResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "ARENA_GET response";
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(Opcode::kArenaGet, /*response=*/true, version));
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(kContext, m.results.size(), l));
  const bool checksums = CarriesChecksums(version);
  size_t bytes = 13;
  for (const ArenaGetResult& res : m.results)
    bytes += ArenaGetResultFixedBytes(version) + res.meta.size();
  BeginFrame(out, bytes);
  WireWriter w(&out->head);
  w.PutU8(static_cast<uint8_t>(m.overall()));
  w.PutU64(m.lease_id);
  w.PutU32(static_cast<uint32_t>(m.results.size()));
  size_t ok = 0;
  for (size_t i = 0; i < m.results.size(); ++i) {
    const ArenaGetResult& res = m.results[i];
    KVPORT_RETURN_IF_ERROR(
        CheckResultToEncode(kContext, i, res.status, res.meta, res.value_length, res.checksum, l));
    KVPORT_RETURN_IF_ERROR(CheckOffsetToEncode(kContext, i, res.status, res.offset));
    ok += res.status == StatusCode::kOk;
    w.PutU8(static_cast<uint8_t>(res.status));
    w.PutU32(static_cast<uint32_t>(res.meta.size()));
    w.PutU64(res.value_length);
    w.PutU64(res.offset);
    if (checksums) w.PutU64(res.checksum);
    w.PutBytes(res.meta);
  }
  if (!IdAgrees(m.lease_id, ok))
    return Status::InvalidArgument(fmt::format(
        "{}: lease_id {} with {} hits; it is non-zero iff one is", kContext, m.lease_id, ok));
  return FinishFrame(Opcode::kArenaGet, kFlagResponse, request_id, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      ArenaGetResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kArenaGet, /*response=*/true));
  WireReader r(descriptor, "ARENA_GET response");
  BatchStatus overall = BatchStatus::kOk;
  uint32_t count = 0;
  KVPORT_RETURN_IF_ERROR(ReadOverall(r, &overall));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("lease_id", &out->lease_id));
  KVPORT_RETURN_IF_ERROR(ReadCount(r, l, ArenaGetResultFixedBytes(h.version), &count));
  out->results.resize(count);
  const bool checksums = CarriesChecksums(h.version);
  size_t ok = 0;
  for (uint32_t i = 0; i < count; ++i) {
    ArenaGetResult& res = out->results[i];
    uint32_t meta_length = 0;
    KVPORT_RETURN_IF_ERROR(ReadStatusCode(r, i, &res.status));
    KVPORT_RETURN_IF_ERROR(r.ReadU32("meta_length", &meta_length));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("value_length", &res.value_length));
    KVPORT_RETURN_IF_ERROR(r.ReadU64("offset", &res.offset));
    res.checksum = 0;  // the result may be reused from an earlier decode
    if (checksums) KVPORT_RETURN_IF_ERROR(r.ReadU64("checksum", &res.checksum));
    KVPORT_RETURN_IF_ERROR(
        CheckResultDecoded(r, i, res.status, meta_length, res.value_length, res.checksum, l));
    KVPORT_RETURN_IF_ERROR(CheckOffsetDecoded(r, i, res.status, res.offset));
    KVPORT_RETURN_IF_ERROR(r.ReadBytes("meta", meta_length, &res.meta));
    ok += res.status == StatusCode::kOk;
  }
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  KVPORT_RETURN_IF_ERROR(CheckOverall(r, overall, out->overall()));
  if (!IdAgrees(out->lease_id, ok))
    return r.Error(
        StatusCode::kCorruption,
        fmt::format("lease_id {} with {} hits; it is non-zero iff one is", out->lease_id, ok));
  return Status::Ok();
}

Status CheckArenaGetResponse(const ArenaGetRequest& request, const ArenaGetResponse& response,
                             uint64_t arena_bytes) {
  if (response.results.size() != request.keys.size())
    return Status::Corruption(fmt::format("ARENA_GET response: {} results for {} keys",
                                          response.results.size(), request.keys.size()));
  for (size_t i = 0; i < response.results.size(); ++i) {
    const ArenaGetResult& res = response.results[i];
    if (res.status != StatusCode::kOk) continue;
    if (res.value_length > request.keys[i].buffer_capacity)
      return Status::Corruption(fmt::format(
          "ARENA_GET response: item {}: value_length {} exceeds the buffer_capacity {} asked for",
          i, res.value_length, request.keys[i].buffer_capacity));
    if (!WithinArena(res.offset, res.value_length, arena_bytes))
      return Status::Corruption(fmt::format(
          "ARENA_GET response: item {}: {} bytes at offset {} overrun the arena of {} bytes", i,
          res.value_length, res.offset, arena_bytes));
  }
  return Status::Ok();
}

// ---- ARENA_RELEASE -------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const ArenaReleaseRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "ARENA_RELEASE request";
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(Opcode::kArenaRelease, /*response=*/false, version));
  if (m.lease_ids.empty())
    return Status::InvalidArgument(fmt::format("{}: no lease ids", kContext));
  KVPORT_RETURN_IF_ERROR(CheckBatchToEncode(kContext, m.lease_ids.size(), l));
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU32(static_cast<uint32_t>(m.lease_ids.size()));
  for (size_t i = 0; i < m.lease_ids.size(); ++i) {
    if (m.lease_ids[i] == 0) return ItemError(kContext, i, Status::InvalidArgument("lease_id 0"));
    w.PutU64(m.lease_ids[i]);
  }
  return FinishFrame(Opcode::kArenaRelease, 0, request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     ArenaReleaseRequest* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kArenaRelease, /*response=*/false));
  WireReader r(descriptor, "ARENA_RELEASE request");
  uint32_t count = 0;
  KVPORT_RETURN_IF_ERROR(ReadCount(r, l, kLeaseIdBytes, &count));
  if (count == 0) return r.Error(StatusCode::kInvalidArgument, "count is 0");
  out->lease_ids.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    KVPORT_RETURN_IF_ERROR(r.ReadU64("lease_id", &out->lease_ids[i]));
    if (out->lease_ids[i] == 0)
      return r.Error(StatusCode::kCorruption, fmt::format("item {}: lease_id 0", i));
  }
  return r.ExpectEnd();
}

Status EncodeResponse(uint64_t request_id, const ArenaReleaseResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(Opcode::kArenaRelease, /*response=*/true, version));
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU32(m.released);
  return FinishFrame(Opcode::kArenaRelease, kFlagResponse, request_id, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits&,
                      ArenaReleaseResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kArenaRelease, /*response=*/true));
  WireReader r(descriptor, "ARENA_RELEASE response");
  KVPORT_RETURN_IF_ERROR(r.ReadU32("released", &out->released));
  return r.ExpectEnd();
}

}  // namespace kvport::protocol
