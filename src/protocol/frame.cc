// SPDX-License-Identifier: Apache-2.0
#include "protocol/frame.h"

#include <fmt/core.h>

#include "protocol/wire.h"

namespace kvport::protocol {

std::string_view OpcodeName(Opcode op) {
  switch (op) {
    case Opcode::kHello:
      return "HELLO";
    case Opcode::kPing:
      return "PING";
    case Opcode::kMset:
      return "MSET";
    case Opcode::kMget:
      return "MGET";
    case Opcode::kMexist:
      return "MEXIST";
    case Opcode::kMdel:
      return "MDEL";
    case Opcode::kList:
      return "LIST";
    case Opcode::kStats:
      return "STATS";
    case Opcode::kNodeInfo:
      return "NODE_INFO";
    case Opcode::kShmAttach:
      return "SHM_ATTACH";
    case Opcode::kArenaReserve:
      return "ARENA_RESERVE";
    case Opcode::kArenaCommit:
      return "ARENA_COMMIT";
    case Opcode::kArenaGet:
      return "ARENA_GET";
    case Opcode::kArenaRelease:
      return "ARENA_RELEASE";
    case Opcode::kError:
      return "ERROR";
    case Opcode::kUcxAttach:
      return "UCX_ATTACH";
  }
  return "UNKNOWN";
}

bool IsKnownOpcode(uint8_t op) {
  return (op >= static_cast<uint8_t>(Opcode::kHello) &&
          op <= static_cast<uint8_t>(Opcode::kArenaRelease)) ||
         op == static_cast<uint8_t>(Opcode::kError) ||
         op == static_cast<uint8_t>(Opcode::kUcxAttach);
}

uint8_t OpcodeMinVersion(Opcode op) {
  if (op == Opcode::kUcxAttach) return kUcxVersion;
  return op >= Opcode::kNodeInfo && op <= Opcode::kArenaRelease ? kShmVersion : kMinProtocolVersion;
}

bool AcceptsAnyNamespace(Opcode op) {
  return op == Opcode::kMget || op == Opcode::kMexist || op == Opcode::kMdel ||
         op == Opcode::kArenaGet;
}

bool CarriesPayload(Opcode op, bool is_response) {
  return (op == Opcode::kMset && !is_response) || (op == Opcode::kMget && is_response);
}

void StoreFrameHeader(const FrameHeader& h, char* out) {
  StoreLE32(out, kFrameMagic);
  out[4] = static_cast<char>(h.version);
  out[5] = static_cast<char>(h.opcode);
  StoreLE16(out + 6, h.flags);
  StoreLE64(out + 8, h.request_id);
  StoreLE32(out + 16, h.descriptor_length);
  StoreLE32(out + 20, 0);  // reserved
  StoreLE64(out + 24, h.payload_length);
}

void AppendFrameHeader(const FrameHeader& h, std::string* out) {
  char bytes[kFrameHeaderSize];
  StoreFrameHeader(h, bytes);
  out->append(bytes, kFrameHeaderSize);
}

Status DecodeFrameHeader(std::string_view bytes, const Limits& limits, FrameHeader* out) {
  if (bytes.size() < kFrameHeaderSize)
    return Status::Corruption(
        fmt::format("frame header: truncated: {} of {} bytes", bytes.size(), kFrameHeaderSize));
  WireReader r(bytes.substr(0, kFrameHeaderSize), "frame header");
  uint32_t magic = 0, reserved = 0;
  uint8_t version = 0, opcode = 0;
  uint16_t flags = 0;
  FrameHeader h;
  // The header is exactly kFrameHeaderSize bytes, so none of these reads can fail.
  KVPORT_RETURN_IF_ERROR(r.ReadU32("magic", &magic));
  KVPORT_RETURN_IF_ERROR(r.ReadU8("version", &version));
  KVPORT_RETURN_IF_ERROR(r.ReadU8("opcode", &opcode));
  KVPORT_RETURN_IF_ERROR(r.ReadU16("flags", &flags));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("request_id", &h.request_id));
  KVPORT_RETURN_IF_ERROR(r.ReadU32("descriptor_length", &h.descriptor_length));
  KVPORT_RETURN_IF_ERROR(r.ReadU32("reserved", &reserved));
  KVPORT_RETURN_IF_ERROR(r.ReadU64("payload_length", &h.payload_length));

  if (magic != kFrameMagic)
    return Status::Corruption(fmt::format(
        "frame header: bad magic {:#010x} (expected {:#010x}, \"KVPT\")", magic, kFrameMagic));
  if (!IsKnownOpcode(opcode))
    return Status::Corruption(fmt::format("frame header: unknown opcode {}", opcode));
  h.opcode = static_cast<Opcode>(opcode);
  h.version = version;
  h.flags = flags;
  const std::string_view name = OpcodeName(h.opcode);
  if (version < kMinProtocolVersion || version > kMaxProtocolVersion)
    return Status::NotSupported(
        fmt::format("frame header: {} frame of protocol version {}; this build speaks {}..{}", name,
                    version, kMinProtocolVersion, kMaxProtocolVersion));
  if ((h.opcode == Opcode::kHello || h.opcode == Opcode::kError) && version != kHelloVersion)
    return Status::NotSupported(
        fmt::format("frame header: {} frame of version {}; {} frames are "
                    "always version {}",
                    name, version, name, kHelloVersion));
  if (version < OpcodeMinVersion(h.opcode))
    return Status::Corruption(
        fmt::format("frame header: {} frame of version {}; it needs protocol version {}", name,
                    version, OpcodeMinVersion(h.opcode)));
  const uint16_t reserved_flags = flags & ~KnownFlags(version);
  if (reserved_flags != 0)
    return Status::Corruption(fmt::format(
        "frame header: reserved flag bits {:#06x} set in a version {} frame{}", reserved_flags,
        version,
        (reserved_flags & kFlagAnyNamespace) != 0 ? " (the any-namespace flag needs version 2)"
                                                  : ""));
  if (h.meta_only() && h.opcode != Opcode::kMget)
    return Status::Corruption(fmt::format("frame header: meta-only flag on a {} frame", name));
  if (h.any_namespace() && (h.is_response() || !AcceptsAnyNamespace(h.opcode)))
    return Status::Corruption(fmt::format(
        "frame header: any-namespace flag on a {} {}; only MGET, MEXIST, MDEL and ARENA_GET "
        "requests may carry it",
        name, h.is_response() ? "response" : "request"));
  if (h.opcode == Opcode::kError && !h.is_response())
    return Status::Corruption("frame header: ERROR frame without the response flag");
  if (reserved != 0)
    return Status::Corruption(fmt::format("frame header: reserved field is {}, not 0", reserved));

  const uint64_t max_head =
      h.is_response() ? MaxResponseFrameBytes(limits) : limits.max_frame_bytes;
  if (h.head_length() > max_head)
    return Status::TooLarge(
        fmt::format("frame header: {} {} of {} header+descriptor bytes exceeds {} ({})", name,
                    h.is_response() ? "response" : "request", h.head_length(), max_head,
                    h.is_response() ? "the response frame limit" : "max_frame_bytes"));
  if (!CarriesPayload(h.opcode, h.is_response()) && h.payload_length != 0)
    return Status::Corruption(
        fmt::format("frame header: {} {} with payload_length {}; it never "
                    "carries a payload",
                    name, h.is_response() ? "response" : "request", h.payload_length));
  if (h.payload_length > MaxPayloadBytes(limits))
    return Status::TooLarge(
        fmt::format("frame header: payload_length {} exceeds max_batch_keys * max_value_bytes = {}",
                    h.payload_length, MaxPayloadBytes(limits)));
  *out = h;
  return Status::Ok();
}

uint64_t EncodedFrame::payload_length() const {
  uint64_t total = 0;
  for (const PayloadSpan& s : payloads)
    total += s.size;
  return total;
}

std::string EncodedFrame::Flatten() const {
  std::string flat = head;
  for (const PayloadSpan& s : payloads)
    flat.append(static_cast<const char*>(s.data), static_cast<size_t>(s.size));
  return flat;
}

Status SplitFrame(std::string_view bytes, const Limits& limits, FrameView* out) {
  FrameHeader h;
  KVPORT_RETURN_IF_ERROR(DecodeFrameHeader(bytes, limits, &h));
  const uint64_t have = bytes.size() - kFrameHeaderSize;
  if (have < h.descriptor_length)
    return Status::Corruption(fmt::format("{} frame: truncated descriptor: {} of {} bytes",
                                          OpcodeName(h.opcode), have, h.descriptor_length));
  const uint64_t payload_have = have - h.descriptor_length;
  if (payload_have < h.payload_length)
    return Status::Corruption(fmt::format("{} frame: truncated payload: {} of {} bytes",
                                          OpcodeName(h.opcode), payload_have, h.payload_length));
  if (payload_have > h.payload_length)
    return Status::Corruption(fmt::format("{} frame: {} trailing bytes after the payload",
                                          OpcodeName(h.opcode), payload_have - h.payload_length));
  out->header = h;
  out->descriptor = bytes.substr(kFrameHeaderSize, h.descriptor_length);
  out->payload = bytes.substr(kFrameHeaderSize + h.descriptor_length);
  return Status::Ok();
}

}  // namespace kvport::protocol
