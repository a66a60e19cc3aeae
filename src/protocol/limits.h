// SPDX-License-Identifier: Apache-2.0
// Size limits of the kvport wire protocol, checked before anything is allocated.
//
// One Limits value governs a connection. The server uses its configured limits (the config
// keys have the same names as the fields below) to decode requests and announces them in its
// HELLO response; the client encodes requests and decodes responses with the limits the server
// announced. Encoders check the same limits as decoders, so a request that a client's encoder
// accepts is never rejected by the server's decoder for size.
#pragma once

#include <cstdint>
#include <string_view>

#include "kvport/status.h"

namespace kvport::protocol {

struct Limits {
  uint64_t max_key_bytes = 8192;           // 1 .. 65535 (keys are length-prefixed with a u16)
  uint64_t max_namespace_bytes = 255;      // 0 .. 255 (namespaces are length-prefixed with a u8)
  uint64_t max_meta_bytes = 4096;          // per-object metadata blob
  uint64_t max_value_bytes = 1ull << 30;   // 1 GiB per value (payloads are outside the frame)
  uint64_t max_batch_keys = 4096;          // keys per MSET/MGET/MEXIST/MDEL, keys per LIST page
  uint64_t max_frame_bytes = 16ull << 20;  // 16 MiB: header + descriptor section of a request
};

// OK when the limits are usable: every field within the range noted above, max_value_bytes and
// max_batch_keys at least 1, and max_frame_bytes large enough that a one-item batch of the
// largest key, meta and namespace always fits (see kMinFrameBytes...) while the largest
// response descriptor still fits the header's u32 length. InvalidArgument naming the field
// otherwise.
Status ValidateLimits(const Limits& limits);

// The largest header+descriptor size of a response frame. Responses may exceed max_frame_bytes
// by the metadata they return, so a full batch of maximal metas can always be answered:
// max_frame_bytes + max_batch_keys * (max_meta_bytes + 24). Assumes ValidateLimits passed.
uint64_t MaxResponseFrameBytes(const Limits& limits);

// The largest payload section of one frame: max_batch_keys * max_value_bytes (no overflow for
// limits that pass ValidateLimits).
uint64_t MaxPayloadBytes(const Limits& limits);

// Per-item checks, shared by encoders and decoders and exposed so that a client can reject a
// bad key locally (as a per-key status) instead of failing a whole batch. Each returns OK, or
// InvalidArgument (empty key) / TooLarge naming the limit, e.g.
// "key of 2000 bytes exceeds max_key_bytes 1024".
Status CheckNamespace(std::string_view ns, const Limits& limits);
Status CheckKey(std::string_view key, const Limits& limits);
Status CheckMeta(std::string_view meta, const Limits& limits);
Status CheckValueLength(uint64_t value_length, const Limits& limits);
// TooLarge when `count` exceeds max_batch_keys.
Status CheckBatchCount(uint64_t count, const Limits& limits);

}  // namespace kvport::protocol
