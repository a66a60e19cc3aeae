// SPDX-License-Identifier: Apache-2.0
#include "protocol/limits.h"

#include <fmt/core.h>

namespace kvport::protocol {
namespace {

// The descriptor of a one-item MSET request with the largest namespace, key and meta: every
// limit set must admit it, or a valid item could never be sent. Header (32), namespace length
// (1) and bytes, ttl (4), count (4), item lengths (2 + 4 + 8), key and meta.
uint64_t LargestSingleItemFrame(const Limits& l) {
  // Header, namespace, ttl, count, then one item: u16 key_len, u32 meta_len, u64 value_len,
  // u64 checksum (version 10), key and meta.
  return 32 + 1 + l.max_namespace_bytes + 4 + 4 + 22 + l.max_key_bytes + l.max_meta_bytes;
}

}  // namespace

Status ValidateLimits(const Limits& l) {
  if (l.max_key_bytes < 1 || l.max_key_bytes > 65535)
    return Status::InvalidArgument(
        fmt::format("max_key_bytes {} is outside 1..65535", l.max_key_bytes));
  if (l.max_namespace_bytes > 255)
    return Status::InvalidArgument(
        fmt::format("max_namespace_bytes {} is above 255", l.max_namespace_bytes));
  // Bounded so that the sums below cannot overflow; metas are meant to be small.
  if (l.max_meta_bytes > (64ull << 20))
    return Status::InvalidArgument(
        fmt::format("max_meta_bytes {} is above 64 MiB", l.max_meta_bytes));
  if (l.max_value_bytes < 1 || l.max_value_bytes > (1ull << 40))
    return Status::InvalidArgument(
        fmt::format("max_value_bytes {} is outside 1..1 TiB", l.max_value_bytes));
  if (l.max_batch_keys < 1 || l.max_batch_keys > (1ull << 20))
    return Status::InvalidArgument(
        fmt::format("max_batch_keys {} is outside 1..1048576", l.max_batch_keys));
  const uint64_t min_frame = LargestSingleItemFrame(l);
  if (l.max_frame_bytes < min_frame)
    return Status::InvalidArgument(
        fmt::format("max_frame_bytes {} is below {}, the frame of one item with the largest "
                    "namespace, key and meta",
                    l.max_frame_bytes, min_frame));
  if (l.max_frame_bytes > (1ull << 31))
    return Status::InvalidArgument(
        fmt::format("max_frame_bytes {} is above 2 GiB", l.max_frame_bytes));
  if (MaxResponseFrameBytes(l) > 0xffffffffull)
    return Status::InvalidArgument(fmt::format(
        "max_frame_bytes {} + max_batch_keys {} * (max_meta_bytes {} + 24) exceeds 4 GiB, the "
        "largest response frame",
        l.max_frame_bytes, l.max_batch_keys, l.max_meta_bytes));
  return Status::Ok();
}

uint64_t MaxResponseFrameBytes(const Limits& l) {
  // Per key at most its fixed result (ARENA_GET's in version 10: u8 status, u32 meta_len, u64
  // value_len, u64 offset, u64 checksum) beside its meta, over what the request could carry.
  return l.max_frame_bytes + l.max_batch_keys * (l.max_meta_bytes + 24);
}

uint64_t MaxPayloadBytes(const Limits& l) {
  return l.max_batch_keys * l.max_value_bytes;
}

Status CheckNamespace(std::string_view ns, const Limits& l) {
  if (ns.size() > l.max_namespace_bytes)
    return Status::TooLarge(fmt::format("namespace of {} bytes exceeds max_namespace_bytes {}",
                                        ns.size(), l.max_namespace_bytes));
  return Status::Ok();
}

Status CheckKey(std::string_view key, const Limits& l) {
  if (key.empty()) return Status::InvalidArgument("empty key");
  if (key.size() > l.max_key_bytes)
    return Status::TooLarge(
        fmt::format("key of {} bytes exceeds max_key_bytes {}", key.size(), l.max_key_bytes));
  return Status::Ok();
}

Status CheckMeta(std::string_view meta, const Limits& l) {
  if (meta.size() > l.max_meta_bytes)
    return Status::TooLarge(
        fmt::format("meta of {} bytes exceeds max_meta_bytes {}", meta.size(), l.max_meta_bytes));
  return Status::Ok();
}

Status CheckValueLength(uint64_t value_length, const Limits& l) {
  if (value_length > l.max_value_bytes)
    return Status::TooLarge(fmt::format("value of {} bytes exceeds max_value_bytes {}",
                                        value_length, l.max_value_bytes));
  return Status::Ok();
}

Status CheckBatchCount(uint64_t count, const Limits& l) {
  if (count > l.max_batch_keys)
    return Status::TooLarge(
        fmt::format("{} keys exceed max_batch_keys {}", count, l.max_batch_keys));
  return Status::Ok();
}

}  // namespace kvport::protocol
