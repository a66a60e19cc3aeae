// SPDX-License-Identifier: Apache-2.0
// Version 9: UCX_ATTACH (an empty request; the response hands a TCP session the node's UCX
// listener port and its session key) and the messages a UCX-attached client and the node
// exchange over UCX (docs/protocol.md, "Version 9").
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
using internal::ReadResponseStatus;

namespace {

bool AnyGrantField(const UcxAttachResponse& m) {
  return m.ucx_port != 0 || !m.session_key.empty() || m.arena_bytes != 0;
}

// What an OK response must hold, for both directions; empty when it does.
std::string GrantProblem(const UcxAttachResponse& m) {
  if (m.ucx_port == 0) return "UCX port 0";
  if (m.session_key.size() != kUcxSessionKeyBytes)
    return fmt::format("a session key of {} bytes, not {}", m.session_key.size(),
                       kUcxSessionKeyBytes);
  if (m.arena_bytes == 0) return "an empty arena";
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
  w.PutU16(m.ucx_port);
  w.PutU8(static_cast<uint8_t>(m.session_key.size()));
  w.PutBytes(m.session_key);
  w.PutU64(m.arena_bytes);
  w.PutU16(static_cast<uint16_t>(reason.size()));
  w.PutBytes(reason);
  return FinishFrame(Opcode::kUcxAttach, kFlagResponse, request_id, l, version, out);
}

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits&,
                      UcxAttachResponse* out) {
  KVPORT_RETURN_IF_ERROR(CheckFrameFor(h, descriptor, Opcode::kUcxAttach, /*response=*/true));
  WireReader r(descriptor, "UCX_ATTACH response");
  KVPORT_RETURN_IF_ERROR(ReadResponseStatus(r, &out->status));
  KVPORT_RETURN_IF_ERROR(r.ReadU16("ucx_port", &out->ucx_port));
  uint8_t key_length = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU8("session_key_length", &key_length));
  KVPORT_RETURN_IF_ERROR(r.ReadBytes("session_key", key_length, &out->session_key));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("arena_bytes", &out->arena_bytes));
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

// ---- Messages over UCX ----------------------------------------------------------------------

namespace {

constexpr size_t kUcxPutBytes = kUcxSessionKeyBytes + 8 + 8;
constexpr size_t kUcxGetBytes = kUcxSessionKeyBytes + 8 + 8 + 8;
constexpr size_t kUcxDoneBytes = 8 + 1;

Status WrongLength(std::string_view what, size_t got, size_t want) {
  return Status::Corruption(fmt::format("{} header of {} bytes, not {}", what, got, want));
}

}  // namespace

std::string EncodeUcxPut(const UcxPut& m) {
  std::string out;
  WireWriter w(&out);
  w.PutBytes(m.session_key.substr(0, kUcxSessionKeyBytes));
  out.resize(kUcxSessionKeyBytes);  // a short key is padded: the node refuses it
  w.PutU64(m.offset);
  w.PutU64(m.token);
  return out;
}

std::string EncodeUcxGet(const UcxGet& m) {
  std::string out;
  WireWriter w(&out);
  w.PutBytes(m.session_key.substr(0, kUcxSessionKeyBytes));
  out.resize(kUcxSessionKeyBytes);
  w.PutU64(m.offset);
  w.PutU64(m.bytes);
  w.PutU64(m.token);
  return out;
}

std::string EncodeUcxDone(const UcxDone& m) {
  std::string out;
  WireWriter w(&out);
  w.PutU64(m.token);
  w.PutU8(static_cast<uint8_t>(m.status));
  return out;
}

Status DecodeUcxPut(std::string_view header, UcxPut* out) {
  if (header.size() != kUcxPutBytes) return WrongLength("UCX put", header.size(), kUcxPutBytes);
  WireReader r(header, "UCX put");
  KVPORT_RETURN_IF_ERROR(r.ReadBytes("session_key", kUcxSessionKeyBytes, &out->session_key));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("offset", &out->offset));
  return r.ReadU64("token", &out->token);
}

Status DecodeUcxGet(std::string_view header, UcxGet* out) {
  if (header.size() != kUcxGetBytes) return WrongLength("UCX get", header.size(), kUcxGetBytes);
  WireReader r(header, "UCX get");
  KVPORT_RETURN_IF_ERROR(r.ReadBytes("session_key", kUcxSessionKeyBytes, &out->session_key));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("offset", &out->offset));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("bytes", &out->bytes));
  return r.ReadU64("token", &out->token);
}

Status DecodeUcxDone(std::string_view header, UcxDone* out) {
  if (header.size() != kUcxDoneBytes)
    return WrongLength("UCX answer", header.size(), kUcxDoneBytes);
  WireReader r(header, "UCX answer");
  KVPORT_RETURN_IF_ERROR(r.ReadU64("token", &out->token));
  uint8_t code = 0;
  KVPORT_RETURN_IF_ERROR(r.ReadU8("status", &code));
  if (!IsKnownStatusCode(code))
    return Status::Corruption(fmt::format("UCX answer: unknown status code {}", code));
  out->status = static_cast<StatusCode>(code);
  return Status::Ok();
}

}  // namespace kvport::protocol
