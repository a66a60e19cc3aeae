// SPDX-License-Identifier: Apache-2.0
// The fixed frame header of the kvport wire protocol (docs/protocol.md is normative).
//
// A frame is three consecutive parts:
//   header      kFrameHeaderSize (32) bytes, fixed layout, decoded by DecodeFrameHeader;
//   descriptor  header.descriptor_length bytes: namespace, counts, keys, metas, value lengths,
//               statuses; bounded by the limits, decoded by the messages.h decoders into views;
//   payload     header.payload_length bytes: the values, back to back in item order. The codec
//               never parses or copies them: a receiver reads them straight into their final
//               place (readv), a sender writes them from where they are (writev).
//
// Header layout (all integers little-endian):
//   off size field
//     0    4 magic             "KVPT" (bytes 4B 56 50 54)
//     4    1 version           1 .. kMaxProtocolVersion (HELLO and ERROR frames: always 1;
//                              NODE_INFO, SHM_ATTACH and ARENA_* frames: kShmVersion on)
//     5    1 opcode            Opcode
//     6    2 flags             kFlagResponse | kFlagMetaOnly | kFlagAnyNamespace (version 2 on);
//                              other bits reserved, must be 0
//     8    8 request_id        chosen by the client, echoed by the response
//    16    4 descriptor_length bytes of descriptor after the header
//    20    4 reserved          must be 0
//    24    8 payload_length    bytes of payload after the descriptor
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/status.h"
#include "protocol/limits.h"

namespace kvport::protocol {

inline constexpr size_t kFrameHeaderSize = 32;
inline constexpr uint32_t kFrameMagic = 0x5450564B;  // "KVPT" as little-endian bytes

// Versions this build speaks. Bump kMaxProtocolVersion whenever any byte layout or meaning
// changes (docs/protocol.md, "Versioning"). HELLO and ERROR frames are frozen at version 1 so
// that peers of any version can negotiate and report errors.
//   1: the base protocol.
//   2: adds the kFlagAnyNamespace request flag (MGET, MEXIST, MDEL); every byte layout is
//      unchanged, so a version 2 frame without that flag differs from version 1 only in its
//      version byte.
//   3: adds the opcodes NODE_INFO and SHM_ATTACH, ARENA_RESERVE, ARENA_COMMIT, ARENA_GET,
//   ARENA_RELEASE
//      (the same-host shared-memory transport) and kFlagAnyNamespace on ARENA_GET requests; every
//      other byte layout is unchanged, so a version 3 frame of an older opcode differs from
//      version 2 only in its version byte.
//   4: access control and scale (docs/protocol.md, "Version 4"): a HELLO request may end with a
//      token; the status code PermissionDenied (13); STATS requests name a page of namespaces
//      and STATS responses say whether more follow; LIST cursors belong to the session. Every
//      other byte layout is unchanged.
//   5: a HELLO response ends with the namespace the session's token names for calls that name
//      none (docs/protocol.md, "Version 5"). Every other byte layout is unchanged.
//   6: an OK SHM_ATTACH response carries the session's lease word (its offset and generation)
//      after arena_bytes, and two descriptors: the arena's memfd, then the lease words' memfd
//      (docs/protocol.md, "Version 6"). Every other byte layout is unchanged.
//   7: ARENA_RELEASE has no response: the node releases the leases and answers nothing (an ERROR
//      only for a request it cannot serve), so a shared-memory get is one exchange and a
//      message the client sends (docs/protocol.md, "Version 7"). No byte layout changes.
//   8: adds the opcode UCX_ATTACH (a TCP session's one-sided access to the arena over UCX, since
//      withdrawn: version 9) and
//      the NODE_INFO offer bit kOfferUcx (docs/protocol.md, "Version 8"). Every other byte layout
//      is unchanged.
//   9: UCX_ATTACH answers with the node's UCX listener port and a session key for messages the
//      node checks, and no longer hands out remote keys to its memory; UCX_ATTACH is valid from
//      version 9 only (docs/protocol.md, "Version 9"). Every other byte layout is unchanged.
inline constexpr uint8_t kMinProtocolVersion = 1;
inline constexpr uint8_t kMaxProtocolVersion = 10;
inline constexpr uint8_t kHelloVersion = 1;
// The first version in which kFlagAnyNamespace is valid.
inline constexpr uint8_t kAnyNamespaceVersion = 2;
// The first version in which NODE_INFO, SHM_ATTACH and the ARENA_* opcodes are valid.
inline constexpr uint8_t kShmVersion = 3;
// The first version with tokens, PermissionDenied and paged STATS.
inline constexpr uint8_t kAccessVersion = 4;
// The first version whose HELLO response carries the token's default namespace.
inline constexpr uint8_t kDefaultNamespaceVersion = 5;
// The first version whose shared-memory sessions have a lease word.
inline constexpr uint8_t kLeaseWordVersion = 6;
// The first version in which ARENA_RELEASE is not answered.
inline constexpr uint8_t kUnansweredReleaseVersion = 7;
// The first version with UCX_ATTACH as it is now (version 8's handed out remote keys to node
// memory and is served no more).
inline constexpr uint8_t kUcxVersion = 9;
// Values carry their checksum (xxh3-64; 0: none) end to end: MSET items and ARENA_COMMIT items from
// the writer, MGET and ARENA_GET results to the reader (docs/protocol.md, "Version 10").
inline constexpr uint8_t kChecksumVersion = 10;

enum class Opcode : uint8_t {
  kHello = 1,   // version negotiation; must be the first request on a connection
  kPing = 2,    // liveness; empty descriptors
  kMset = 3,    // store values (request carries the payload)
  kMget = 4,    // fetch values or only their metas (response carries the payload)
  kMexist = 5,  // per-key existence and value length
  kMdel = 6,    // per-key delete
  kList = 7,    // one page of the keys of a namespace
  kStats = 8,   // server counters and per-namespace usage
  // Version kShmVersion on (docs/protocol.md, "Shared memory (version 3)"); no payloads.
  kNodeInfo = 9,       // who the node is and which transports it offers
  kShmAttach = 10,     // Unix-socket sessions: the arena's memfd rides with the response
  kArenaReserve = 11,  // MSET without a payload: the node reserves arena space, says where
  kArenaCommit = 12,   // makes a reservation's items visible (or drops them)
  kArenaGet = 13,      // MGET answered with arena offsets; hits pinned under a lease
  kArenaRelease = 14,  // ends leases
  kError = 15,         // response only: the request was malformed; the sender closes after it
  // Version kUcxVersion on (docs/protocol.md, "Version 9").
  kUcxAttach = 16,  // the node's UCX listener and a session key for node-checked transfers
};

// A short stable name such as "MSET"; "UNKNOWN" for values outside Opcode.
std::string_view OpcodeName(Opcode op);
// True for the values listed in Opcode.
bool IsKnownOpcode(uint8_t op);
// The first protocol version in which `op` is valid: kShmVersion for NODE_INFO and the ARENA_*
// opcodes, kUcxVersion for UCX_ATTACH, kMinProtocolVersion for the others.
uint8_t OpcodeMinVersion(Opcode op);
// True for the two frames that carry a payload section: MSET requests and MGET responses.
bool CarriesPayload(Opcode op, bool is_response);

inline constexpr uint16_t kFlagResponse = 0x0001;  // set on every response (and ERROR)
inline constexpr uint16_t kFlagMetaOnly = 0x0002;  // MGET request and its response only
// Version >= kAnyNamespaceVersion, MGET, MEXIST, MDEL and (version >= kShmVersion) ARENA_GET
// requests only (never on a response: it does not change the response's layout, so unlike
// kFlagMetaOnly it is not echoed). The request's namespace must be empty; each key is matched in
// every namespace that holds it (docs/protocol.md, "Any-namespace requests").
inline constexpr uint16_t kFlagAnyNamespace = 0x0004;
// The flag bits a frame of `version` may have set at all (which opcodes may carry which is
// checked separately); any other bit is reserved.
constexpr uint16_t KnownFlags(uint8_t version) {
  return version >= kAnyNamespaceVersion ? (kFlagResponse | kFlagMetaOnly | kFlagAnyNamespace)
                                         : (kFlagResponse | kFlagMetaOnly);
}
// True for the requests that may carry kFlagAnyNamespace: MGET, MEXIST, MDEL, ARENA_GET.
bool AcceptsAnyNamespace(Opcode op);

struct FrameHeader {
  uint8_t version = kMinProtocolVersion;
  Opcode opcode = Opcode::kPing;
  uint16_t flags = 0;
  uint64_t request_id = 0;
  uint32_t descriptor_length = 0;
  uint64_t payload_length = 0;

  bool is_response() const { return (flags & kFlagResponse) != 0; }
  bool meta_only() const { return (flags & kFlagMetaOnly) != 0; }
  bool any_namespace() const { return (flags & kFlagAnyNamespace) != 0; }
  // kFrameHeaderSize + descriptor_length: the bytes a receiver reads before any payload.
  uint64_t head_length() const { return kFrameHeaderSize + descriptor_length; }
};

// Writes the kFrameHeaderSize bytes of `header` at `out`. Does not validate.
void StoreFrameHeader(const FrameHeader& header, char* out);
// Appends the kFrameHeaderSize bytes of `header` to `out`. Does not validate.
void AppendFrameHeader(const FrameHeader& header, std::string* out);

// Decodes the first kFrameHeaderSize bytes of `bytes` (more may follow; they are not looked
// at). Everything the header alone can tell is checked here, before the caller allocates for
// the descriptor or the payload:
//   Corruption:   fewer than kFrameHeaderSize bytes, bad magic, unknown opcode, an opcode
//                 newer than the frame's version (OpcodeMinVersion: "... needs protocol version
//                 3"), reserved flag bits (KnownFlags of the frame's version) or reserved field
//                 set, kFlagMetaOnly on anything but MGET, kFlagAnyNamespace on anything but an
//                 MGET, MEXIST, MDEL or ARENA_GET request, ERROR without kFlagResponse, a payload
//                 on a frame that never carries one;
//   NotSupported: a version outside [kMinProtocolVersion, kMaxProtocolVersion], or HELLO/ERROR
//                 with a version other than kHelloVersion;
//   TooLarge:     head_length() above max_frame_bytes (requests) or MaxResponseFrameBytes
//                 (responses), payload_length above MaxPayloadBytes.
// Checking that the version equals the one negotiated on the connection is the caller's job.
Status DecodeFrameHeader(std::string_view bytes, const Limits& limits, FrameHeader* out);

// One value to send from where it lies (a caller's buffer, an arena extent).
struct PayloadSpan {
  const void* data = nullptr;
  uint64_t size = 0;
};

// What an encoder produces: `head` (header + descriptor, owned) followed on the wire by the
// payload spans in order (borrowed: they must stay valid until written). Spans of size 0 are
// never listed. The sizes of `payloads` sum to the header's payload_length.
struct EncodedFrame {
  std::string head;
  std::vector<PayloadSpan> payloads;

  uint64_t payload_length() const;
  // head followed by the payload bytes in one string: for tests, fuzzing and small frames.
  std::string Flatten() const;
};

// A complete frame held in memory, split into its parts (views into the input).
struct FrameView {
  FrameHeader header;
  std::string_view descriptor;
  std::string_view payload;
};

// Splits a complete frame: DecodeFrameHeader, then requires `bytes` to hold exactly
// head_length() + payload_length bytes (Corruption "truncated ..." or "trailing bytes ..."
// otherwise). For tests, the fuzzer and small frames; servers read part by part.
Status SplitFrame(std::string_view bytes, const Limits& limits, FrameView* out);

}  // namespace kvport::protocol
