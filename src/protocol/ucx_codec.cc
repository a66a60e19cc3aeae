// SPDX-License-Identifier: Apache-2.0
// Version 8: UCX_ATTACH. An empty request; the response hands a TCP session what it needs for
// one-sided access to the arena over UCX (docs/protocol.md, "Version 8").
#include <fmt/core.h>

#include <string>

#include "protocol/codec_util.h"
#include "protocol/messages.h"

namespace kvport::protocol {

using internal::BeginFrame;
using internal::CheckFrameFor;
using internal::CheckVersionToEncode;
using internal::DecodeEmpty;
using internal::EncodeEmpty;
using internal::FinishFrame;
using internal::IsKnownStatusCode;

namespace {

bool AnyGrantField(const UcxAttachResponse& m) {
  return !m.worker_address.empty() || !m.arena_key.empty() || m.arena_base != 0 ||
         m.arena_bytes != 0 || !m.lease_words_key.empty() || m.lease_words_base != 0 ||
         m.lease_words_bytes != 0 || m.lease_word_offset != 0 || m.lease_generation != 0;
}

// What an OK response must hold, for both directions; empty when it does.
std::string GrantProblem(const UcxAttachResponse& m) {
  if (m.worker_address.empty() || m.arena_key.empty() || m.lease_words_key.empty())
    return "an empty worker address or key";
  if (m.worker_address.size() > kMaxUcxBlobBytes || m.arena_key.size() > kMaxUcxBlobBytes ||
      m.lease_words_key.size() > kMaxUcxBlobBytes)
    return fmt::format("a worker address or key over {} bytes", kMaxUcxBlobBytes);
  if (m.arena_bytes == 0 || m.arena_base + m.arena_bytes < m.arena_base)
    return "an empty or wrapping arena range";
  if (m.lease_words_bytes == 0 || m.lease_words_base + m.lease_words_bytes < m.lease_words_base)
    return "an empty or wrapping lease words range";
  if (m.lease_word_offset % 8 != 0 || m.lease_word_offset + 8 > m.lease_words_bytes)
    return fmt::format("lease_word_offset {} is not an 8-byte word of the {} lease word bytes",
                       m.lease_word_offset, m.lease_words_bytes);
  return "";
}

}  // namespace

Status EncodeRequest(uint64_t request_id, const UcxAttachRequest&, const Limits& l,
                     EncodedFrame* out, uint8_t version) {
  return EncodeEmpty(Opcode::kUcxAttach, request_id, l, version, out);
}

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits&,
                     UcxAttachRequest*) {
  return DecodeEmpty(Opcode::kUcxAttach, h, descriptor);
}

Status EncodeResponse(uint64_t request_id, const UcxAttachResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version) {
  constexpr std::string_view kContext = "UCX_ATTACH response";
  KVPORT_RETURN_IF_ERROR(CheckVersionToEncode(Opcode::kUcxAttach, /*response=*/true, version));
  const uint8_t code = static_cast<uint8_t>(m.status);
  if (!IsKnownStatusCode(code))
    return Status::InvalidArgument(fmt::format("{}: unknown status code {}", kContext, code));
  const std::string_view reason = m.reason.substr(0, kMaxErrorMessageBytes);
  if (m.status == StatusCode::kOk) {
    const std::string problem = GrantProblem(m);
    if (!problem.empty()) return Status::InvalidArgument(fmt::format("{}: {}", kContext, problem));
    if (!reason.empty())
      return Status::InvalidArgument(fmt::format("{}: OK with a reason", kContext));
  } else if (AnyGrantField(m) || reason.empty()) {
    return Status::InvalidArgument(fmt::format("{}: status {} needs a reason and nothing else",
                                               kContext, StatusCodeName(m.status)));
  }
  BeginFrame(out);
  WireWriter w(&out->head);
  w.PutU8(code);
  for (std::string_view blob : {m.worker_address, m.arena_key, m.lease_words_key}) {
    w.PutU16(static_cast<uint16_t>(blob.size()));
    w.PutBytes(blob);
  }
  for (uint64_t v : {m.arena_base, m.arena_bytes, m.lease_words_base, m.lease_words_bytes,
                     m.lease_word_offset, m.lease_generation})
    w.PutU64(v);
  w.PutU16(static_cast<uint16_t>(reason.size()));
  w.PutBytes(reason);
  return FinishFrame(Opcode::kUcxAttach, kFlagResponse, request_id, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits&,
                      UcxAttachResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kUcxAttach, /*response=*/true));
  WireReader r(descriptor, "UCX_ATTACH response");
  uint8_t code = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU8("status", &code));
  if (!IsKnownStatusCode(code))
    return r.Error(StatusCode::kCorruption, fmt::format("unknown status code {}", code));
  out->status = static_cast<StatusCode>(code);
  const auto blob = [&](std::string_view field, std::string_view* v) -> Status {
    uint16_t length = 0;
    KVPORT_RETURN_IF_ERROR(r.ReadU16(field, &length));
    if (length > kMaxUcxBlobBytes)
      return r.Error(StatusCode::kTooLarge,
                     fmt::format("{} of {} bytes exceeds {}", field, length, kMaxUcxBlobBytes));
    return r.ReadBytes(field, length, v);
  };
  KVPORT_RETURN_IF_ERROR(blob("worker_address", &out->worker_address));
  KVPORT_RETURN_IF_ERROR(blob("arena_key", &out->arena_key));
  KVPORT_RETURN_IF_ERROR(blob("lease_words_key", &out->lease_words_key));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("arena_base", &out->arena_base));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("arena_bytes", &out->arena_bytes));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("lease_words_base", &out->lease_words_base));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("lease_words_bytes", &out->lease_words_bytes));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("lease_word_offset", &out->lease_word_offset));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("lease_generation", &out->lease_generation));
  uint16_t length = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU16("reason_length", &length));
  if (length > kMaxErrorMessageBytes)
    return r.Error(StatusCode::kTooLarge,
                   fmt::format("reason_length {} exceeds {}", length, kMaxErrorMessageBytes));
  KVPORT_RETURN_IF_ERROR(r.ReadBytes("reason", length, &out->reason));
  KVPORT_RETURN_IF_ERROR(r.ExpectEnd());
  if (out->status == StatusCode::kOk) {
    const std::string problem = GrantProblem(*out);
    if (!problem.empty()) return r.Error(StatusCode::kCorruption, problem);
    if (!out->reason.empty()) return r.Error(StatusCode::kCorruption, "OK with a reason");
  } else if (AnyGrantField(*out) || out->reason.empty()) {
    return r.Error(StatusCode::kCorruption, "a refusal needs a reason and nothing else");
  }
  return Status::Ok();
}

}  // namespace kvport::protocol
