// SPDX-License-Identifier: Apache-2.0
#include "server/resp_value_capture.h"

#include <fmt/core.h>

#include <algorithm>
#include <new>

#include "common/xxh3.h"

namespace kvport::server {

namespace {

constexpr uint64_t kScratchBytes = 64 << 10;

}  // namespace

void RespValueCapture::HashStateDeleter::operator()(XXH3_state_s* state) const {
  (void)XXH3_freeState(state);
}

RespValueCapture::RespValueCapture(CacheService& service, const RespClient& client)
    : batch_(&service, client.access.shared_grant(), /*stepwise=*/true, client.durability),
      hash_(XXH3_createState()),
      step_(batch_.StepBytes(WriteBatch::kReserveAhead)) {
  if (hash_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(hash_.get());
}

std::unique_ptr<RespValueCapture> RespValueCapture::Begin(
    CacheService& service, const RespClient& client, std::span<const std::string_view> head,
    const protocol::RespPartialBulk& partial) {
  if (partial.length < kMinBytes || head.size() != partial.index || head.empty()) return nullptr;
  const bool set = ArgIs(head[0], "SET") && partial.index == 2;
  const bool set_with_expiry = (ArgIs(head[0], "SETEX") || ArgIs(head[0], "PSETEX")) &&
                               partial.index == 3 && partial.arg_count == 4;
  if (!set && !set_with_expiry) return nullptr;
  std::unique_ptr<RespValueCapture> capture(new RespValueCapture(service, client));
  capture->batch_.Reserve(client.ns, head[1], partial.length, "", store::kNoExpiry,
                          std::min(partial.length, capture->step_));
  if (capture->batch_.status(0) != StatusCode::kOk) return nullptr;
  capture->head_.assign(head.begin(), head.end());
  capture->arg_count_ = partial.arg_count;
  capture->head_bytes_ = partial.data_pos;
  capture->length_ = partial.length;
  return capture;
}

std::span<char> RespValueCapture::Room() {
  if (complete()) return {};
  if (batch_.status(0) == StatusCode::kOk && filled_ == batch_.capacity(0)) {
    (void)batch_.Grow(0, std::min(length_, filled_ + step_));  // refused: status(0) says why
  }
  if (batch_.status(0) != StatusCode::kOk) {
    if (scratch_ == nullptr) scratch_.reset(new char[kScratchBytes]);
    return {scratch_.get(), static_cast<size_t>(std::min(kScratchBytes, length_ - filled_))};
  }
  char* destination = reinterpret_cast<char*>(batch_.destination(0));
  return {destination + filled_, static_cast<size_t>(batch_.capacity(0) - filled_)};
}

void RespValueCapture::Filled(uint64_t bytes) {
  // Room() gave the reservation while the store took every step (else the scratch buffer,
  // whose bytes are dropped and never committed).
  if (batch_.status(0) == StatusCode::kOk) {
    Xxh3Update(hash_.get(), reinterpret_cast<const char*>(batch_.destination(0)) + filled_, bytes);
  }
  filled_ += bytes;
  batch_.MarkWritten(0, filled_);
}

Status RespValueCapture::status() const {
  if (batch_.status(0) == StatusCode::kOk) return Status::Ok();
  return Status(batch_.status(0),
                fmt::format("the node could not reserve the rest of a {}-byte value", length_));
}

void RespValueCapture::Arguments(std::span<const std::string_view> tail,
                                 std::vector<std::string_view>* args) const {
  args->assign(head_.begin(), head_.end());
  args->emplace_back(reinterpret_cast<const char*>(batch_.destination(0)), length_);
  args->insert(args->end(), tail.begin(), tail.end());
}

bool RespValueCapture::Holds(std::string_view value) const {
  return batch_.size() == 1 && value.size() == length_ &&
         value.data() == reinterpret_cast<const char*>(batch_.destination(0));
}

Status RespValueCapture::Commit(uint32_t ttl_seconds) {
  KVPORT_RETURN_IF_ERROR(status());
  batch_.SetTtlSeconds(0, ttl_seconds);
  batch_.SetChecksum(0, XXH3_64bits_digest(hash_.get()));
  const StatusCode committed = batch_.Commit()[0];
  if (committed != StatusCode::kOk) {
    return Status(committed, fmt::format("the {}-byte value was not kept", length_));
  }
  return Status::Ok();
}

}  // namespace kvport::server
