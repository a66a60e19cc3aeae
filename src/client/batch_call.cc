// SPDX-License-Identifier: Apache-2.0
#include "client/batch_call.h"

#include <fmt/core.h>

#include "common/xxh3.h"

namespace kvport {

KeyCode KeyCodeFromCallFailure(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return KeyCode::kSuccess;
    case StatusCode::kUnavailable:
    case StatusCode::kAborted:
      return KeyCode::kUnavailable;
    case StatusCode::kTimeout:
      return KeyCode::kTimeout;
    case StatusCode::kInvalidArgument:
      return KeyCode::kInvalidArgument;
    case StatusCode::kTooLarge:
      return KeyCode::kTooLarge;
    case StatusCode::kDeviceError:
      return KeyCode::kDeviceError;
    case StatusCode::kPermissionDenied:
      return KeyCode::kPermissionDenied;
    default:
      return KeyCode::kFailed;
  }
}

namespace client {

KeyCode KeyCodeFromWire(StatusCode code, bool mget) {
  switch (code) {
    case StatusCode::kOk:
      return KeyCode::kSuccess;
    case StatusCode::kNotFound:
      return KeyCode::kKeyNotExist;
    case StatusCode::kNoSpace:
      return KeyCode::kNoSpace;
    case StatusCode::kTooLarge:
      return mget ? KeyCode::kBufferTooSmall : KeyCode::kTooLarge;
    case StatusCode::kInvalidArgument:
      return KeyCode::kInvalidArgument;
    case StatusCode::kUnavailable:
      return KeyCode::kUnavailable;
    case StatusCode::kTimeout:
      return KeyCode::kTimeout;
    case StatusCode::kDeviceError:
      return KeyCode::kDeviceError;
    case StatusCode::kPermissionDenied:
      return KeyCode::kPermissionDenied;
    default:
      return KeyCode::kFailed;
  }
}

KeyOutcomes::KeyOutcomes(std::span<const std::string> keys, std::string_view op,
                         std::string_view ns, bool any_namespace) {
  Restart(keys, op, ns, any_namespace);
}

void KeyOutcomes::Restart(std::span<const std::string> keys, std::string_view op,
                          std::string_view ns, bool any_namespace) {
  keys_ = keys;
  op_.assign(op);
  if (any_namespace) {
    where_.assign("any namespace");
  } else {
    where_.assign("namespace '").append(ns).append("'");
  }
  codes_.assign(keys.size(), KeyCode::kSuccess);
  first_error_ = Status::Ok();
}

void KeyOutcomes::Fail(size_t i, KeyCode code, const Status& reason) {
  codes_[i] = code;
  if (first_error_.ok()) {
    first_error_ = Status(reason.ok() ? StatusCode::kInternal : reason.code(),
                          fmt::format("{} key '{}' ({}): {}: {}", op_, keys_[i], where_,
                                      KeyCodeName(code), reason.message()));
  }
}

void KeyOutcomes::FromWire(size_t i, StatusCode code, bool mget, std::string_view peer) {
  if (code == StatusCode::kOk) {
    codes_[i] = KeyCode::kSuccess;
    return;
  }
  const KeyCode key_code = KeyCodeFromWire(code, mget);
  if (!first_error_.ok()) {  // only the first failure is described: spare the formatting
    codes_[i] = key_code;
    return;
  }
  Fail(i, key_code, Status(code, fmt::format("node {} answered {}", peer, StatusCodeName(code))));
}

void KeyOutcomes::Finish(BatchResult* out) {
  out->codes = codes_;
  out->status = OverallCode(out->codes);
  out->error = out->status == BatchCode::kSuccess ? Status::Ok() : first_error_;
}

Status MalformedAnswer(const protocol::FrameHeader& header, const Status& why) {
  return Status::Corruption(fmt::format("malformed {} response from the node: {}",
                                        protocol::OpcodeName(header.opcode), why.message()));
}

namespace {

Status CountMismatch(std::string_view op, size_t asked, size_t answered) {
  return Status::Corruption(
      fmt::format("the node answered {} keys of a {} of {} keys", answered, op, asked));
}

}  // namespace

Status CheckAnswer(const protocol::MsetRequest& request, const protocol::MsetResponse& response) {
  if (response.statuses.size() == request.items.size()) return Status::Ok();
  return CountMismatch("MSET", request.items.size(), response.statuses.size());
}

Status CheckAnswer(const protocol::MexistRequest& request,
                   const protocol::MexistResponse& response) {
  if (response.results.size() == request.keys.size()) return Status::Ok();
  return CountMismatch("MEXIST", request.keys.size(), response.results.size());
}

Status CheckAnswer(const protocol::MdelRequest& request, const protocol::MdelResponse& response) {
  if (response.statuses.size() == request.keys.size()) return Status::Ok();
  return CountMismatch("MDEL", request.keys.size(), response.statuses.size());
}

Status CheckAnswer(const protocol::MgetRequest& request, const protocol::MgetResponse& response) {
  Status checked = protocol::CheckMgetResponse(request, response);
  if (checked.ok()) return checked;
  return Status::Corruption(checked.message());
}

Status CheckAnswer(const protocol::ArenaReserveRequest& request,
                   const protocol::ArenaReserveResponse& response) {
  Status checked = protocol::CheckArenaReserveResponse(request, response);
  if (checked.ok()) return checked;
  return Status::Corruption(checked.message());
}

Status CheckAnswer(const protocol::ArenaCommitRequest& request,
                   const protocol::ArenaCommitResponse& response) {
  if (response.statuses.size() == request.commit.size()) return Status::Ok();
  return CountMismatch("ARENA_COMMIT", request.commit.size(), response.statuses.size());
}

Status CheckAnswer(const protocol::ArenaGetRequest& request,
                   const protocol::ArenaGetResponse& response) {
  Status checked = protocol::CheckArenaGetResponse(request, response);
  if (checked.ok()) return checked;
  return Status::Corruption(checked.message());
}

namespace {

// Batch answers: u8 overall, u32 count, then `item_bytes` per key.
uint64_t BatchAnswerBytes(size_t keys, uint64_t item_bytes) {
  return 1 + 4 + keys * item_bytes;
}

}  // namespace

uint64_t MaxAnswerDescriptorBytes(const protocol::MsetRequest& request, const protocol::Limits&) {
  return BatchAnswerBytes(request.items.size(), 1);  // u8 status
}

uint64_t MaxAnswerDescriptorBytes(const protocol::MgetRequest& request,
                                  const protocol::Limits& limits) {
  // u8 status, u32 meta_len, u64 value_len, u64 checksum (version 10), meta; a meta-only
  // answer has the same layout.
  return BatchAnswerBytes(request.keys.size(), 1 + 4 + 8 + 8 + limits.max_meta_bytes);
}

uint64_t MaxAnswerDescriptorBytes(const protocol::MexistRequest& request, const protocol::Limits&) {
  return BatchAnswerBytes(request.keys.size(), 1 + 8);  // u8 status, u64 value_len
}

uint64_t MaxAnswerDescriptorBytes(const protocol::MdelRequest& request, const protocol::Limits&) {
  return BatchAnswerBytes(request.keys.size(), 1);  // u8 status
}

uint64_t MaxAnswerDescriptorBytes(const protocol::ListRequest& request,
                                  const protocol::Limits& limits) {
  // u64 next_cursor, u32 count, count x (u16 key_len, key).
  return 8 + 4 + uint64_t{request.max_keys} * (2 + limits.max_key_bytes);
}

uint64_t MaxAnswerDescriptorBytes(const protocol::NodeInfoRequest&, const protocol::Limits&) {
  // u64 node_id, u32 offers, u8 + host id, u16 + Unix socket path.
  return 8 + 4 + 1 + 255 + 2 + 107;
}

uint64_t MaxAnswerDescriptorBytes(const protocol::UcxAttachRequest&, const protocol::Limits&) {
  // u8 status, u16 port, a session key with its u8 length, u64 arena_bytes, the reason.
  return 1 + 2 + 1 + 255 + 8 + 2 + protocol::kMaxErrorMessageBytes;
}

uint64_t MaxAnswerDescriptorBytes(const protocol::ArenaReserveRequest& request,
                                  const protocol::Limits&) {
  return 8 + BatchAnswerBytes(request.items.size(), 1 + 8);  // reservation id; status, offset
}

uint64_t MaxAnswerDescriptorBytes(const protocol::ArenaCommitRequest& request,
                                  const protocol::Limits&) {
  return BatchAnswerBytes(request.commit.size(), 1);  // the MSET answer's layout
}

uint64_t MaxAnswerDescriptorBytes(const protocol::ArenaGetRequest& request,
                                  const protocol::Limits& limits) {
  // lease id; u8 status, u32 meta_len, u64 value_len, u64 offset, u64 checksum (version 10),
  // meta.
  return 8 + BatchAnswerBytes(request.keys.size(), 1 + 4 + 8 + 8 + 8 + limits.max_meta_bytes);
}

uint64_t MaxAnswerDescriptorBytes(const protocol::ArenaReleaseRequest&, const protocol::Limits&) {
  return 4;  // u32 released
}

uint64_t MaxAnswerDescriptorBytes(const protocol::PingRequest&, const protocol::Limits&) {
  return 0;
}

uint64_t MaxAnswerDescriptorBytes(const protocol::StatsRequest&, const protocol::Limits& limits) {
  return protocol::MaxResponseFrameBytes(limits) - protocol::kFrameHeaderSize;
}

// One xxh3 streaming state per payload iov, and which iov each result's value went to.
struct MgetHandler::ValueHashes {
  std::vector<XXH3_state_t> states;  // XXH3_state_t is over-aligned: the vector's new aligns it
  std::vector<size_t> iov_of;        // per result; SIZE_MAX: no payload bytes
};

MgetHandler::MgetHandler() = default;
MgetHandler::~MgetHandler() = default;

Status MgetHandler::OnResponse(const protocol::FrameHeader& header, std::vector<iovec>* payload) {
  Status decoded = protocol::DecodeResponse(header, descriptor_view(), limits, &response);
  if (!decoded.ok()) return MalformedAnswer(header, decoded);
  KVPORT_RETURN_IF_ERROR(CheckAnswer(request, response));
  if (hash_values) {
    if (hashes_ == nullptr) hashes_ = std::make_unique<ValueHashes>();
    hashes_->iov_of.assign(response.results.size(), SIZE_MAX);
    hashes_->states.clear();
  }
  for (size_t i = 0; i < response.results.size(); ++i) {
    if (!response.CarriesPayload(i)) continue;
    const uint64_t n = response.results[i].value_length;
    if (n == 0) continue;
    if (hash_values) {
      hashes_->iov_of[i] = payload->size();
      XXH3_64bits_reset(&hashes_->states.emplace_back());
    }
    payload->push_back(iovec{destinations[i], n});
  }
  return Status::Ok();
}

void MgetHandler::OnPayloadBytes(size_t index, const void* data, size_t bytes) {
  if (hash_values) Xxh3Update(&hashes_->states[index], data, bytes);
}

uint64_t MgetHandler::ReceivedChecksum(size_t i) const {
  const size_t iov = hashes_ == nullptr ? SIZE_MAX : hashes_->iov_of[i];
  return iov == SIZE_MAX ? Xxh3(nullptr, 0) : XXH3_64bits_digest(&hashes_->states[iov]);
}

}  // namespace client
}  // namespace kvport
