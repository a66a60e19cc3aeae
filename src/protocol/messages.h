// SPDX-License-Identifier: Apache-2.0
// Requests and responses of the kvport wire protocol, and their encoders and decoders.
//
// Layouts are in docs/protocol.md (normative). Conventions shared by every message:
//
// * Views, not copies. Decoded messages hold std::string_views into the descriptor bytes the
//   decoder was given; they are valid while those bytes are. Encoders read the views and
//   pointers of the message only during the call, except the value pointers, which the
//   returned EncodedFrame borrows as payload spans.
// * Payloads stay out of the codec. An MSET request lists value lengths in its descriptor and
//   its values follow as the payload section, in item order. An MGET response does the same for
//   the items for which CarriesPayload(i) is true: status kOk and not meta-only; every other
//   item (miss, buffer too small, meta-only) contributes 0 payload bytes.
// * Encode(request_id, message, limits, out, version) overwrites *out (reusing its capacity)
//   with the header + descriptor and the payload spans; it fails with InvalidArgument or
//   TooLarge (naming the field and item index) when the message breaks the limits, so nothing
//   invalid is ever sent. `version` is the header's version byte: the version negotiated on the
//   connection (default kMinProtocolVersion, which every peer speaks; kShmVersion for the
//   version 3 messages, which no older version has). HELLO and ERROR frames are always
//   kHelloVersion whatever `version` says. A version this build does not speak is InvalidArgument;
//   a field the version cannot express (any_namespace below version 2) or an opcode it does not
//   have (NODE_INFO, SHM_ATTACH and ARENA_* below kShmVersion) is NotSupported. Decode(header,
//   descriptor, limits, out) overwrites *out (reusing its vectors' capacity); `header` is what
//   DecodeFrameHeader returned and `descriptor` its descriptor_length bytes. Counts are checked
//   against max_batch_keys and against the bytes actually present before any vector is sized.
//   Errors: Corruption (truncation, trailing bytes, counts that disagree with the bytes,
//   payload_length that disagrees with the value lengths, an unknown status code), TooLarge /
//   InvalidArgument (a limit broken, an empty key), InvalidArgument when header.opcode or the
//   response flag does not match the message type.
// * Batch responses carry an overall status on the wire: kOk when every key is kOk (or the
//   batch is empty), kFailed when none is, kPartial otherwise. Encoders derive it; decoders check
//   it agrees with the per-key statuses. Per-key statuses are kvport::StatusCode values.
// * A malformed request is answered with an ErrorResponse (opcode kError) and the connection is
//   closed by its sender; nothing stored is touched.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "kvport/status.h"
#include "protocol/frame.h"
#include "protocol/limits.h"

namespace kvport::protocol {

enum class BatchStatus : uint8_t { kOk = 0, kPartial = 1, kFailed = 2 };
std::string_view BatchStatusName(BatchStatus s);  // "OK", "PARTIAL", "FAILED"
// kOk if every code is kOk or there are none, kFailed if none is, kPartial otherwise.
BatchStatus OverallStatus(const std::vector<StatusCode>& codes);

// ---- HELLO -------------------------------------------------------------------------------

// Sent first on every connection, always with header version kHelloVersion.
struct HelloRequest {
  uint8_t min_version = kMinProtocolVersion;
  uint8_t max_version = kMaxProtocolVersion;
  std::string_view client_name;  // free text for logs, at most 255 bytes (may be empty)
  // The client's secret for a node that requires one (docs/security.md): 1..255 bytes, or empty
  // for none. Encoded only when non-empty, as a field appended after client_name, and only with
  // max_version >= kAccessVersion (encoders refuse it otherwise with InvalidArgument; decoders
  // reject it as Corruption). A node older than version 4 refuses such a HELLO (trailing bytes).
  std::string_view token;
};
// The largest HELLO descriptor: both versions, then client_name and token of at most 255 bytes
// each with their u8 lengths. Before HELLO succeeds a node reads nothing larger (a peer that has
// not authenticated cannot make it buffer more than this).
inline constexpr uint64_t kMaxHelloDescriptorBytes = 2 + 2 * (1 + 255);
// The server's answer: the version both sides use from now on, and the server's limits, which
// the client must use to encode requests and decode responses.
// From version kDefaultNamespaceVersion on it ends with `default_namespace`: the namespace the
// session's token names for calls that name none (docs/security.md), or nullopt (an open node, a
// token that names none). Encoders refuse one for an older version (NotSupported).
struct HelloResponse {
  uint8_t version = kMaxProtocolVersion;
  Limits limits;
  std::string_view server_name;                       // e.g. "kvport 0.1.0", at most 255 bytes
  std::optional<std::string_view> default_namespace;  // limits.max_namespace_bytes
};
// The highest version in both [request.min_version, request.max_version] and this build's
// [kMinProtocolVersion, kMaxProtocolVersion]; NotSupported naming both ranges if they do not
// overlap (the server then sends an ErrorResponse with that status and closes).
Result<uint8_t> NegotiateVersion(const HelloRequest& request);

// ---- PING / STATS ------------------------------------------------------------------------

struct PingRequest {};
struct PingResponse {};
// Version 4 requests name a page of the per-namespace usage (namespaces in ascending bytewise
// order): those after `after` (all of them when from_start), at most max_namespaces of them (0:
// as many as fit in the frame). Older versions' STATS requests are empty and get one page of
// as many as fit; encoders refuse a page other than the default below version 4 (NotSupported).
struct StatsRequest {
  bool from_start = true;
  std::string_view after;  // when !from_start: the last namespace of the previous page
  uint32_t max_namespaces = 0;
};

struct StatsCounter {
  std::string_view name;  // snake_case, 1..255 bytes, e.g. "hits", "used_bytes", "op_mget"
  uint64_t value = 0;
};
struct NamespaceUsage {
  std::string_view ns;  // limits.max_namespace_bytes
  uint64_t objects = 0;
  uint64_t bytes = 0;  // value + meta bytes held for the namespace
};
// Counter names are not fixed by the protocol (docs/protocol.md lists those the server sends);
// a client ignores names it does not know.
// Version 4 adds `more`: namespaces beyond this page exist (ask again after the last one); older
// versions cannot express it (a node that had to leave namespaces out says how many in the
// counter "namespaces_omitted").
struct StatsResponse {
  std::vector<StatsCounter> counters;
  std::vector<NamespaceUsage> namespaces;
  bool more = false;
};

// ---- MSET --------------------------------------------------------------------------------

struct MsetItem {
  std::string_view key;       // 1 .. max_key_bytes
  std::string_view meta;      // 0 .. max_meta_bytes, stored atomically with the value
  uint64_t value_length = 0;  // 0 .. max_value_bytes
  // Encode: the value's bytes (may be null only when value_length is 0); the frame borrows
  // them. Decode: always null; the values are the payload section, in item order.
  const void* value = nullptr;
  // The value's xxh3-64, computed by its writer; 0: none. On the wire from kChecksumVersion on
  // (MSET; ARENA_RESERVE ignores it: its checksums come with ARENA_COMMIT).
  uint64_t checksum = 0;
};
struct MsetRequest {
  std::string_view ns;       // 0 .. max_namespace_bytes ("" is the default namespace)
  uint32_t ttl_seconds = 0;  // 0: never expires (an EIC ttl of -1 maps to 0)
  std::vector<MsetItem> items;
};
// One status per item, in item order: kOk, kNoSpace, kTooLarge, kInvalidArgument, ...
struct MsetResponse {
  std::vector<StatusCode> statuses;
  BatchStatus overall() const { return OverallStatus(statuses); }
};

// ---- MGET --------------------------------------------------------------------------------

inline constexpr uint64_t kUnlimitedCapacity = std::numeric_limits<uint64_t>::max();

struct MgetKey {
  std::string_view key;
  // The bytes the caller can receive for this key. A stored value longer than this is answered
  // kTooLarge with its true value_length and no payload, so a buffer too small is a per-key
  // error, never an overflow. Ignored for meta-only requests.
  uint64_t buffer_capacity = kUnlimitedCapacity;
};
// Any-namespace requests (header flag kFlagAnyNamespace, protocol version 2 on; MGET, MEXIST and
// MDEL only). `ns` must be empty (encoders and decoders reject anything else with
// InvalidArgument; encoders refuse the flag below version 2 with NotSupported). Each key is
// matched in every namespace that holds it, searching the default namespace "" first and then
// the others in ascending bytewise order:
//   MEXIST  OK with the value length of the first match;
//   MGET    the first match (its meta and value; META_ONLY and buffer capacities apply as usual);
//   MDEL    deletes the key in every namespace that holds it: OK if at least one was deleted.
// Responses are those of ordinary requests and do not carry the flag.
struct MgetRequest {
  std::string_view ns;
  bool meta_only = false;  // header flag kFlagMetaOnly: metas and lengths, no payloads
  std::vector<MgetKey> keys;
  bool any_namespace = false;  // header flag kFlagAnyNamespace (see above); ns must be empty
};
struct MgetResult {
  // kOk (hit), kNotFound (miss or expired), kTooLarge (longer than buffer_capacity), ...
  StatusCode status = StatusCode::kNotFound;
  // For kOk and kTooLarge: the stored meta and the stored value's length. For every other
  // status: empty and 0 (encoders refuse anything else, decoders reject it).
  std::string_view meta;
  uint64_t value_length = 0;
  // Encode: the value's bytes when the item carries a payload (pinned by the server until the
  // frame is written). Decode: always null.
  const void* value = nullptr;
  // kOk and kTooLarge: the stored value's checksum as its writer gave it (0: none); else 0. On
  // the wire from kChecksumVersion on.
  uint64_t checksum = 0;
};
struct MgetResponse {
  bool meta_only = false;           // echoes the request (header flag kFlagMetaOnly)
  std::vector<MgetResult> results;  // one per requested key, in request order

  // True when results[i]'s value bytes are in the payload section (kOk and not meta-only).
  bool CarriesPayload(size_t i) const { return !meta_only && results[i].status == StatusCode::kOk; }
  BatchStatus overall() const;
};
// Client-side check of a decoded response against the request it answers: same count, same
// meta_only, and every item that carries a payload fits its key's buffer_capacity. Corruption
// naming the item otherwise (the server broke the protocol: close the connection).
Status CheckMgetResponse(const MgetRequest& request, const MgetResponse& response);

// ---- MEXIST / MDEL -----------------------------------------------------------------------

struct MexistRequest {
  std::string_view ns;
  std::vector<std::string_view> keys;
  bool any_namespace = false;  // header flag kFlagAnyNamespace (see MgetRequest); ns must be empty
};
struct ExistResult {
  StatusCode status = StatusCode::kNotFound;  // kOk: present and not expired
  uint64_t value_length = 0;                  // when kOk; 0 otherwise
};
struct MexistResponse {
  std::vector<ExistResult> results;
  BatchStatus overall() const;
};

struct MdelRequest {
  std::string_view ns;
  std::vector<std::string_view> keys;
  bool any_namespace = false;  // header flag kFlagAnyNamespace (see MgetRequest); ns must be empty
};
// kOk: deleted (any-namespace: in at least one namespace); kNotFound: was not there.
struct MdelResponse {
  std::vector<StatusCode> statuses;
  BatchStatus overall() const { return OverallStatus(statuses); }
};

// ---- LIST --------------------------------------------------------------------------------

// One page of the keys of a namespace. The cursor is opaque to the client: 0 starts a listing,
// each response gives the next one, and a next_cursor of 0 means the listing is complete. Keys
// written or deleted during a listing may or may not appear; a key present for the whole
// listing appears at least once.
struct ListRequest {
  std::string_view ns;
  uint64_t cursor = 0;
  uint32_t max_keys = 1024;  // 1 .. max_batch_keys
};
struct ListResponse {
  uint64_t next_cursor = 0;
  std::vector<std::string_view> keys;  // at most the request's max_keys
};

// ---- ERROR -------------------------------------------------------------------------------

inline constexpr size_t kMaxErrorMessageBytes = 1024;

// The answer to a malformed request (echoing its request id when the header was readable, 0
// otherwise); its sender closes the connection after writing it.
struct ErrorResponse {
  StatusCode code = StatusCode::kCorruption;  // never kOk
  std::string_view message;                   // encoders truncate to kMaxErrorMessageBytes
};

// ---- Version 3: node identity and the same-host shared-memory transport -------------------
//
// docs/protocol.md, "Shared memory (version 3)". These frames exist from kShmVersion on (a v1/v2
// frame of these opcodes is Corruption; encoders refuse them below version 3 with NotSupported),
// carry no payload section (payload_length 0) and never carry kFlagMetaOnly; ARENA_GET requests may
// carry kFlagAnyNamespace. Offsets are byte offsets into the node's arena as mapped from the memfd
// of SHM_ATTACH; the codec cannot check them against the arena's size (the
// CheckShm*Response functions below can, given arena_bytes).

// ---- NODE_INFO (version 3) -- who the node is and which transports it offers.
struct NodeInfoRequest {};
// The node maps its arena for clients on unix_path (SHM_ATTACH on a session there).
inline constexpr uint32_t kOfferSharedMemory = 0x1;
inline constexpr uint32_t kOfferUcx = 0x2;        // version 9: UCX_ATTACH is served on the TCP port
inline constexpr size_t kMaxHostIdBytes = 255;    // host_id is length-prefixed with a u8
inline constexpr size_t kMaxUnixPathBytes = 107;  // sun_path of a sockaddr_un, less its NUL
struct NodeInfoResponse {
  uint64_t node_id = 0;  // random per node process; the same on every listener of the node
  uint32_t offers = 0;   // kOffer* bits; unknown bits are ignored by receivers (future transports)
  // The node host's boot id (/proc/sys/kernel/random/boot_id), 0..kMaxHostIdBytes bytes.
  std::string_view host_id;
  // The node's Unix-domain socket, 0..kMaxUnixPathBytes bytes (sockaddr_un); empty: none.
  // kOfferSharedMemory requires a non-empty one (encoders: InvalidArgument; decoders:
  // Corruption).
  std::string_view unix_path;
};

// ---- SHM_ATTACH (version 3, Unix-socket sessions) -- asks for the arena.
struct ShmAttachRequest {};
struct ShmAttachResponse {
  // kOk: the arena's memfd rides with this frame (SCM_RIGHTS; from version 6 on, followed by the
  // lease words' memfd); otherwise why not (kNotSupported: not a Unix-socket session or no
  // shared memory on this node, ...).
  StatusCode status = StatusCode::kOk;
  uint64_t arena_bytes = 0;  // kOk: > 0, the arena's size; otherwise 0
  // Empty when kOk; otherwise 1..kMaxErrorMessageBytes bytes (encoders truncate longer ones).
  std::string_view reason;
  // Version 6 (on the wire before reason_length), kOk: the session's lease word, at this byte
  // offset (a multiple of 8) of the lease words' memfd, holds lease_generation until the node ends
  // the session's leases (then it holds another value, before any leased byte is reused). Otherwise
  // 0.
  uint64_t lease_word_offset = 0;
  uint64_t lease_generation = 0;
};

// ---- UCX_ATTACH (version 9) -- the arena over UCX, for a TCP session.
// Once granted, the session's ARENA_RESERVE / ARENA_COMMIT / ARENA_GET / ARENA_RELEASE are served
// as on a shared-memory session, and the client moves the bytes as UCX messages to the node's UCX
// listener (the UcxPut / UcxGet below), each carrying the session key; the node checks every
// range against what the session holds before it copies (docs/protocol.md, "Version 9").
inline constexpr size_t kUcxSessionKeyBytes = 16;
struct UcxAttachRequest {};
struct UcxAttachResponse {
  StatusCode status = StatusCode::kOk;
  // kOk: the port of the node's UCX listener (on the address this session's TCP connection
  // reached), the session key (kUcxSessionKeyBytes bytes) and the arena's size. Otherwise all
  // empty and 0.
  uint16_t ucx_port = 0;
  std::string_view session_key;
  uint64_t arena_bytes = 0;
  // Empty when kOk; otherwise 1..kMaxErrorMessageBytes bytes (encoders truncate longer ones).
  std::string_view reason;
};

// ---- Messages over UCX (version 9): UCX active messages between a UCX-attached client and the
// node's UCX listener. The header is the fixed layout below (little-endian); a data part follows
// where noted. A message whose header is not exactly its layout is dropped.
enum class UcxMessage : unsigned {
  kPut = 1,      // session_key[16] u64 offset u64 token; data: the bytes for [offset, +length)
  kPutDone = 2,  // u64 token u8 status: the put's bytes are in the arena (kOk), or why not
  kGet = 3,      // session_key[16] u64 offset u64 bytes u64 token
  kGetDone = 4,  // u64 token u8 status; data: the `bytes` requested when kOk, none otherwise
};
struct UcxPut {
  std::string_view session_key;
  uint64_t offset = 0;
  uint64_t token = 0;
};
struct UcxGet {
  std::string_view session_key;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t token = 0;
};
struct UcxDone {
  uint64_t token = 0;
  StatusCode status = StatusCode::kOk;
};
std::string EncodeUcxPut(const UcxPut& m);
std::string EncodeUcxGet(const UcxGet& m);
std::string EncodeUcxDone(const UcxDone& m);
// Corruption for a header that is not exactly the layout (or an unknown status code).
Status DecodeUcxPut(std::string_view header, UcxPut* out);
Status DecodeUcxGet(std::string_view header, UcxGet* out);
Status DecodeUcxDone(std::string_view header, UcxDone* out);

// ---- ARENA_RESERVE -- MSET without a payload: the node reserves space and says where.
struct ArenaReserveRequest {  // the descriptor layout of an MSET request; payload_length 0
  std::string_view ns;
  uint32_t ttl_seconds = 0;
  std::vector<MsetItem> items;  // value pointers unused: encoders ignore them, decoders set null
};
struct ArenaReservation {
  StatusCode status = StatusCode::kOk;
  uint64_t offset = 0;  // arena offset of the reserved value_length bytes when kOk, else 0
};
struct ArenaReserveResponse {
  uint64_t reservation_id = 0;          // != 0 iff at least one item is kOk
  std::vector<ArenaReservation> items;  // one per request item
  BatchStatus overall() const;
};
// Client-side check of a decoded response against the request it answers: same count, and every
// kOk item's [offset, offset + value_length) lies within an arena of `arena_bytes`. Corruption
// naming the item otherwise (the node broke the protocol: close the session).
Status CheckArenaReserveResponse(const ArenaReserveRequest& request,
                                 const ArenaReserveResponse& response,
                                 uint64_t arena_bytes = kUnlimitedCapacity);

// ---- ARENA_COMMIT -- makes a reservation's items visible (or drops them).
struct ArenaCommitRequest {
  uint64_t reservation_id = 0;  // != 0
  // One per item of the ARENA_RESERVE request: 1 commit, 0 abort; other values Corruption.
  std::vector<uint8_t> commit;
  // From kChecksumVersion on, one per item (its value's checksum, 0: none); before, empty
  // (decoders leave it empty, encoders refuse one of another length).
  std::vector<uint64_t> checksums;
};
// The MSET response layout: one status per item of the commit, in item order.
struct ArenaCommitResponse {
  std::vector<StatusCode> statuses;
  BatchStatus overall() const { return OverallStatus(statuses); }
};

// ---- ARENA_GET -- MGET answered with arena offsets; hits pinned under a lease.
struct ArenaGetRequest {  // the descriptor layout of an MGET request; META_ONLY not allowed
  std::string_view ns;
  std::vector<MgetKey> keys;
  bool any_namespace = false;  // header flag kFlagAnyNamespace, as for MGET
};
struct ArenaGetResult {
  // As MgetResult: kOk, kNotFound, kTooLarge (longer than buffer_capacity), ...
  StatusCode status = StatusCode::kNotFound;
  std::string_view meta;      // kOk and kTooLarge: the stored meta; else empty
  uint64_t value_length = 0;  // kOk and kTooLarge: stored length; else 0
  uint64_t offset = 0;        // kOk: arena offset of the value; else 0
  uint64_t checksum = 0;      // as MgetResult's (kChecksumVersion on)
};
struct ArenaGetResponse {
  // != 0 iff at least one result is kOk: every kOk value stays pinned until ARENA_RELEASE of this
  // id or the session ends.
  uint64_t lease_id = 0;
  std::vector<ArenaGetResult> results;  // one per requested key, in request order
  BatchStatus overall() const;
};
// Client-side check of a decoded response against the request it answers: same count, every kOk
// value_length <= its key's buffer_capacity, and every kOk [offset, offset + value_length) within
// an arena of `arena_bytes`. Corruption naming the item otherwise.
Status CheckArenaGetResponse(const ArenaGetRequest& request, const ArenaGetResponse& response,
                             uint64_t arena_bytes = kUnlimitedCapacity);

// ---- ARENA_RELEASE -- ends leases; the client does not need to wait for the answer.
struct ArenaReleaseRequest {
  std::vector<uint64_t> lease_ids;  // 1..max_batch_keys ids, none 0
};
struct ArenaReleaseResponse {
  uint32_t released = 0;  // how many of them were live leases
};

// ---- Encoders ----------------------------------------------------------------------------

Status EncodeRequest(uint64_t request_id, const HelloRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t version = kMinProtocolVersion);
Status EncodeRequest(uint64_t request_id, const PingRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t version = kMinProtocolVersion);
Status EncodeRequest(uint64_t request_id, const StatsRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t version = kMinProtocolVersion);
Status EncodeRequest(uint64_t request_id, const MsetRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t version = kMinProtocolVersion);
Status EncodeRequest(uint64_t request_id, const MgetRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t version = kMinProtocolVersion);
Status EncodeRequest(uint64_t request_id, const MexistRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version = kMinProtocolVersion);
Status EncodeRequest(uint64_t request_id, const MdelRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t version = kMinProtocolVersion);
Status EncodeRequest(uint64_t request_id, const ListRequest& m, const Limits& l, EncodedFrame* out,
                     uint8_t version = kMinProtocolVersion);
Status EncodeRequest(uint64_t request_id, const NodeInfoRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version = kShmVersion);
Status EncodeRequest(uint64_t request_id, const ShmAttachRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version = kShmVersion);
Status EncodeRequest(uint64_t request_id, const ArenaReserveRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version = kShmVersion);
Status EncodeRequest(uint64_t request_id, const ArenaCommitRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version = kShmVersion);
Status EncodeRequest(uint64_t request_id, const ArenaGetRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version = kShmVersion);
Status EncodeRequest(uint64_t request_id, const ArenaReleaseRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version = kShmVersion);
Status EncodeRequest(uint64_t request_id, const UcxAttachRequest& m, const Limits& l,
                     EncodedFrame* out, uint8_t version = kUcxVersion);

Status EncodeResponse(uint64_t request_id, const HelloResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kMinProtocolVersion);
Status EncodeResponse(uint64_t request_id, const PingResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kMinProtocolVersion);
Status EncodeResponse(uint64_t request_id, const StatsResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kMinProtocolVersion);
Status EncodeResponse(uint64_t request_id, const MsetResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kMinProtocolVersion);
Status EncodeResponse(uint64_t request_id, const MgetResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kMinProtocolVersion);
Status EncodeResponse(uint64_t request_id, const MexistResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kMinProtocolVersion);
Status EncodeResponse(uint64_t request_id, const MdelResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kMinProtocolVersion);
Status EncodeResponse(uint64_t request_id, const ListResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kMinProtocolVersion);
Status EncodeResponse(uint64_t request_id, const NodeInfoResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kShmVersion);
Status EncodeResponse(uint64_t request_id, const ShmAttachResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kShmVersion);
Status EncodeResponse(uint64_t request_id, const ArenaReserveResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kShmVersion);
Status EncodeResponse(uint64_t request_id, const ArenaCommitResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kShmVersion);
Status EncodeResponse(uint64_t request_id, const ArenaGetResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kShmVersion);
Status EncodeResponse(uint64_t request_id, const ArenaReleaseResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kShmVersion);
Status EncodeResponse(uint64_t request_id, const UcxAttachResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kUcxVersion);
Status EncodeResponse(uint64_t request_id, const ErrorResponse& m, const Limits& l,
                      EncodedFrame* out, uint8_t version = kMinProtocolVersion);

// ---- Decoders ----------------------------------------------------------------------------

Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     HelloRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     PingRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     StatsRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     MsetRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     MgetRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     MexistRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     MdelRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     ListRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     NodeInfoRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     ShmAttachRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     ArenaReserveRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     ArenaCommitRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     ArenaGetRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     ArenaReleaseRequest* out);
Status DecodeRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                     UcxAttachRequest* out);

Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      HelloResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      PingResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      StatsResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      MsetResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      MgetResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      MexistResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      MdelResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      ListResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      NodeInfoResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      ShmAttachResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      ArenaReserveResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      ArenaCommitResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      ArenaGetResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      ArenaReleaseResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      UcxAttachResponse* out);
Status DecodeResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                      ErrorResponse* out);

// Any request, chosen by h.opcode: what a server's dispatcher decodes. InvalidArgument for a
// response frame or an ERROR opcode; otherwise as the per-type decoder.
using AnyRequest =
    std::variant<HelloRequest, PingRequest, StatsRequest, MsetRequest, MgetRequest, MexistRequest,
                 MdelRequest, ListRequest, NodeInfoRequest, ShmAttachRequest, ArenaReserveRequest,
                 ArenaCommitRequest, ArenaGetRequest, ArenaReleaseRequest, UcxAttachRequest>;
Status DecodeAnyRequest(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                        AnyRequest* out);

// Any response, chosen by h.opcode (kError decodes to ErrorResponse): for tests and the fuzzer;
// a client knows which response it awaits and calls DecodeResponse after checking for kError.
using AnyResponse =
    std::variant<HelloResponse, PingResponse, StatsResponse, MsetResponse, MgetResponse,
                 MexistResponse, MdelResponse, ListResponse, ErrorResponse, NodeInfoResponse,
                 ShmAttachResponse, ArenaReserveResponse, ArenaCommitResponse, ArenaGetResponse,
                 ArenaReleaseResponse, UcxAttachResponse>;
Status DecodeAnyResponse(const FrameHeader& h, std::string_view descriptor, const Limits& l,
                         AnyResponse* out);

}  // namespace kvport::protocol
