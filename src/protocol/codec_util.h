// Helpers shared by the message encoders and decoders (internal to src/protocol/*.cc).
#pragma once

#include <cstdint>
#include <string_view>

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

// Clears `out` and leaves room for the header; the descriptor is appended after it.
void BeginFrame(EncodedFrame* out);
// Checks the descriptor appended since BeginFrame against the limit of its direction
// (max_frame_bytes for requests, MaxResponseFrameBytes for responses) and then writes the
// header in front of it, with payload_length the sum of out->payloads. The header's version is
// `version` (InvalidArgument unless this build speaks it), except for HELLO and ERROR, which
// are always kHelloVersion whatever `version` says.
Status FinishFrame(Opcode op, uint16_t flags, uint64_t request_id, const Limits& limits,
                   uint8_t version, EncodedFrame* out);

// `status` with "<context>: item <index>: " in front of its message.
Status ItemError(std::string_view context, size_t index, const Status& status);

// Decode prologue: the header belongs to this message type and direction, and `descriptor`
// has the length the header announced. InvalidArgument (a caller bug) otherwise. Also repeats
// the header's flag rules (Corruption), for headers that did not come from DecodeFrameHeader.
Status CheckFrameFor(const FrameHeader& h, std::string_view descriptor, Opcode op, bool response);

// Writes/reads a namespace: u8 length, bytes; checked against max_namespace_bytes.
Status WriteNamespace(WireWriter& w, std::string_view ns, const Limits& limits,
                      std::string_view context);
Status ReadNamespace(WireReader& r, const Limits& limits, std::string_view* ns);

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
// Reads the u8 overall status of a batch response (Corruption for an unknown value).
Status ReadOverall(WireReader& r, BatchStatus* overall);
// Corruption unless the overall status on the wire agrees with the per-key statuses.
Status CheckOverall(const WireReader& r, BatchStatus wire, BatchStatus derived);

}  // namespace kvport::protocol::internal
