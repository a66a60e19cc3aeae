// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the message encoders and decoders (internal to src/protocol/*.cc).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kvport/status.h"
#include "protocol/frame.h"
#include "protocol/limits.h"
#include "protocol/messages.h"
#include "protocol/wire.h"

namespace kvport::protocol::internal {

// True for the values of kvport::StatusCode this build knows (new codes need a version bump).
bool IsKnownStatusCode(uint8_t v);

// The overall status of a batch with `ok` kOk keys out of `total`.
BatchStatus OverallFromCounts(size_t ok, size_t total);
// The overall status of per-key results that each carry a `status`.
template <typename Results>
BatchStatus OverallOf(const Results& results) {
  size_t ok = 0;
  for (const auto& result : results)
    ok += result.status == StatusCode::kOk;
  return OverallFromCounts(ok, results.size());
}

// Clears `out` and leaves room for the header; the descriptor is appended after it. Reserves
// room for `descriptor_bytes` (an encoder that knows its descriptor's size passes it, so the
// head is allocated once, or not at all when `out` is reused).
void BeginFrame(EncodedFrame* out, size_t descriptor_bytes = 0);
// Whether a frame of `op` may be encoded with header version `version`: InvalidArgument unless
// this build speaks it, NotSupported below OpcodeMinVersion(op) (e.g. ARENA_GET in version 2).
// HELLO and ERROR pass whatever `version` says (they are always kHelloVersion).
Status CheckVersionToEncode(Opcode op, bool response, uint8_t version);
// Checks the descriptor appended since BeginFrame against the limit of its direction
// (max_frame_bytes for requests, MaxResponseFrameBytes for responses) and then writes the
// header in front of it, with payload_length the sum of out->payloads. The header's version is
// `version` (CheckVersionToEncode applies), except for HELLO and ERROR, which are always
// kHelloVersion whatever `version` says.
Status FinishFrame(Opcode op, uint16_t flags, uint64_t request_id, const Limits& limits,
                   uint8_t version, EncodedFrame* out);

// `status` with "<context>: item <index>: " in front of its message.
Status ItemError(std::string_view context, size_t index, const Status& status);

// Decode prologue: the header belongs to this message type and direction, and `descriptor`
// has the length the header announced. InvalidArgument (a caller bug) otherwise. Also repeats
// the header's version, flag and payload rules (Corruption), for headers that did not come
// from DecodeFrameHeader.
Status CheckFrameFor(const FrameHeader& h, std::string_view descriptor, Opcode op, bool response);

// A request with an empty descriptor (NODE_INFO, SHM_ATTACH, UCX_ATTACH): encoded, and checked
// to be empty.
Status EncodeEmpty(Opcode op, uint64_t request_id, const Limits& l, uint8_t version,
                   EncodedFrame* out);
Status DecodeEmpty(Opcode op, const FrameHeader& h, std::string_view descriptor);

// Writes/reads a namespace: u8 length, bytes; checked against max_namespace_bytes.
Status WriteNamespace(WireWriter& w, std::string_view ns, const Limits& limits,
                      std::string_view context);
Status ReadNamespace(WireReader& r, const Limits& limits, std::string_view* ns);

// Writes/reads a name (client_name, server_name, counter names, host_id): u8 length, bytes, at
// most kMaxNameBytes (InvalidArgument naming `field` when encoding a longer one).
inline constexpr size_t kMaxNameBytes = 255;
Status WriteName(WireWriter& w, std::string_view context, std::string_view field,
                 std::string_view name);
Status ReadName(WireReader& r, std::string_view field, std::string_view* name);

// Reads a key's u16 length and bytes (CheckKey applies: an empty key is InvalidArgument).
Status ReadKey(WireReader& r, const Limits& limits, size_t index, std::string_view* key);

// Reads a u32 item count and checks it against max_batch_keys (TooLarge) and against the bytes
// left, given the smallest encoding of one item (Corruption), so a vector of `count` items can
// be sized safely.
Status ReadCount(WireReader& r, const Limits& limits, uint64_t min_item_bytes, uint32_t* count);
// Same, without the batch limit (STATS lists), bounded by the bytes left only.
Status ReadListCount(WireReader& r, std::string_view field, uint64_t min_item_bytes,
                     uint32_t* count);

// Reads a per-key status code; Corruption for a value that is not a known StatusCode.
Status ReadStatusCode(WireReader& r, size_t index, StatusCode* code);
// Reads a response's own status code (an attach response's); Corruption likewise.
Status ReadResponseStatus(WireReader& r, StatusCode* code);
// Reads the u8 overall status of a batch response (Corruption for an unknown value).
Status ReadOverall(WireReader& r, BatchStatus* overall);
// Corruption unless the overall status on the wire agrees with the per-key statuses.
Status CheckOverall(const WireReader& r, BatchStatus wire, BatchStatus derived);

// ---- Encoder-side checks (InvalidArgument / TooLarge naming `context`) -------------------

// InvalidArgument for a per-key status this build does not know.
Status CheckStatusToEncode(std::string_view context, size_t index, StatusCode code);
// TooLarge when `count` exceeds max_batch_keys.
Status CheckBatchToEncode(std::string_view context, uint64_t count, const Limits& limits);
// An any-namespace request names no namespace (InvalidArgument) and needs version
// kAnyNamespaceVersion (NotSupported).
Status CheckAnyNamespaceToEncode(std::string_view context, bool any_namespace, std::string_view ns,
                                 uint8_t version);
// Decoder side of the same rule (the header's flag and version were checked by CheckFrameFor):
// InvalidArgument for a namespace with the any-namespace flag.
Status CheckAnyNamespaceDecoded(const WireReader& r, const FrameHeader& h, std::string_view ns);
inline uint16_t AnyNamespaceFlag(bool any_namespace) {
  return any_namespace ? kFlagAnyNamespace : 0;
}

// ---- Layouts shared by several opcodes ---------------------------------------------------

// True when frames of `version` carry value checksums (MSET and ARENA_RESERVE items, MGET and
// ARENA_GET results, ARENA_COMMIT requests): kChecksumVersion on. Below it the checksum fields are
// not on the wire: encoders leave them out (ARENA_COMMIT refuses them) and decoders set them to 0.
constexpr bool CarriesChecksums(uint8_t version) {
  return version >= kChecksumVersion;
}

// True when a per-key status may come with a meta and a value length (MGET, ARENA_GET results).
inline bool HasObjectInfo(StatusCode code) {
  return code == StatusCode::kOk || code == StatusCode::kTooLarge;
}
// The rules of one MGET or ARENA_GET result: a known status, a meta, a value length and a checksum
// only with HasObjectInfo, each within its limit. Encoder side: InvalidArgument / TooLarge
// naming the item (the checksum rule applies whatever the version, although older versions do
// not carry it: a checksum on a miss is a caller bug); decoder side (status already read by
// ReadStatusCode; `checksum` 0 for frames without checksums): Corruption / TooLarge.
Status CheckResultToEncode(std::string_view context, size_t index, StatusCode status,
                           std::string_view meta, uint64_t value_length, uint64_t checksum,
                           const Limits& limits);
Status CheckResultDecoded(const WireReader& r, size_t index, StatusCode status,
                          uint32_t meta_length, uint64_t value_length, uint64_t checksum,
                          const Limits& limits);

// The descriptor of an MSET or ARENA_RESERVE request: namespace, u32 ttl_seconds, u32 count,
// count x item. An item is (u16 key_len, u32 meta_len, u64 value_len, key, meta) below
// kChecksumVersion and (u16 key_len, u32 meta_len, u64 value_len, u64 checksum, key, meta) from
// it on; below it MsetItem::checksum is not written and decodes as 0. Writing checks the count
// and every item. `payloads` non-null (MSET): every item's value is listed there in item order
// (spans of size 0 omitted; a null value with a non-zero length is InvalidArgument); null
// (ARENA_RESERVE): the value pointers are ignored.
Status WriteMsetDescriptor(WireWriter& w, std::string_view context, std::string_view ns,
                           uint32_t ttl_seconds, const std::vector<MsetItem>& items,
                           const Limits& limits, uint8_t version,
                           std::vector<PayloadSpan>* payloads);
// Reads the whole descriptor of a frame of `version` (ExpectEnd included); item values are null
// and *value_bytes is the sum of the value lengths.
Status ReadMsetDescriptor(WireReader& r, const Limits& limits, uint8_t version,
                          std::string_view* ns, uint32_t* ttl_seconds, std::vector<MsetItem>* items,
                          uint64_t* value_bytes);
// Bytes of one MSET / ARENA_RESERVE item in a frame of `version`, without its key and meta.
constexpr uint64_t MsetItemFixedBytes(uint8_t version) {
  return CarriesChecksums(version) ? 2 + 4 + 8 + 8 : 2 + 4 + 8;
}

// The descriptor of an MGET or ARENA_GET request: namespace, u32 count,
// count x (u16 key_len, u64 buffer_capacity, key). Writing checks the any-namespace rule, the
// count and every key.
Status WriteMgetDescriptor(WireWriter& w, std::string_view context, std::string_view ns,
                           const std::vector<MgetKey>& keys, bool any_namespace,
                           const Limits& limits, uint8_t version);
// Reads the whole descriptor (ExpectEnd included), applying the any-namespace rule of `h`.
Status ReadMgetDescriptor(WireReader& r, const FrameHeader& h, const Limits& limits,
                          std::string_view* ns, std::vector<MgetKey>* keys);

// A whole response frame of per-key statuses (MSET, MDEL, ARENA_COMMIT):
// u8 overall, u32 count, count x u8 status.
Status EncodeStatuses(Opcode op, uint64_t request_id, const std::vector<StatusCode>& statuses,
                      const Limits& limits, uint8_t version, EncodedFrame* out);
Status DecodeStatuses(Opcode op, const FrameHeader& h, std::string_view descriptor,
                      const Limits& limits, std::vector<StatusCode>* statuses);

}  // namespace kvport::protocol::internal
