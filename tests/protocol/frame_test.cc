// SPDX-License-Identifier: Apache-2.0
// Limits and the fixed frame header.
#include "protocol/frame.h"

#include <gtest/gtest.h>

#include <string>

#include "protocol/limits.h"
#include "protocol/wire.h"

namespace kvport::protocol {
namespace {

TEST(LimitsTest, DefaultsAreValidAndDocumented) {
  Limits l;
  EXPECT_TRUE(ValidateLimits(l).ok());
  EXPECT_EQ(l.max_key_bytes, 8192u);
  EXPECT_EQ(l.max_namespace_bytes, 255u);
  EXPECT_EQ(l.max_meta_bytes, 4096u);
  EXPECT_EQ(l.max_value_bytes, 1ull << 30);
  EXPECT_EQ(l.max_batch_keys, 4096u);
  EXPECT_EQ(l.max_frame_bytes, 16ull << 20);
  EXPECT_EQ(MaxResponseFrameBytes(l), (16ull << 20) + 4096 * (4096 + 24));
  EXPECT_EQ(MaxPayloadBytes(l), 4096ull << 30);
}

TEST(LimitsTest, ValidateRejectsEachBadField) {
  struct Case {
    const char* field;
    void (*mutate)(Limits&);
  };
  const Case cases[] = {
      {"max_key_bytes", [](Limits& l) { l.max_key_bytes = 0; }},
      {"max_key_bytes", [](Limits& l) { l.max_key_bytes = 65536; }},
      {"max_namespace_bytes", [](Limits& l) { l.max_namespace_bytes = 256; }},
      {"max_meta_bytes", [](Limits& l) { l.max_meta_bytes = 1ull << 40; }},
      {"max_value_bytes", [](Limits& l) { l.max_value_bytes = 0; }},
      {"max_value_bytes", [](Limits& l) { l.max_value_bytes = ~0ull; }},
      {"max_batch_keys", [](Limits& l) { l.max_batch_keys = 0; }},
      {"max_batch_keys", [](Limits& l) { l.max_batch_keys = ~0ull; }},
      {"max_frame_bytes", [](Limits& l) { l.max_frame_bytes = 100; }},
      {"max_frame_bytes", [](Limits& l) { l.max_frame_bytes = 1ull << 33; }},
  };
  for (const Case& c : cases) {
    Limits l;
    c.mutate(l);
    Status s = ValidateLimits(l);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s.ToString();
  }
}

TEST(LimitsTest, ItemChecks) {
  Limits l;
  EXPECT_TRUE(CheckKey(std::string(8192, 'k'), l).ok());
  EXPECT_EQ(CheckKey(std::string(8193, 'k'), l).code(), StatusCode::kTooLarge);
  EXPECT_EQ(CheckKey("", l).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckNamespace("", l).ok());
  EXPECT_TRUE(CheckNamespace(std::string(255, 'n'), l).ok());
  EXPECT_EQ(CheckNamespace(std::string(256, 'n'), l).code(), StatusCode::kTooLarge);
  EXPECT_TRUE(CheckMeta(std::string(4096, 'm'), l).ok());
  EXPECT_EQ(CheckMeta(std::string(4097, 'm'), l).code(), StatusCode::kTooLarge);
  EXPECT_TRUE(CheckValueLength(1ull << 30, l).ok());
  Status v = CheckValueLength((1ull << 30) + 1, l);
  EXPECT_EQ(v.code(), StatusCode::kTooLarge);
  EXPECT_NE(v.message().find("max_value_bytes"), std::string::npos);
  EXPECT_TRUE(CheckBatchCount(4096, l).ok());
  EXPECT_EQ(CheckBatchCount(4097, l).code(), StatusCode::kTooLarge);
}

// The header of a request for MGET, id 0x1122334455667788, descriptor 0x100, no payload.
std::string HandWrittenHeader() {
  return std::string(
      "KVPT"
      "\x01\x04\x00\x00"
      "\x88\x77\x66\x55\x44\x33\x22\x11"
      "\x00\x01\x00\x00"
      "\x00\x00\x00\x00"
      "\x00\x00\x00\x00\x00\x00\x00\x00",
      32);
}

TEST(FrameHeaderTest, DecodesHandWrittenBytes) {
  FrameHeader h;
  ASSERT_TRUE(DecodeFrameHeader(HandWrittenHeader(), Limits{}, &h).ok());
  EXPECT_EQ(h.version, 1);
  EXPECT_EQ(h.opcode, Opcode::kMget);
  EXPECT_EQ(h.flags, 0);
  EXPECT_EQ(h.request_id, 0x1122334455667788ull);
  EXPECT_EQ(h.descriptor_length, 0x100u);
  EXPECT_EQ(h.payload_length, 0u);
  EXPECT_EQ(h.head_length(), 32u + 0x100);
  std::string again;
  AppendFrameHeader(h, &again);
  EXPECT_EQ(again, HandWrittenHeader());
}

TEST(FrameHeaderTest, RoundTripsEveryOpcodeAndDirection) {
  for (Opcode op :
       {Opcode::kHello, Opcode::kPing, Opcode::kMset, Opcode::kMget, Opcode::kMexist, Opcode::kMdel,
        Opcode::kList, Opcode::kStats, Opcode::kNodeInfo, Opcode::kShmAttach, Opcode::kArenaReserve,
        Opcode::kArenaCommit, Opcode::kArenaGet, Opcode::kArenaRelease, Opcode::kError}) {
    for (bool response : {false, true}) {
      if (op == Opcode::kError && !response) continue;
      FrameHeader h;
      h.version = OpcodeMinVersion(op);
      h.opcode = op;
      h.flags = response ? kFlagResponse : 0;
      h.request_id = 77;
      h.descriptor_length = 12;
      h.payload_length = CarriesPayload(op, response) ? 1234 : 0;
      std::string bytes;
      AppendFrameHeader(h, &bytes);
      ASSERT_EQ(bytes.size(), kFrameHeaderSize);
      FrameHeader d;
      ASSERT_TRUE(DecodeFrameHeader(bytes, Limits{}, &d).ok()) << OpcodeName(op);
      EXPECT_EQ(d.opcode, op);
      EXPECT_EQ(d.version, h.version);
      EXPECT_EQ(d.flags, h.flags);
      EXPECT_EQ(d.request_id, 77u);
      EXPECT_EQ(d.descriptor_length, 12u);
      EXPECT_EQ(d.payload_length, h.payload_length);
    }
  }
}

struct HeaderCase {
  const char* what;
  size_t offset;
  std::string bytes;  // written over the valid header at `offset`
  StatusCode code;
  const char* message_part;
};

TEST(FrameHeaderTest, RejectsEachMalformedField) {
  std::string u32_big(4, '\0');
  StoreLE32(u32_big.data(), (16u << 20) - 31);  // head_length one above max_frame_bytes
  std::string u64_big(8, '\0');
  StoreLE64(u64_big.data(), (4096ull << 30) + 1);
  const HeaderCase cases[] = {
      {"magic", 0, "KVPX", StatusCode::kCorruption, "magic"},
      {"version 0", 4, std::string(1, '\0'), StatusCode::kNotSupported, "version"},
      {"version 11", 4, "\x0B", StatusCode::kNotSupported, "version"},
      {"opcode 0", 5, std::string(1, '\0'), StatusCode::kCorruption, "opcode"},
      {"opcode 17", 5, "\x11", StatusCode::kCorruption, "opcode"},
      {"version 9 opcode in a version 1 frame", 5, "\x10", StatusCode::kCorruption,
       "UCX_ATTACH frame of version 1; it needs protocol version 9"},
      {"version 3 opcode in a version 1 frame", 5, "\x0D", StatusCode::kCorruption,
       "ARENA_GET frame of version 1; it needs protocol version 3"},
      {"opcode 255", 5, "\xFF", StatusCode::kCorruption, "opcode"},
      {"reserved flag", 6, "\x04", StatusCode::kCorruption, "reserved flag"},
      {"high flag", 7, "\x80", StatusCode::kCorruption, "reserved flag"},
      {"reserved field", 20, "\x01", StatusCode::kCorruption, "reserved field"},
      {"descriptor too large", 16, u32_big, StatusCode::kTooLarge, "max_frame_bytes"},
      {"payload on MGET request", 24, "\x01", StatusCode::kCorruption, "payload"},
  };
  for (const HeaderCase& c : cases) {
    std::string bytes = HandWrittenHeader();
    bytes.replace(c.offset, c.bytes.size(), c.bytes);
    FrameHeader h;
    Status s = DecodeFrameHeader(bytes, Limits{}, &h);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.message_part), std::string::npos)
        << c.what << ": " << s.ToString();
  }
  // An MSET request may carry a payload, but not more than max_batch_keys * max_value_bytes.
  std::string mset = HandWrittenHeader();
  mset[5] = static_cast<char>(Opcode::kMset);
  mset.replace(24, 8, u64_big);
  FrameHeader h;
  EXPECT_EQ(DecodeFrameHeader(mset, Limits{}, &h).code(), StatusCode::kTooLarge);
}

TEST(FrameHeaderTest, FlagRules) {
  FrameHeader h;
  std::string bytes;
  auto decode = [&](Opcode op, uint16_t flags, uint8_t version = 1) {
    FrameHeader in;
    in.opcode = op;
    in.flags = flags;
    in.version = version;
    bytes.clear();
    AppendFrameHeader(in, &bytes);
    return DecodeFrameHeader(bytes, Limits{}, &h).code();
  };
  EXPECT_EQ(decode(Opcode::kMget, kFlagMetaOnly), StatusCode::kOk);
  EXPECT_EQ(decode(Opcode::kMget, kFlagMetaOnly | kFlagResponse), StatusCode::kOk);
  EXPECT_EQ(decode(Opcode::kMset, kFlagMetaOnly), StatusCode::kCorruption);
  EXPECT_EQ(decode(Opcode::kError, 0), StatusCode::kCorruption);
  EXPECT_EQ(decode(Opcode::kError, kFlagResponse), StatusCode::kOk);
}

TEST(FrameHeaderTest, AnyNamespaceFlagOnlyOnVersion2MgetMexistMdelRequests) {
  FrameHeader h;
  std::string bytes;
  auto decode = [&](Opcode op, uint16_t flags, uint8_t version) {
    FrameHeader in;
    in.opcode = op;
    in.flags = flags;
    in.version = version;
    bytes.clear();
    AppendFrameHeader(in, &bytes);
    return DecodeFrameHeader(bytes, Limits{}, &h);
  };
  for (Opcode op : {Opcode::kMget, Opcode::kMexist, Opcode::kMdel}) {
    Status s = decode(op, kFlagAnyNamespace, 2);
    EXPECT_TRUE(s.ok()) << OpcodeName(op) << ": " << s.ToString();
    EXPECT_TRUE(h.any_namespace());
    EXPECT_EQ(h.version, 2);
    // A version 1 frame: the bit is reserved there, as it always was.
    s = decode(op, kFlagAnyNamespace, 1);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << OpcodeName(op);
    EXPECT_NE(s.message().find("reserved flag bits 0x0004"), std::string::npos) << s.ToString();
    // Never on a response: it is not echoed.
    s = decode(op, kFlagAnyNamespace | kFlagResponse, 2);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << OpcodeName(op);
    EXPECT_NE(s.message().find("any-namespace flag on a"), std::string::npos) << s.ToString();
  }
  EXPECT_TRUE(decode(Opcode::kMget, kFlagAnyNamespace | kFlagMetaOnly, 2).ok());
  for (Opcode op : {Opcode::kPing, Opcode::kMset, Opcode::kList, Opcode::kStats}) {
    Status s = decode(op, kFlagAnyNamespace, 2);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << OpcodeName(op);
    EXPECT_NE(s.message().find("any-namespace flag on a " + std::string(OpcodeName(op))),
              std::string::npos)
        << s.ToString();
  }
  // HELLO and ERROR stay version 1 frames, where the bit is reserved.
  EXPECT_EQ(decode(Opcode::kHello, kFlagAnyNamespace, 1).code(), StatusCode::kCorruption);
  EXPECT_EQ(decode(Opcode::kHello, 0, 2).code(), StatusCode::kNotSupported);
  // The bits above it stay reserved in version 2.
  Status s = decode(Opcode::kMget, 0x0008, 2);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("reserved flag bits 0x0008"), std::string::npos) << s.ToString();
  // Everything else of a version 2 header decodes as in version 1.
  EXPECT_TRUE(decode(Opcode::kMget, kFlagMetaOnly, 2).ok());
  EXPECT_TRUE(decode(Opcode::kMset, 0, 2).ok());
}

TEST(FrameHeaderTest, Version3OpcodesOnlyInVersion3Frames) {
  FrameHeader h;
  std::string bytes;
  auto decode = [&](Opcode op, uint16_t flags, uint8_t version, uint64_t payload_length = 0) {
    FrameHeader in;
    in.opcode = op;
    in.flags = flags;
    in.version = version;
    in.payload_length = payload_length;
    bytes.clear();
    AppendFrameHeader(in, &bytes);
    return DecodeFrameHeader(bytes, Limits{}, &h);
  };
  EXPECT_EQ(kShmVersion, 3);
  EXPECT_EQ(kMaxProtocolVersion, 10);
  EXPECT_EQ(kChecksumVersion, 10);
  EXPECT_EQ(KnownFlags(3), KnownFlags(2));
  for (Opcode op : {Opcode::kNodeInfo, Opcode::kShmAttach, Opcode::kArenaReserve,
                    Opcode::kArenaCommit, Opcode::kArenaGet, Opcode::kArenaRelease}) {
    EXPECT_TRUE(IsKnownOpcode(static_cast<uint8_t>(op)));
    EXPECT_EQ(OpcodeMinVersion(op), kShmVersion) << OpcodeName(op);
    EXPECT_NE(OpcodeName(op), "UNKNOWN");
    for (bool response : {false, true}) {
      const uint16_t flags = response ? kFlagResponse : 0;
      EXPECT_FALSE(CarriesPayload(op, response)) << OpcodeName(op);
      Status s = decode(op, flags, 3);
      EXPECT_TRUE(s.ok()) << OpcodeName(op) << ": " << s.ToString();
      for (uint8_t old : {1, 2}) {
        s = decode(op, flags, old);
        EXPECT_EQ(s.code(), StatusCode::kCorruption) << OpcodeName(op) << " v" << int{old};
        EXPECT_NE(s.message().find("needs protocol version 3"), std::string::npos) << s.ToString();
      }
      // No payload section, and META_ONLY belongs to MGET alone.
      s = decode(op, flags, 3, 1);
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << OpcodeName(op);
      EXPECT_NE(s.message().find("never carries a payload"), std::string::npos) << s.ToString();
      s = decode(op, flags | kFlagMetaOnly, 3);
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << OpcodeName(op);
      EXPECT_NE(s.message().find("meta-only flag on a " + std::string(OpcodeName(op))),
                std::string::npos)
          << s.ToString();
    }
    // ANY_NAMESPACE: ARENA_GET requests only.
    Status s = decode(op, kFlagAnyNamespace, 3);
    EXPECT_EQ(s.ok(), op == Opcode::kArenaGet) << OpcodeName(op) << ": " << s.ToString();
    EXPECT_EQ(AcceptsAnyNamespace(op), op == Opcode::kArenaGet);
    EXPECT_EQ(decode(op, kFlagAnyNamespace | kFlagResponse, 3).code(), StatusCode::kCorruption);
  }
  EXPECT_EQ(OpcodeName(Opcode::kNodeInfo), "NODE_INFO");
  EXPECT_EQ(OpcodeName(Opcode::kShmAttach), "SHM_ATTACH");
  EXPECT_EQ(OpcodeName(Opcode::kArenaReserve), "ARENA_RESERVE");
  EXPECT_EQ(OpcodeName(Opcode::kArenaCommit), "ARENA_COMMIT");
  EXPECT_EQ(OpcodeName(Opcode::kArenaGet), "ARENA_GET");
  EXPECT_EQ(OpcodeName(Opcode::kArenaRelease), "ARENA_RELEASE");
  EXPECT_EQ(static_cast<int>(Opcode::kError), 15);
  // Version 9: UCX_ATTACH, 16, no payload either way, in version 9 frames only. Version 8's
  // UCX_ATTACH (remote keys to the node's memory) is served no more: a version 8 frame of it is
  // refused like any opcode newer than its frame.
  EXPECT_TRUE(IsKnownOpcode(16));
  EXPECT_FALSE(IsKnownOpcode(17));
  EXPECT_EQ(OpcodeName(Opcode::kUcxAttach), "UCX_ATTACH");
  EXPECT_EQ(OpcodeMinVersion(Opcode::kUcxAttach), kUcxVersion);
  for (bool response : {false, true}) {
    const uint16_t flags = response ? kFlagResponse : 0;
    EXPECT_FALSE(CarriesPayload(Opcode::kUcxAttach, response));
    EXPECT_TRUE(decode(Opcode::kUcxAttach, flags, kUcxVersion).ok());
    for (uint8_t old = kMinProtocolVersion; old < kUcxVersion; ++old) {
      Status s = decode(Opcode::kUcxAttach, flags, old);
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << "v" << int{old};
      EXPECT_NE(s.message().find("UCX_ATTACH frame of version " + std::to_string(old) +
                                 "; it needs protocol version 9"),
                std::string::npos)
          << s.ToString();
    }
    EXPECT_EQ(decode(Opcode::kUcxAttach, flags, kUcxVersion, 1).code(), StatusCode::kCorruption);
  }
  EXPECT_EQ(kUcxVersion, 9);
  // The older opcodes are unchanged in version 3 frames.
  EXPECT_EQ(OpcodeMinVersion(Opcode::kMget), kMinProtocolVersion);
  EXPECT_TRUE(decode(Opcode::kMget, kFlagMetaOnly | kFlagAnyNamespace, 3).ok());
  EXPECT_TRUE(decode(Opcode::kMset, 0, 3, 10).ok());
  EXPECT_EQ(decode(Opcode::kHello, 0, 3).code(), StatusCode::kNotSupported);
  EXPECT_EQ(decode(Opcode::kMget, 0x0008, 3).code(), StatusCode::kCorruption);
}

TEST(FrameHeaderTest, ResponsesMayExceedMaxFrameBytesByTheirMetas) {
  const Limits l;
  FrameHeader in;
  in.opcode = Opcode::kMget;
  in.flags = kFlagResponse;
  in.descriptor_length = static_cast<uint32_t>(MaxResponseFrameBytes(l) - kFrameHeaderSize);
  std::string bytes;
  AppendFrameHeader(in, &bytes);
  FrameHeader h;
  EXPECT_TRUE(DecodeFrameHeader(bytes, l, &h).ok());
  in.descriptor_length += 1;
  bytes.clear();
  AppendFrameHeader(in, &bytes);
  EXPECT_EQ(DecodeFrameHeader(bytes, l, &h).code(), StatusCode::kTooLarge);
  // The same descriptor length is too large for a request.
  in.flags = 0;
  in.descriptor_length = static_cast<uint32_t>(l.max_frame_bytes - kFrameHeaderSize);
  bytes.clear();
  AppendFrameHeader(in, &bytes);
  EXPECT_TRUE(DecodeFrameHeader(bytes, l, &h).ok());
  in.descriptor_length += 1;
  bytes.clear();
  AppendFrameHeader(in, &bytes);
  EXPECT_EQ(DecodeFrameHeader(bytes, l, &h).code(), StatusCode::kTooLarge);
}

TEST(FrameHeaderTest, EveryTruncatedHeaderIsCorruption) {
  const std::string full = HandWrittenHeader();
  for (size_t n = 0; n < kFrameHeaderSize; ++n) {
    FrameHeader h;
    Status s = DecodeFrameHeader(std::string_view(full).substr(0, n), Limits{}, &h);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << n;
    EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.ToString();
  }
}

TEST(SplitFrameTest, ChecksTotalLength) {
  FrameHeader in;
  in.opcode = Opcode::kMset;
  in.descriptor_length = 3;
  in.payload_length = 2;
  std::string bytes;
  AppendFrameHeader(in, &bytes);
  bytes += "abcPQ";
  FrameView v;
  ASSERT_TRUE(SplitFrame(bytes, Limits{}, &v).ok());
  EXPECT_EQ(v.descriptor, "abc");
  EXPECT_EQ(v.payload, "PQ");
  EXPECT_EQ(SplitFrame(bytes + "x", Limits{}, &v).code(), StatusCode::kCorruption);
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_EQ(SplitFrame(bytes.substr(0, n), Limits{}, &v).code(), StatusCode::kCorruption) << n;
}

}  // namespace
}  // namespace kvport::protocol
