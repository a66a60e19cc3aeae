// SPDX-License-Identifier: Apache-2.0
// Malformed input: every truncation, every bad field, every broken limit is a clean Status.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "frame_samples.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/wire.h"

namespace kvport::protocol {
namespace {

using testing::DecodeAndReencode;
using testing::SampleFrames;

// Decodes a complete frame as whatever its header says; the status of the first failure.
Status DecodeWhole(std::string_view frame, const Limits& limits = Limits{}) {
  std::string reencoded;
  return DecodeAndReencode(frame, limits, &reencoded);
}

TEST(MalformedTest, SamplesDecodeAndReencodeExactly) {
  for (const auto& sample : SampleFrames()) {
    std::string reencoded;
    Status s = DecodeAndReencode(sample.bytes, Limits{}, &reencoded);
    ASSERT_TRUE(s.ok()) << sample.name << ": " << s.ToString();
    EXPECT_EQ(reencoded, sample.bytes) << sample.name;
  }
}

TEST(MalformedTest, EveryPrefixOfEveryFrameIsRejected) {
  for (const auto& sample : SampleFrames()) {
    for (size_t n = 0; n < sample.bytes.size(); ++n) {
      Status s = DecodeWhole(std::string_view(sample.bytes).substr(0, n));
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << sample.name << " prefix " << n;
    }
    EXPECT_EQ(DecodeWhole(sample.bytes + '\0').code(), StatusCode::kCorruption) << sample.name;
  }
}

// The header announces a shorter (or longer) descriptor than the message needs: the descriptor
// decoder itself must notice, whatever the net layer read.
TEST(MalformedTest, EveryTruncatedOrExtendedDescriptorIsRejected) {
  for (const auto& sample : SampleFrames()) {
    FrameView view;
    ASSERT_TRUE(SplitFrame(sample.bytes, Limits{}, &view).ok());
    for (size_t n = 0; n < view.descriptor.size(); ++n) {
      FrameHeader h = view.header;
      h.descriptor_length = static_cast<uint32_t>(n);
      const std::string_view prefix = view.descriptor.substr(0, n);
      Status s;
      if (h.is_response()) {
        AnyResponse r;
        s = DecodeAnyResponse(h, prefix, Limits{}, &r);
      } else {
        AnyRequest r;
        s = DecodeAnyRequest(h, prefix, Limits{}, &r);
      }
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << sample.name << " descriptor prefix " << n;
    }
    FrameHeader h = view.header;
    const std::string longer = std::string(view.descriptor) + "x";
    h.descriptor_length += 1;
    Status s;
    if (h.is_response()) {
      AnyResponse r;
      s = DecodeAnyResponse(h, longer, Limits{}, &r);
    } else {
      AnyRequest r;
      s = DecodeAnyRequest(h, longer, Limits{}, &r);
    }
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << sample.name << " trailing byte";
    EXPECT_NE(s.message().find("trailing"), std::string::npos) << s.ToString();
  }
}

// Every single-byte change of every sample decodes to an error or re-encodes exactly: the
// fuzzer's property, checked exhaustively for small mutations on every build.
TEST(MalformedTest, SingleByteMutationsFailCleanlyOrRoundTrip) {
  Limits tiny;
  tiny.max_key_bytes = 8;
  tiny.max_namespace_bytes = 4;
  tiny.max_meta_bytes = 8;
  tiny.max_value_bytes = 64;
  tiny.max_batch_keys = 4;
  tiny.max_frame_bytes = 128;
  ASSERT_TRUE(ValidateLimits(tiny).ok());
  for (const auto& sample : SampleFrames()) {
    for (size_t i = 0; i < sample.bytes.size(); ++i) {
      for (int delta : {1, 0x80, 0xFF}) {
        std::string mutated = sample.bytes;
        mutated[i] = static_cast<char>(static_cast<uint8_t>(mutated[i]) + delta);
        for (const Limits& l : {Limits{}, tiny}) {
          std::string reencoded;
          Status s = DecodeAndReencode(mutated, l, &reencoded);
          ASSERT_NE(s.code(), StatusCode::kInternal) << sample.name << " byte " << i;
          if (s.ok()) {
            EXPECT_EQ(reencoded, mutated) << sample.name << " byte " << i;
          }
        }
      }
    }
  }
}

struct FieldCase {
  const char* what;
  size_t offset;      // into the whole frame
  std::string bytes;  // written over the frame at offset
  StatusCode code;
  const char* message_part;
};

std::string U16(uint16_t v) {
  std::string s(2, '\0');
  StoreLE16(s.data(), v);
  return s;
}
std::string U32(uint32_t v) {
  std::string s(4, '\0');
  StoreLE32(s.data(), v);
  return s;
}
std::string U64(uint64_t v) {
  std::string s(8, '\0');
  StoreLE64(s.data(), v);
  return s;
}

void ExpectFieldCases(const std::string& frame, const std::vector<FieldCase>& cases,
                      const Limits& limits = Limits{}) {
  ASSERT_TRUE(DecodeWhole(frame, limits).ok());
  for (const FieldCase& c : cases) {
    std::string bytes = frame;
    ASSERT_LE(c.offset + c.bytes.size(), bytes.size()) << c.what;
    bytes.replace(c.offset, c.bytes.size(), c.bytes);
    Status s = DecodeWhole(bytes, limits);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.message_part), std::string::npos)
        << c.what << ": " << s.ToString();
  }
}

// The two-key MSET of GoldenBytesTest: namespace at 32, ttl 35, count 39, item 0 lengths at 43
// (key u16, meta u32, value u64), key 57, meta 58; item 1 lengths at 59, key 73; payload 75.
std::string TwoKeyMset() {
  static const std::string v1 = "xyz", v2 = "pq";
  MsetRequest in;
  in.ns = "ns";
  in.ttl_seconds = 60;
  in.items = {{"a", "m", 3, v1.data()}, {"bc", "", 2, v2.data()}};
  EncodedFrame f;
  EXPECT_TRUE(EncodeRequest(1, in, Limits{}, &f).ok());
  return f.Flatten();
}

TEST(MalformedTest, MsetFields) {
  ExpectFieldCases(
      TwoKeyMset(),
      {
          {"count above bytes", 39, U32(3), StatusCode::kCorruption, "count 3"},
          {"count at the limit but no bytes", 39, U32(4096), StatusCode::kCorruption, "count"},
          {"count above limit", 39, U32(5000), StatusCode::kTooLarge, "max_batch_keys"},
          {"count below items", 39, U32(1), StatusCode::kCorruption, "trailing"},
          {"empty key", 43, U16(0), StatusCode::kInvalidArgument, "item 0: empty key"},
          {"key too long", 59, U16(8193), StatusCode::kTooLarge, "item 1: key_length 8193"},
          {"key past end", 59, U16(8192), StatusCode::kCorruption, "truncated at key"},
          {"meta too long", 45, U32(4097), StatusCode::kTooLarge, "max_meta_bytes"},
          {"meta length overflow", 45, U32(0xFFFFFFFF), StatusCode::kTooLarge, "meta_length"},
          {"value too long", 49, U64((1ull << 30) + 1), StatusCode::kTooLarge, "max_value_bytes"},
          {"value length overflow", 49, U64(~0ull), StatusCode::kTooLarge, "max_value_bytes"},
          {"value sum above payload", 49, U64(4), StatusCode::kCorruption, "payload_length"},
          {"value sum below payload", 65, U64(1), StatusCode::kCorruption, "payload_length"},
          {"namespace past end", 32, std::string(1, '\xFF'), StatusCode::kCorruption,
           "truncated at namespace"},
      });
  // A namespace within the frame but above the decoder's max_namespace_bytes.
  Limits small_ns;
  small_ns.max_namespace_bytes = 1;
  FrameView view;
  const std::string frame = TwoKeyMset();
  ASSERT_TRUE(SplitFrame(frame, small_ns, &view).ok());
  MsetRequest out;
  Status s = DecodeRequest(view.header, view.descriptor, small_ns, &out);
  EXPECT_EQ(s.code(), StatusCode::kTooLarge);
  EXPECT_NE(s.message().find("max_namespace_bytes 1"), std::string::npos) << s.ToString();
}

TEST(MalformedTest, MgetResponseFields) {
  // Layout: overall 32, count 33, item 0: status 37, meta_length 38, value_length 42, meta 50;
  // item 1: status 51, meta_length 52, value_length 56; payload 64.
  const std::string hit = "hi";
  MgetResponse in;
  in.results = {{StatusCode::kOk, "M", 2, hit.data()}, {StatusCode::kNotFound, "", 0, nullptr}};
  EncodedFrame f;
  ASSERT_TRUE(EncodeResponse(9, in, Limits{}, &f).ok());
  ExpectFieldCases(
      f.Flatten(),
      {
          {"overall disagrees", 32, std::string(1, '\0'), StatusCode::kCorruption, "disagrees"},
          {"overall unknown", 32, std::string(1, '\x03'), StatusCode::kCorruption,
           "overall_status 3"},
          {"status unknown", 51, std::string(1, '\x0E'), StatusCode::kCorruption,
           "unknown status code 14"},
          {"miss with value", 56, U64(1), StatusCode::kCorruption, "NotFound"},
          {"miss with meta", 52, U32(1), StatusCode::kCorruption, "NotFound"},
          {"hit payload mismatch", 42, U64(3), StatusCode::kCorruption, "payload_length"},
          {"meta too long", 38, U32(4097), StatusCode::kTooLarge, "max_meta_bytes"},
          {"count above limit", 33, U32(4097), StatusCode::kTooLarge, "max_batch_keys"},
      });
}

TEST(MalformedTest, HelloListErrorStatsFields) {
  EncodedFrame f;
  ASSERT_TRUE(EncodeRequest(1, HelloRequest{1, 1, "c", ""}, Limits{}, &f).ok());
  ExpectFieldCases(
      f.Flatten(),
      {{"min above max", 32, std::string(1, '\x02'), StatusCode::kInvalidArgument, "version range"},
       {"min 0", 32, std::string(1, '\0'), StatusCode::kInvalidArgument, "version range"}});
  ASSERT_TRUE(EncodeResponse(1, HelloResponse{1, Limits{}, "s", std::nullopt}, Limits{}, &f).ok());
  ExpectFieldCases(
      f.Flatten(),
      {{"version 11", 32, std::string(1, '\x0B'), StatusCode::kNotSupported, "version 11"},
       {"key limit 0", 33, U64(0), StatusCode::kCorruption, "unusable limits: max_key_bytes"}});
  ASSERT_TRUE(EncodeRequest(1, ListRequest{"ns", 5, 10}, Limits{}, &f).ok());
  ExpectFieldCases(f.Flatten(),
                   {{"max_keys 0", 43, U32(0), StatusCode::kInvalidArgument, "max_keys is 0"},
                    {"max_keys too many", 43, U32(4097), StatusCode::kTooLarge, "max_batch_keys"}});
  ASSERT_TRUE(EncodeResponse(1, ListResponse{0, {"k"}}, Limits{}, &f).ok());
  ExpectFieldCases(f.Flatten(),
                   {{"empty key", 44, U16(0), StatusCode::kInvalidArgument, "empty key"}});
  ASSERT_TRUE(EncodeResponse(1, ErrorResponse{StatusCode::kTooLarge, "m"}, Limits{}, &f).ok());
  ExpectFieldCases(
      f.Flatten(),
      {{"code 0", 32, std::string(1, '\0'), StatusCode::kCorruption, "code 0"},
       {"code unknown", 32, std::string(1, '\x40'), StatusCode::kCorruption, "code 64"},
       {"message too long", 33, U16(2000), StatusCode::kTooLarge, "message_length 2000"}});
  ASSERT_TRUE(EncodeResponse(1, StatsResponse{{{"h", 1}}, {}}, Limits{}, &f).ok());
  ExpectFieldCases(
      f.Flatten(),
      {{"counter count", 32, U32(2), StatusCode::kCorruption, "counter_count 2"},
       {"empty counter name", 36, std::string(1, '\0'), StatusCode::kCorruption, "empty name"}});
}

TEST(MalformedTest, HelloAndErrorFramesAreAlwaysVersion1) {
  EncodedFrame f;
  ASSERT_TRUE(EncodeRequest(1, HelloRequest{1, 1, "", ""}, Limits{}, &f).ok());
  EXPECT_EQ(static_cast<uint8_t>(f.head[4]), kHelloVersion);
  ASSERT_TRUE(EncodeResponse(1, ErrorResponse{StatusCode::kCorruption, ""}, Limits{}, &f).ok());
  EXPECT_EQ(static_cast<uint8_t>(f.head[4]), kHelloVersion);
}

// The any-namespace flag (version 2): where it may not be, and the namespace it may not have.
TEST(MalformedTest, AnyNamespaceFlagRules) {
  auto encode = [](const auto& request, uint8_t version) {
    EncodedFrame f;
    Status s = EncodeRequest(1, request, Limits{}, &f, version);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return f.Flatten();
  };
  auto encode_response = [](const auto& response, uint8_t version) {
    EncodedFrame f;
    Status s = EncodeResponse(1, response, Limits{}, &f, version);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return f.Flatten();
  };
  auto with_flag = [](std::string frame) {
    frame[6] = static_cast<char>(static_cast<uint8_t>(frame[6]) | kFlagAnyNamespace);
    return frame;
  };
  struct Case {
    const char* what;
    std::string frame;
    StatusCode code;
    const char* message_part;
  };
  const std::string value = "v";
  MsetRequest mset{"", 0, {{"k", "", 1, value.data()}}};
  MgetRequest mget_in_x;
  mget_in_x.ns = "x";
  mget_in_x.keys = {{"k", kUnlimitedCapacity}};
  const Case cases[] = {
      {"flag on a version 1 MEXIST", with_flag(encode(MexistRequest{"", {"k"}}, 1)),
       StatusCode::kCorruption, "reserved flag bits 0x0004"},
      {"flag on a version 1 MGET", with_flag(encode(MgetRequest{"", false, {{"k", 1}}}, 1)),
       StatusCode::kCorruption, "reserved flag bits 0x0004"},
      {"flag on MSET", with_flag(encode(mset, 2)), StatusCode::kCorruption,
       "any-namespace flag on a MSET request"},
      {"flag on LIST", with_flag(encode(ListRequest{"", 0, 10}, 2)), StatusCode::kCorruption,
       "any-namespace flag on a LIST request"},
      {"flag on an MEXIST response",
       with_flag(encode_response(MexistResponse{{{StatusCode::kOk, 1}}}, 2)),
       StatusCode::kCorruption, "any-namespace flag on a MEXIST response"},
      {"flag with a namespace (MGET)", with_flag(encode(mget_in_x, 2)),
       StatusCode::kInvalidArgument, "it must be empty"},
      {"flag with a namespace (MEXIST)", with_flag(encode(MexistRequest{"x", {"k"}}, 2)),
       StatusCode::kInvalidArgument, "it must be empty"},
      {"flag with a namespace (MDEL)", with_flag(encode(MdelRequest{"ns", {"k"}}, 2)),
       StatusCode::kInvalidArgument, "namespace of 2 bytes"},
  };
  for (const Case& c : cases) {
    Status s = DecodeWhole(c.frame);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.message_part), std::string::npos)
        << c.what << ": " << s.ToString();
  }
  // The descriptor decoders repeat the header's rules for headers built by hand.
  FrameView view;
  const std::string mexist = encode(MexistRequest{"", {"k"}, true}, 2);
  ASSERT_TRUE(SplitFrame(mexist, Limits{}, &view).ok());
  FrameHeader v1 = view.header;
  v1.version = 1;
  MexistRequest out;
  EXPECT_EQ(DecodeRequest(v1, view.descriptor, Limits{}, &out).code(), StatusCode::kCorruption);
  ASSERT_TRUE(DecodeRequest(view.header, view.descriptor, Limits{}, &out).ok());
  EXPECT_TRUE(out.any_namespace);
}

// ---- Encoders refuse what decoders would reject ------------------------------------------

TEST(EncoderLimitsTest, AnyNamespaceRequests) {
  EncodedFrame f;
  MexistRequest in_ns{"x", {"k"}, /*any_namespace=*/true};
  Status s = EncodeRequest(1, in_ns, Limits{}, &f, 2);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("must be empty"), std::string::npos) << s.ToString();
  MdelRequest del_in_ns{"x", {"k"}, true};
  EXPECT_EQ(EncodeRequest(1, del_in_ns, Limits{}, &f, 2).code(), StatusCode::kInvalidArgument);
  MgetRequest get_in_ns;
  get_in_ns.ns = "x";
  get_in_ns.any_namespace = true;
  get_in_ns.keys = {{"k", 1}};
  EXPECT_EQ(EncodeRequest(1, get_in_ns, Limits{}, &f, 2).code(), StatusCode::kInvalidArgument);

  // Version 1 cannot express it: NotSupported, naming the version it needs.
  MexistRequest any{"", {"k"}, true};
  s = EncodeRequest(1, any, Limits{}, &f);  // the default version is 1
  EXPECT_EQ(s.code(), StatusCode::kNotSupported) << s.ToString();
  EXPECT_NE(s.message().find("version 2"), std::string::npos) << s.ToString();
  MgetRequest get_any;
  get_any.any_namespace = true;
  get_any.keys = {{"k", 1}};
  EXPECT_EQ(EncodeRequest(1, get_any, Limits{}, &f, 1).code(), StatusCode::kNotSupported);
  EXPECT_TRUE(EncodeRequest(1, get_any, Limits{}, &f, 2).ok());

  // Versions this build does not speak are refused for every frame but HELLO and ERROR.
  for (uint8_t version : {0, kMaxProtocolVersion + 1, 255}) {
    EXPECT_EQ(EncodeRequest(1, any, Limits{}, &f, version).code(), StatusCode::kInvalidArgument)
        << int{version};
    EXPECT_EQ(EncodeRequest(1, PingRequest{}, Limits{}, &f, version).code(),
              StatusCode::kInvalidArgument)
        << int{version};
    EXPECT_TRUE(EncodeRequest(1, HelloRequest{}, Limits{}, &f, version).ok());
    EXPECT_EQ(static_cast<uint8_t>(f.head[4]), kHelloVersion);
  }
}

TEST(EncoderLimitsTest, MsetItems) {
  const std::string value = "v";
  const std::string long_key(8193, 'k'), long_meta(4097, 'm'), long_ns(256, 'n');
  struct Case {
    const char* what;
    MsetItem item;
    StatusCode code;
    const char* message_part;
  };
  const Case cases[] = {
      {"empty key", {"", "", 1, value.data()}, StatusCode::kInvalidArgument, "item 1: empty key"},
      {"long key", {long_key, "", 1, value.data()}, StatusCode::kTooLarge, "max_key_bytes"},
      {"long meta", {"k", long_meta, 1, value.data()}, StatusCode::kTooLarge, "max_meta_bytes"},
      {"long value",
       {"k", "", (1ull << 30) + 1, value.data()},
       StatusCode::kTooLarge,
       "max_value_bytes"},
      {"null value", {"k", "", 1, nullptr}, StatusCode::kInvalidArgument, "null"},
  };
  for (const Case& c : cases) {
    MsetRequest m;
    m.items = {{"ok", "", 1, value.data()}, c.item};
    EncodedFrame f;
    Status s = EncodeRequest(1, m, Limits{}, &f);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.message_part), std::string::npos) << s.ToString();
  }
  MsetRequest m;
  m.ns = long_ns;
  EncodedFrame f;
  EXPECT_EQ(EncodeRequest(1, m, Limits{}, &f).code(), StatusCode::kTooLarge);
  m.ns = "";
  m.items.assign(4097, MsetItem{"k", "", 0, nullptr});
  EXPECT_EQ(EncodeRequest(1, m, Limits{}, &f).code(), StatusCode::kTooLarge);
}

TEST(EncoderLimitsTest, DescriptorAboveMaxFrameBytesMustBeSplit) {
  Limits l;
  l.max_key_bytes = 1024;
  l.max_frame_bytes = 8192;
  l.max_batch_keys = 256;
  ASSERT_TRUE(ValidateLimits(l).ok());
  const std::string key(1000, 'k');
  MgetRequest m;
  for (int i = 0; i < 9; ++i)
    m.keys.push_back({key, kUnlimitedCapacity});
  EncodedFrame f;
  Status s = EncodeRequest(1, m, l, &f);
  EXPECT_EQ(s.code(), StatusCode::kTooLarge);
  EXPECT_NE(s.message().find("split the batch"), std::string::npos) << s.ToString();
  m.keys.resize(8);
  EXPECT_TRUE(EncodeRequest(1, m, l, &f).ok());
  // The largest response to a full batch with the largest metas still fits.
  const std::string meta(l.max_meta_bytes, 'm');
  MgetResponse r;
  r.results.assign(l.max_batch_keys, MgetResult{StatusCode::kOk, meta, 0, nullptr});
  EXPECT_TRUE(EncodeResponse(1, r, l, &f).ok());
  FrameHeader h;
  EXPECT_TRUE(DecodeFrameHeader(f.head, l, &h).ok());
}

TEST(EncoderLimitsTest, ResponsesAndControlMessages) {
  EncodedFrame f;
  MgetResponse miss_with_meta;
  miss_with_meta.results = {{StatusCode::kNotFound, "m", 0, nullptr}};
  EXPECT_EQ(EncodeResponse(1, miss_with_meta, Limits{}, &f).code(), StatusCode::kInvalidArgument);
  MgetResponse null_hit;
  null_hit.results = {{StatusCode::kOk, "", 5, nullptr}};
  EXPECT_EQ(EncodeResponse(1, null_hit, Limits{}, &f).code(), StatusCode::kInvalidArgument);
  MsetResponse unknown{{static_cast<StatusCode>(99)}};
  EXPECT_EQ(EncodeResponse(1, unknown, Limits{}, &f).code(), StatusCode::kInvalidArgument);
  MexistResponse miss_with_length{{{StatusCode::kNotFound, 3}}};
  EXPECT_EQ(EncodeResponse(1, miss_with_length, Limits{}, &f).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeRequest(1, ListRequest{"", 0, 0}, Limits{}, &f).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeRequest(1, ListRequest{"", 0, 4097}, Limits{}, &f).code(), StatusCode::kTooLarge);
  EXPECT_EQ(EncodeRequest(1, HelloRequest{2, 1, "", ""}, Limits{}, &f).code(),
            StatusCode::kInvalidArgument);
  Limits bad;
  bad.max_key_bytes = 0;
  EXPECT_EQ(EncodeResponse(1, HelloResponse{1, bad, "", std::nullopt}, Limits{}, &f).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeResponse(1, StatsResponse{{{"", 1}}, {}}, Limits{}, &f).code(),
            StatusCode::kInvalidArgument);
  MexistRequest empty_key{"", {"a", ""}};
  EXPECT_EQ(EncodeRequest(1, empty_key, Limits{}, &f).code(), StatusCode::kInvalidArgument);
}

// ---- Version 3: NODE_INFO and the shared-memory opcodes ----------------------------------

// `m` encoded in a frame of `version`, flattened (the encoding must succeed).
template <typename Message>
std::string FlatResponse(const Message& m, uint8_t version) {
  EncodedFrame f;
  Status s = EncodeResponse(1, m, Limits{}, &f, version);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return f.Flatten();
}
template <typename Message>
std::string FlatRequest(const Message& m, uint8_t version) {
  EncodedFrame f;
  Status s = EncodeRequest(1, m, Limits{}, &f, version);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return f.Flatten();
}
template <typename Message>
std::string EncodeV3Response(const Message& m) {
  return FlatResponse(m, kShmVersion);
}
template <typename Message>
std::string EncodeV3Request(const Message& m) {
  return FlatRequest(m, kShmVersion);
}

TEST(MalformedShmTest, NodeInfoResponseFields) {
  // node_id 32, offers 40, host_id_length 44, host_id 45, unix_path_length 46, unix_path 48.
  ExpectFieldCases(
      EncodeV3Response(NodeInfoResponse{1, kOfferSharedMemory, "h", "/s"}),
      {
          {"unix path too long", 46, U16(108), StatusCode::kTooLarge, "unix_path_length 108"},
          {"unix path past end", 46, U16(3), StatusCode::kCorruption, "truncated at unix_path"},
          {"host id past end", 44, std::string(1, '\x09'), StatusCode::kCorruption, "truncated"},
      });
  ExpectFieldCases(EncodeV3Response(NodeInfoResponse{1, 0, "h", ""}),
                   {{"shared memory without a path", 40, U32(kOfferSharedMemory),
                     StatusCode::kCorruption, "offers shared memory without a unix_path"}});
}

TEST(MalformedShmTest, ShmAttachResponseFields) {
  // status 32, arena_bytes 33, reason_length 41, reason 43.
  ExpectFieldCases(
      EncodeV3Response(ShmAttachResponse{StatusCode::kOk, 4096, ""}),
      {
          {"OK with arena 0", 33, U64(0), StatusCode::kCorruption, "OK with arena_bytes 0"},
          {"refused with an arena", 32, std::string(1, '\x09'), StatusCode::kCorruption,
           "NotSupported with arena_bytes 4096"},
          {"unknown status", 32, std::string(1, '\x0E'), StatusCode::kCorruption,
           "unknown status code 14"},
          {"reason too long", 41, U16(1025), StatusCode::kTooLarge, "reason_length 1025"},
      });
  ExpectFieldCases(
      EncodeV3Response(ShmAttachResponse{StatusCode::kNotSupported, 0, "no"}),
      {
          {"refused with an arena", 33, U64(1), StatusCode::kCorruption, "arena_bytes 1"},
          {"OK with a reason", 32, std::string(1, '\0'), StatusCode::kCorruption,
           "reason_length 2"},
          {"refused without a reason", 41, U16(0), StatusCode::kCorruption, "trailing"},
      });
  // Refused without a reason, exactly (no trailing bytes): hand-made from the OK frame.
  std::string frame = EncodeV3Response(ShmAttachResponse{StatusCode::kOk, 1, ""});
  frame.replace(32, 9, std::string(1, '\x09') + U64(0));
  Status s = DecodeWhole(frame);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("it needs arena_bytes 0 and a reason"), std::string::npos)
      << s.ToString();
}

// ---- Version 9: UCX_ATTACH -----------------------------------------------------------------

// A version 9 UCX_ATTACH response frame built byte by byte from whatever its fields hold, so
// that layouts the encoder refuses can be decoded: status 32, ucx_port 33, session_key_length 35,
// session_key 36, then arena_bytes (u64), reason_length (u16) and the reason; `extra` after it.
std::string UcxAttachFrame(uint8_t status, uint16_t port, std::string_view key,
                           uint64_t arena_bytes, std::string_view reason,
                           std::string_view extra = "", uint8_t version = kUcxVersion) {
  std::string descriptor(1, static_cast<char>(status));
  descriptor += U16(port);
  descriptor += static_cast<char>(key.size());
  descriptor += key;
  descriptor += U64(arena_bytes);
  descriptor += U16(static_cast<uint16_t>(reason.size()));
  descriptor += reason;
  descriptor += extra;
  FrameHeader h;
  h.version = version;
  h.opcode = Opcode::kUcxAttach;
  h.flags = kFlagResponse;
  h.request_id = 1;
  h.descriptor_length = static_cast<uint32_t>(descriptor.size());
  std::string frame;
  AppendFrameHeader(h, &frame);
  return frame + descriptor;
}

// The UCX_ATTACH response decoder alone (no re-encoding), on a whole frame.
Status DecodeUcxAttach(std::string_view frame, UcxAttachResponse* out) {
  FrameView view;
  KVPORT_RETURN_IF_ERROR(SplitFrame(frame, Limits{}, &view));
  return DecodeResponse(view.header, view.descriptor, Limits{}, out);
}

constexpr std::string_view kKey16 = "0123456789abcdef";
constexpr uint8_t kOkCode = static_cast<uint8_t>(StatusCode::kOk);
constexpr uint8_t kNotSupportedCode = static_cast<uint8_t>(StatusCode::kNotSupported);

TEST(MalformedUcxTest, HandBuiltUcxAttachFramesAreTheEncoders) {
  EncodedFrame f;
  ASSERT_TRUE(EncodeResponse(1, UcxAttachResponse{StatusCode::kOk, 40123, kKey16, 1 << 20, ""},
                             Limits{}, &f, kUcxVersion)
                  .ok());
  EXPECT_EQ(UcxAttachFrame(kOkCode, 40123, kKey16, 1 << 20, ""), f.Flatten());
  ASSERT_TRUE(EncodeResponse(1, UcxAttachResponse{StatusCode::kNotSupported, 0, "", 0, "no"},
                             Limits{}, &f, kUcxVersion)
                  .ok());
  EXPECT_EQ(UcxAttachFrame(kNotSupportedCode, 0, "", 0, "no"), f.Flatten());
  UcxAttachResponse out;
  ASSERT_TRUE(DecodeUcxAttach(UcxAttachFrame(kOkCode, 40123, kKey16, 1 << 20, ""), &out).ok());
  EXPECT_EQ(out.status, StatusCode::kOk);
  EXPECT_EQ(out.ucx_port, 40123);
  EXPECT_EQ(out.session_key, kKey16);
  EXPECT_EQ(out.arena_bytes, 1u << 20);
  EXPECT_EQ(out.reason, "");
}

// Granted: status 32, ucx_port 33, session_key_length 35, session_key 36, arena_bytes 52,
// reason_length 60. Refused ("no"): status 32, ucx_port 33, session_key_length 35,
// arena_bytes 36, reason_length 44, reason 46.
TEST(MalformedUcxTest, UcxAttachResponseFields) {
  ExpectFieldCases(
      UcxAttachFrame(kOkCode, 40123, kKey16, 1 << 20, ""),
      {
          {"port 0", 33, U16(0), StatusCode::kCorruption, "UCX port 0"},
          {"empty arena", 52, U64(0), StatusCode::kCorruption, "an empty arena"},
          {"refused with a grant", 32, std::string(1, '\x09'), StatusCode::kCorruption,
           "a refusal needs a reason and nothing else"},
          {"unknown status", 32, std::string(1, '\x0E'), StatusCode::kCorruption,
           "unknown status code 14"},
          {"key past the end", 35, std::string(1, '\xFF'), StatusCode::kCorruption,
           "truncated at session_key:"},
          {"reason past the end", 60, U16(1), StatusCode::kCorruption, "truncated at reason:"},
          {"reason too long", 60, U16(1025), StatusCode::kTooLarge, "reason_length 1025"},
      });
  ExpectFieldCases(UcxAttachFrame(kNotSupportedCode, 0, "", 0, "no"),
                   {
                       {"refused with a port", 33, U16(1), StatusCode::kCorruption,
                        "a refusal needs a reason and nothing else"},
                       {"refused with an arena", 36, U64(1), StatusCode::kCorruption,
                        "a refusal needs a reason and nothing else"},
                       {"granted without port, key or arena", 32, std::string(1, '\0'),
                        StatusCode::kCorruption, "UCX port 0"},
                       {"unknown status", 32, std::string(1, '\xFF'), StatusCode::kCorruption,
                        "unknown status code 255"},
                   });

  // Layouts a field overwrite cannot make, hand-built whole; the decoder alone judges them.
  struct Case {
    const char* what;
    std::string frame;
    const char* message_part;
  };
  const std::string reason_1024(1024, 'r');
  const Case cases[] = {
      {"OK, key of 15 bytes", UcxAttachFrame(kOkCode, 1, kKey16.substr(0, 15), 1, ""),
       "a session key of 15 bytes, not 16"},
      {"OK, key of 17 bytes", UcxAttachFrame(kOkCode, 1, std::string(kKey16) + "g", 1, ""),
       "a session key of 17 bytes, not 16"},
      {"OK, no key", UcxAttachFrame(kOkCode, 1, "", 1, ""), "a session key of 0 bytes, not 16"},
      {"OK with a reason", UcxAttachFrame(kOkCode, 1, kKey16, 1, "x"), "OK with a reason"},
      {"OK with the longest reason", UcxAttachFrame(kOkCode, 1, kKey16, 1, reason_1024),
       "OK with a reason"},
      {"refused with a port", UcxAttachFrame(kNotSupportedCode, 7, "", 0, "no"),
       "a refusal needs a reason and nothing else"},
      {"refused with a key", UcxAttachFrame(kNotSupportedCode, 0, kKey16, 0, "no"),
       "a refusal needs a reason and nothing else"},
      {"refused with a 1-byte key", UcxAttachFrame(kNotSupportedCode, 0, "k", 0, "no"),
       "a refusal needs a reason and nothing else"},
      {"refused with an arena", UcxAttachFrame(kNotSupportedCode, 0, "", 4096, "no"),
       "a refusal needs a reason and nothing else"},
      {"refused without a reason", UcxAttachFrame(kNotSupportedCode, 0, "", 0, ""),
       "a refusal needs a reason and nothing else"},
      {"OK, trailing byte", UcxAttachFrame(kOkCode, 1, kKey16, 1, "", "x"), "trailing"},
      {"refused, trailing byte", UcxAttachFrame(kNotSupportedCode, 0, "", 0, "no", "x"),
       "trailing"},
  };
  for (const Case& c : cases) {
    UcxAttachResponse out;
    Status s = DecodeUcxAttach(c.frame, &out);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << c.what << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.message_part), std::string::npos)
        << c.what << ": " << s.ToString();
    // The whole-frame path (decode, then re-encode) refuses it the same way.
    EXPECT_EQ(DecodeWhole(c.frame).code(), StatusCode::kCorruption) << c.what;
  }
  // The longest reason is fine on a refusal.
  UcxAttachResponse out;
  ASSERT_TRUE(DecodeUcxAttach(UcxAttachFrame(kNotSupportedCode, 0, "", 0, reason_1024), &out).ok());
  EXPECT_EQ(out.reason.size(), 1024u);
}

// A descriptor cut short anywhere is "truncated at" the field the cut falls in.
TEST(MalformedUcxTest, UcxAttachResponseTruncatedAtEachField) {
  struct Field {
    const char* name;
    size_t bytes;
  };
  const auto check = [](const std::string& frame, const std::vector<Field>& fields) {
    FrameView view;
    ASSERT_TRUE(SplitFrame(frame, Limits{}, &view).ok());
    size_t total = 0;
    for (const Field& field : fields)
      total += field.bytes;
    ASSERT_EQ(view.descriptor.size(), total);
    size_t start = 0;
    for (const Field& field : fields) {
      for (size_t n = start; n < start + field.bytes; ++n) {
        FrameHeader h = view.header;
        h.descriptor_length = static_cast<uint32_t>(n);
        UcxAttachResponse out;
        Status s = DecodeResponse(h, view.descriptor.substr(0, n), Limits{}, &out);
        EXPECT_EQ(s.code(), StatusCode::kCorruption) << field.name << " prefix " << n;
        EXPECT_NE(s.message().find(std::string("truncated at ") + field.name + ":"),
                  std::string::npos)
            << "prefix " << n << ": " << s.ToString();
      }
      start += field.bytes;
    }
  };
  check(UcxAttachFrame(kOkCode, 40123, kKey16, 1 << 20, ""), {{"status", 1},
                                                              {"ucx_port", 2},
                                                              {"session_key_length", 1},
                                                              {"session_key", 16},
                                                              {"arena_bytes", 8},
                                                              {"reason_length", 2}});
  check(UcxAttachFrame(kNotSupportedCode, 0, "", 0, "no UCX"), {{"status", 1},
                                                                {"ucx_port", 2},
                                                                {"session_key_length", 1},
                                                                {"arena_bytes", 8},
                                                                {"reason_length", 2},
                                                                {"reason", 6}});
}

// Version 8's UCX_ATTACH (remote keys to the node's memory) is served no more: no version 8
// frame of the opcode is encoded or decoded.
TEST(MalformedUcxTest, UcxAttachOnlyInVersion9Frames) {
  EXPECT_EQ(kUcxVersion, 9);
  const UcxAttachResponse ok{StatusCode::kOk, 40123, kKey16, 1 << 20, ""};
  EncodedFrame f;
  for (uint8_t version = kMinProtocolVersion; version < kUcxVersion; ++version) {
    Status s = EncodeResponse(1, ok, Limits{}, &f, version);
    EXPECT_EQ(s.code(), StatusCode::kNotSupported) << "v" << int{version};
    EXPECT_NE(s.message().find("needs protocol version 9; this frame is version " +
                               std::to_string(version)),
              std::string::npos)
        << s.ToString();
    EXPECT_EQ(EncodeRequest(1, UcxAttachRequest{}, Limits{}, &f, version).code(),
              StatusCode::kNotSupported)
        << "v" << int{version};
  }
  ASSERT_TRUE(EncodeResponse(1, ok, Limits{}, &f, kUcxVersion).ok());
  EXPECT_EQ(f.head[4], '\x09');
  ASSERT_TRUE(EncodeRequest(1, UcxAttachRequest{}, Limits{}, &f, kUcxVersion).ok());
  EXPECT_EQ(f.head[4], '\x09');
  // A version 8 frame: the header is refused, and so is the descriptor given to the decoder.
  const std::string v8 = UcxAttachFrame(kOkCode, 40123, kKey16, 1 << 20, "", "", 8);
  Status s = DecodeWhole(v8);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("UCX_ATTACH frame of version 8; it needs protocol version 9"),
            std::string::npos)
      << s.ToString();
  FrameHeader h;
  h.version = 8;
  h.opcode = Opcode::kUcxAttach;
  h.flags = kFlagResponse;
  h.descriptor_length = static_cast<uint32_t>(v8.size() - kFrameHeaderSize);
  UcxAttachResponse out;
  s = DecodeResponse(h, std::string_view(v8).substr(kFrameHeaderSize), Limits{}, &out);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("needs protocol version 9"), std::string::npos) << s.ToString();
}

// The encoder holds every rule the decoder does.
TEST(MalformedUcxTest, UcxAttachEncoderRefusesWhatTheDecoderWould) {
  const UcxAttachResponse ok{StatusCode::kOk, 40123, kKey16, 1 << 20, ""};
  const UcxAttachResponse refused{StatusCode::kNotSupported, 0, "", 0, "no UCX"};
  const std::string key17 = std::string(kKey16) + "g";
  struct Case {
    const char* what;
    UcxAttachResponse m;
    const char* message_part;
  };
  std::vector<Case> cases;
  auto with = [&](const char* what, UcxAttachResponse m, auto change, const char* part) {
    change(m);
    cases.push_back({what, m, part});
  };
  with(
      "OK, port 0", ok, [](UcxAttachResponse& m) { m.ucx_port = 0; }, "UCX port 0");
  with(
      "OK, key of 15", ok, [](UcxAttachResponse& m) { m.session_key = kKey16.substr(0, 15); },
      "a session key of 15 bytes, not 16");
  with(
      "OK, key of 17", ok, [&](UcxAttachResponse& m) { m.session_key = key17; },
      "a session key of 17 bytes, not 16");
  with(
      "OK, no key", ok, [](UcxAttachResponse& m) { m.session_key = ""; },
      "a session key of 0 bytes");
  with(
      "OK, empty arena", ok, [](UcxAttachResponse& m) { m.arena_bytes = 0; }, "an empty arena");
  with(
      "OK with a reason", ok, [](UcxAttachResponse& m) { m.reason = "x"; }, "OK with a reason");
  with(
      "refused with a port", refused, [](UcxAttachResponse& m) { m.ucx_port = 1; },
      "needs a reason and nothing else");
  with(
      "refused with a key", refused, [](UcxAttachResponse& m) { m.session_key = kKey16; },
      "needs a reason and nothing else");
  with(
      "refused with an arena", refused, [](UcxAttachResponse& m) { m.arena_bytes = 1; },
      "needs a reason and nothing else");
  with(
      "refused without a reason", refused, [](UcxAttachResponse& m) { m.reason = ""; },
      "needs a reason and nothing else");
  with(
      "unknown status", ok, [](UcxAttachResponse& m) { m.status = static_cast<StatusCode>(14); },
      "unknown status code 14");
  EncodedFrame f;
  ASSERT_TRUE(EncodeResponse(1, ok, Limits{}, &f, kUcxVersion).ok());
  ASSERT_TRUE(EncodeResponse(1, refused, Limits{}, &f, kUcxVersion).ok());
  for (const Case& c : cases) {
    Status s = EncodeResponse(1, c.m, Limits{}, &f, kUcxVersion);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.message_part), std::string::npos)
        << c.what << ": " << s.ToString();
  }
  // A refusal's reason over 1024 bytes is cut to 1024, and the frame decodes.
  const std::string long_reason(2000, 'r');
  UcxAttachResponse long_refusal = refused;
  long_refusal.reason = long_reason;
  ASSERT_TRUE(EncodeResponse(1, long_refusal, Limits{}, &f, kUcxVersion).ok());
  const std::string frame = f.Flatten();
  UcxAttachResponse out;
  ASSERT_TRUE(DecodeUcxAttach(frame, &out).ok());
  EXPECT_EQ(out.reason, long_reason.substr(0, 1024));
}

// ---- Version 9: the messages over UCX ------------------------------------------------------

TEST(MalformedUcxTest, UcxMessageHeadersOfTheWrongLength) {
  const std::string put = EncodeUcxPut({kKey16, 1, 2});
  const std::string get = EncodeUcxGet({kKey16, 1, 2, 3});
  const std::string done = EncodeUcxDone({1, StatusCode::kOk});
  ASSERT_EQ(put.size(), 32u);
  ASSERT_EQ(get.size(), 40u);
  ASSERT_EQ(done.size(), 9u);
  UcxPut put_out;
  UcxGet get_out;
  UcxDone done_out;
  ASSERT_TRUE(DecodeUcxPut(put, &put_out).ok());
  ASSERT_TRUE(DecodeUcxGet(get, &get_out).ok());
  ASSERT_TRUE(DecodeUcxDone(done, &done_out).ok());
  const auto expect_corruption = [](const char* what, const Status& s, const char* part) {
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << what << ": " << s.ToString();
    EXPECT_NE(s.message().find(part), std::string::npos) << what << ": " << s.ToString();
  };
  // One byte short, one byte over (a zero byte or a copy of the last), and none at all.
  for (const std::string& extra : {std::string(1, '\0'), std::string(1, '\x01')}) {
    expect_corruption("put + 1", DecodeUcxPut(put + extra, &put_out), "of 33 bytes, not 32");
    expect_corruption("get + 1", DecodeUcxGet(get + extra, &get_out), "of 41 bytes, not 40");
    expect_corruption("done + 1", DecodeUcxDone(done + extra, &done_out), "of 10 bytes, not 9");
  }
  expect_corruption("put - 1", DecodeUcxPut(put.substr(0, 31), &put_out), "of 31 bytes, not 32");
  expect_corruption("get - 1", DecodeUcxGet(get.substr(0, 39), &get_out), "of 39 bytes, not 40");
  expect_corruption("done - 1", DecodeUcxDone(done.substr(0, 8), &done_out), "of 8 bytes, not 9");
  expect_corruption("empty put", DecodeUcxPut("", &put_out), "of 0 bytes, not 32");
  expect_corruption("empty get", DecodeUcxGet("", &get_out), "of 0 bytes, not 40");
  expect_corruption("empty done", DecodeUcxDone("", &done_out), "of 0 bytes, not 9");
  // One message's header is not another's.
  expect_corruption("a get as a put", DecodeUcxPut(get, &put_out), "UCX put header of 40 bytes");
  expect_corruption("a put as a get", DecodeUcxGet(put, &get_out), "UCX get header of 32 bytes");
  expect_corruption("a put as an answer", DecodeUcxDone(put, &done_out),
                    "UCX answer header of 32 bytes");
  // Every prefix of each header, and every longer one up to twice its length: exactly one
  // length decodes.
  for (size_t n = 0; n <= 2 * put.size(); ++n)
    EXPECT_EQ(DecodeUcxPut((put + put).substr(0, n), &put_out).ok(), n == put.size()) << n;
  for (size_t n = 0; n <= 2 * get.size(); ++n)
    EXPECT_EQ(DecodeUcxGet((get + get).substr(0, n), &get_out).ok(), n == get.size()) << n;
  for (size_t n = 0; n <= 2 * done.size(); ++n)
    EXPECT_EQ(DecodeUcxDone((done + done).substr(0, n), &done_out).ok(), n == done.size()) << n;
}

TEST(MalformedUcxTest, UcxDoneWithAnUnknownStatusCode) {
  std::string done = EncodeUcxDone({0x0102030405060708ull, StatusCode::kPermissionDenied});
  ASSERT_EQ(done.size(), 9u);
  ASSERT_EQ(done[8], '\x0D');
  UcxDone out;
  ASSERT_TRUE(DecodeUcxDone(done, &out).ok());
  for (int code : {14, 15, 0x80, 0xFF}) {
    done[8] = static_cast<char>(code);
    Status s = DecodeUcxDone(done, &out);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << code;
    EXPECT_NE(s.message().find("unknown status code " + std::to_string(code)), std::string::npos)
        << s.ToString();
  }
}

TEST(MalformedShmTest, ArenaReserveFields) {
  // The MSET descriptor: namespace 32 ("ns"), ttl 35, count 39, item 0 lengths at 43.
  ArenaReserveRequest in{"ns", 60, {{"a", "m", 3, nullptr}, {"bc", "", 2, nullptr}}};
  const std::string request = EncodeV3Request(in);
  ExpectFieldCases(
      request,
      {
          {"count above bytes", 39, U32(3), StatusCode::kCorruption, "count 3"},
          {"count above limit", 39, U32(5000), StatusCode::kTooLarge, "max_batch_keys"},
          {"empty key", 43, U16(0), StatusCode::kInvalidArgument, "item 0: empty key"},
          {"value too long", 49, U64((1ull << 30) + 1), StatusCode::kTooLarge, "max_value_bytes"},
      });
  // Value lengths are reservations, not a payload: a payload on the frame is malformed.
  std::string with_payload = request + "x";
  with_payload.replace(24, 8, U64(1));
  Status s = DecodeWhole(with_payload);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("never carries a payload"), std::string::npos) << s.ToString();

  // Response: overall 32, reservation_id 33, count 41, item 0 status 45 offset 46, item 1 status
  // 54 offset 55.
  ExpectFieldCases(
      EncodeV3Response(
          ArenaReserveResponse{5, {{StatusCode::kOk, 128}, {StatusCode::kNoSpace, 0}}}),
      {
          {"overall disagrees", 32, std::string(1, '\0'), StatusCode::kCorruption, "disagrees"},
          {"offset on a miss", 55, U64(8), StatusCode::kCorruption,
           "item 1: status NoSpace with "
           "offset 8"},
          {"no reservation id", 33, U64(0), StatusCode::kCorruption, "reservation_id 0 with 1"},
          {"count above limit", 41, U32(4097), StatusCode::kTooLarge, "max_batch_keys"},
          {"count above bytes", 41, U32(3), StatusCode::kCorruption, "count 3"},
          {"unknown status", 54, std::string(1, '\x20'), StatusCode::kCorruption,
           "unknown status code 32"},
      });
  ExpectFieldCases(EncodeV3Response(ArenaReserveResponse{0, {{StatusCode::kNoSpace, 0}}}),
                   {{"reservation id without a reservation", 33, U64(4), StatusCode::kCorruption,
                     "reservation_id 4 with 0"}});
}

TEST(MalformedShmTest, ArenaCommitFields) {
  // reservation_id 32, count 40, commit bytes 44, 45, 46.
  ExpectFieldCases(
      EncodeV3Request(ArenaCommitRequest{9, {1, 0, 1}, {}}),
      {
          {"reservation id 0", 32, U64(0), StatusCode::kCorruption, "reservation_id is 0"},
          {"commit byte 2", 45, std::string(1, '\x02'), StatusCode::kCorruption,
           "item 1: commit byte 2"},
          {"count above limit", 40, U32(4097), StatusCode::kTooLarge, "max_batch_keys"},
          {"count above bytes", 40, U32(4), StatusCode::kCorruption, "count 4"},
          {"count below items", 40, U32(2), StatusCode::kCorruption, "trailing"},
      });
  // The response is an MSET response.
  ExpectFieldCases(
      EncodeV3Response(ArenaCommitResponse{{StatusCode::kOk, StatusCode::kAborted}}),
      {{"overall disagrees", 32, std::string(1, '\0'), StatusCode::kCorruption, "disagrees"}});
}

TEST(MalformedShmTest, ArenaGetFields) {
  ArenaGetRequest req;
  req.keys = {{"k", 10}};
  const std::string request = EncodeV3Request(req);
  // META_ONLY is MGET's alone; ANY_NAMESPACE needs an empty namespace, as for MGET.
  std::string meta_only = request;
  meta_only[6] = static_cast<char>(kFlagMetaOnly);
  Status s = DecodeWhole(meta_only);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("meta-only flag on a ARENA_GET frame"), std::string::npos)
      << s.ToString();
  ArenaGetRequest in_ns;
  in_ns.ns = "x";
  in_ns.keys = {{"k", 10}};
  std::string any = EncodeV3Request(in_ns);
  any[6] = static_cast<char>(kFlagAnyNamespace);
  s = DecodeWhole(any);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("it must be empty"), std::string::npos) << s.ToString();

  // Response: overall 32, lease_id 33, count 41; item 0: status 45, meta_length 46,
  // value_length 50, offset 58, meta 66; item 1: status 67, meta_length 68, value_length 72,
  // offset 80.
  ExpectFieldCases(
      EncodeV3Response(
          ArenaGetResponse{3, {{StatusCode::kOk, "M", 2, 64}, {StatusCode::kNotFound, "", 0, 0}}}),
      {
          {"overall disagrees", 32, std::string(1, '\0'), StatusCode::kCorruption, "disagrees"},
          {"overall unknown", 32, std::string(1, '\x03'), StatusCode::kCorruption,
           "overall_status 3"},
          {"no lease id", 33, U64(0), StatusCode::kCorruption, "lease_id 0 with 1 hits"},
          {"offset on a miss", 80, U64(64), StatusCode::kCorruption,
           "item 1: status NotFound with offset 64"},
          {"miss with value", 72, U64(1), StatusCode::kCorruption, "NotFound"},
          {"miss with meta", 68, U32(1), StatusCode::kCorruption, "NotFound"},
          {"meta too long", 46, U32(4097), StatusCode::kTooLarge, "max_meta_bytes"},
          {"value too long", 50, U64((1ull << 30) + 1), StatusCode::kTooLarge, "max_value_bytes"},
          {"count above limit", 41, U32(4097), StatusCode::kTooLarge, "max_batch_keys"},
          {"count above bytes", 41, U32(3), StatusCode::kCorruption, "count 3"},
          {"status unknown", 67, std::string(1, '\x0E'), StatusCode::kCorruption,
           "unknown status code 14"},
      });
  // A too-small buffer: meta and length, but no offset.
  ExpectFieldCases(
      EncodeV3Response(ArenaGetResponse{0, {{StatusCode::kTooLarge, "", 9, 0}}}),
      {{"offset on TooLarge", 58, U64(1), StatusCode::kCorruption, "status TooLarge with offset 1"},
       {"lease without hits", 33, U64(1), StatusCode::kCorruption, "lease_id 1 with 0 hits"}});
}

TEST(MalformedShmTest, ArenaReleaseFields) {
  // count 32, lease ids 36, 44.
  ExpectFieldCases(
      EncodeV3Request(ArenaReleaseRequest{{1, 2}}),
      {
          {"lease id 0", 44, U64(0), StatusCode::kCorruption, "item 1: lease_id 0"},
          {"count above limit", 32, U32(4097), StatusCode::kTooLarge, "max_batch_keys"},
          {"count above bytes", 32, U32(3), StatusCode::kCorruption, "count 3"},
          {"count below ids", 32, U32(1), StatusCode::kCorruption, "trailing"},
      });
  // Count 0 (nothing to release) is a bad field; hand-made: a 4-byte descriptor.
  std::string frame = EncodeV3Request(ArenaReleaseRequest{{1}});
  frame.resize(36);
  frame.replace(16, 4, U32(4));
  frame.replace(32, 4, U32(0));
  Status s = DecodeWhole(frame);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("count is 0"), std::string::npos) << s.ToString();
  // The response: u32 released and nothing else.
  std::string response = EncodeV3Response(ArenaReleaseResponse{1}) + "x";
  response.replace(16, 4, U32(5));
  s = DecodeWhole(response);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("ARENA_RELEASE response: 1 trailing bytes"), std::string::npos)
      << s.ToString();
}

// A frame of an opcode of version 3 or later whose version byte says 1 or 2 is rejected by the
// header decoder, and by the descriptor decoders for headers made by hand, naming the version
// the opcode needs.
TEST(MalformedShmTest, Version3OpcodesInOlderFrames) {
  for (const auto& sample : SampleFrames()) {
    FrameView view;
    ASSERT_TRUE(SplitFrame(sample.bytes, Limits{}, &view).ok()) << sample.name;
    if (OpcodeMinVersion(view.header.opcode) < kShmVersion) continue;
    for (char old : {'\x01', '\x02'}) {
      std::string frame = sample.bytes;
      frame[4] = old;
      const std::string needs =
          "needs protocol version " + std::to_string(int{OpcodeMinVersion(view.header.opcode)});
      Status s = DecodeWhole(frame);
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << sample.name;
      EXPECT_NE(s.message().find(needs), std::string::npos) << s.ToString();
      FrameHeader h = view.header;
      h.version = static_cast<uint8_t>(old);
      if (h.is_response()) {
        AnyResponse r;
        s = DecodeAnyResponse(h, view.descriptor, Limits{}, &r);
      } else {
        AnyRequest r;
        s = DecodeAnyRequest(h, view.descriptor, Limits{}, &r);
      }
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << sample.name;
      EXPECT_NE(s.message().find(needs), std::string::npos) << s.ToString();
    }
  }
}

TEST(EncoderShmTest, RefusedBelowVersion3AndAboveThisBuild) {
  ArenaGetRequest get;
  get.keys = {{"k", 1}};
  ArenaReserveRequest reserve{"", 0, {{"k", "", 1, nullptr}}};
  auto expect = [](const char* what, auto encode) {
    EncodedFrame f;
    for (uint8_t version : {1, 2}) {
      Status s = encode(&f, version);
      EXPECT_EQ(s.code(), StatusCode::kNotSupported) << what << " v" << int{version};
      EXPECT_NE(s.message().find("needs protocol version 3; this frame is version " +
                                 std::to_string(version)),
                std::string::npos)
          << s.ToString();
    }
    for (uint8_t version : {0, kMaxProtocolVersion + 1}) {
      EXPECT_EQ(encode(&f, version).code(), StatusCode::kInvalidArgument)
          << what << " v" << int{version};
    }
    Status s = encode(&f, 3);
    EXPECT_TRUE(s.ok()) << what << ": " << s.ToString();
    EXPECT_EQ(f.head[4], '\x03') << what;
  };
  const Limits l;
  expect("NODE_INFO request",
         [&](EncodedFrame* f, uint8_t v) { return EncodeRequest(1, NodeInfoRequest{}, l, f, v); });
  expect("NODE_INFO response", [&](EncodedFrame* f, uint8_t v) {
    return EncodeResponse(1, NodeInfoResponse{1, 0, "h", ""}, l, f, v);
  });
  expect("SHM_ATTACH request",
         [&](EncodedFrame* f, uint8_t v) { return EncodeRequest(1, ShmAttachRequest{}, l, f, v); });
  expect("SHM_ATTACH response", [&](EncodedFrame* f, uint8_t v) {
    return EncodeResponse(1, ShmAttachResponse{StatusCode::kOk, 1, ""}, l, f, v);
  });
  expect("ARENA_RESERVE request",
         [&](EncodedFrame* f, uint8_t v) { return EncodeRequest(1, reserve, l, f, v); });
  expect("ARENA_RESERVE response", [&](EncodedFrame* f, uint8_t v) {
    return EncodeResponse(1, ArenaReserveResponse{1, {{StatusCode::kOk, 0}}}, l, f, v);
  });
  expect("ARENA_COMMIT request", [&](EncodedFrame* f, uint8_t v) {
    return EncodeRequest(1, ArenaCommitRequest{1, {1}, {}}, l, f, v);
  });
  expect("ARENA_COMMIT response", [&](EncodedFrame* f, uint8_t v) {
    return EncodeResponse(1, ArenaCommitResponse{{StatusCode::kOk}}, l, f, v);
  });
  expect("ARENA_GET request",
         [&](EncodedFrame* f, uint8_t v) { return EncodeRequest(1, get, l, f, v); });
  expect("ARENA_GET response", [&](EncodedFrame* f, uint8_t v) {
    return EncodeResponse(1, ArenaGetResponse{0, {{StatusCode::kNotFound, "", 0, 0}}}, l, f, v);
  });
  expect("ARENA_RELEASE request", [&](EncodedFrame* f, uint8_t v) {
    return EncodeRequest(1, ArenaReleaseRequest{{1}}, l, f, v);
  });
  expect("ARENA_RELEASE response", [&](EncodedFrame* f, uint8_t v) {
    return EncodeResponse(1, ArenaReleaseResponse{0}, l, f, v);
  });
}

// Whatever ARENA_GET request fits max_frame_bytes, its largest answer (every key a hit with the
// largest meta) fits the response frame limit, as for MGET.
TEST(EncoderShmTest, FullArenaGetResponseFits) {
  Limits l;
  l.max_key_bytes = 1024;
  l.max_frame_bytes = 8192;
  l.max_batch_keys = 256;
  ASSERT_TRUE(ValidateLimits(l).ok());
  ArenaGetRequest req;
  req.keys.assign(l.max_batch_keys, MgetKey{"k", kUnlimitedCapacity});
  EncodedFrame f;
  ASSERT_TRUE(EncodeRequest(1, req, l, &f).ok());
  const std::string meta(l.max_meta_bytes, 'm');
  ArenaGetResponse r;
  r.lease_id = 1;
  r.results.assign(l.max_batch_keys, ArenaGetResult{StatusCode::kOk, meta, 1, 1});
  Status s = EncodeResponse(1, r, l, &f);
  EXPECT_TRUE(s.ok()) << s.ToString();
  FrameHeader h;
  EXPECT_TRUE(DecodeFrameHeader(f.head, l, &h).ok());
  // The smallest limits of all: one key per batch, the smallest frame.
  Limits tiny;
  tiny.max_key_bytes = 1;
  tiny.max_namespace_bytes = 0;
  tiny.max_meta_bytes = 0;
  tiny.max_batch_keys = 1;
  tiny.max_frame_bytes = 1;
  while (!ValidateLimits(tiny).ok())
    ++tiny.max_frame_bytes;
  r.results.assign(1, ArenaGetResult{StatusCode::kOk, "", 1, 1});
  s = EncodeResponse(1, r, tiny, &f);
  EXPECT_TRUE(s.ok()) << "max_frame_bytes " << tiny.max_frame_bytes << ": " << s.ToString();
}

TEST(EncoderShmTest, RefusesWhatDecodersReject) {
  EncodedFrame f;
  struct Case {
    const char* what;
    Status status;
    StatusCode code;
    const char* message_part;
  };
  const std::string long_host(256, 'h'), long_path(108, 'p'), long_key(8193, 'k');
  ArenaGetRequest get_in_ns;
  get_in_ns.ns = "x";
  get_in_ns.any_namespace = true;
  get_in_ns.keys = {{"k", 1}};
  ArenaGetRequest get_empty_key;
  get_empty_key.keys = {{"", 1}};
  const Case cases[] = {
      {"long host id", EncodeResponse(1, NodeInfoResponse{1, 0, long_host, ""}, Limits{}, &f),
       StatusCode::kInvalidArgument, "host_id of 256 bytes"},
      {"long unix path", EncodeResponse(1, NodeInfoResponse{1, 0, "", long_path}, Limits{}, &f),
       StatusCode::kInvalidArgument, "unix_path of 108 bytes"},
      {"shm offer without path",
       EncodeResponse(1, NodeInfoResponse{1, kOfferSharedMemory, "", ""}, Limits{}, &f),
       StatusCode::kInvalidArgument, "without a unix_path"},
      {"attach OK with arena 0",
       EncodeResponse(1, ShmAttachResponse{StatusCode::kOk, 0, ""}, Limits{}, &f),
       StatusCode::kInvalidArgument, "OK with arena_bytes 0"},
      {"attach OK with a reason",
       EncodeResponse(1, ShmAttachResponse{StatusCode::kOk, 1, "why"}, Limits{}, &f),
       StatusCode::kInvalidArgument, "reason of 3 bytes"},
      {"attach refused without a reason",
       EncodeResponse(1, ShmAttachResponse{StatusCode::kNotSupported, 0, ""}, Limits{}, &f),
       StatusCode::kInvalidArgument, "a reason"},
      {"attach refused with an arena",
       EncodeResponse(1, ShmAttachResponse{StatusCode::kNotSupported, 8, "x"}, Limits{}, &f),
       StatusCode::kInvalidArgument, "arena_bytes 8"},
      {"attach unknown status",
       EncodeResponse(1, ShmAttachResponse{static_cast<StatusCode>(40), 0, "x"}, Limits{}, &f),
       StatusCode::kInvalidArgument, "unknown status code 40"},
      {"reserve long key",
       EncodeRequest(1, ArenaReserveRequest{"", 0, {{long_key, "", 1, nullptr}}}, Limits{}, &f),
       StatusCode::kTooLarge, "max_key_bytes"},
      {"reserve offset on a miss",
       EncodeResponse(1, ArenaReserveResponse{1, {{StatusCode::kOk, 0}, {StatusCode::kNoSpace, 4}}},
                      Limits{}, &f),
       StatusCode::kInvalidArgument, "item 1: status NoSpace with offset 4"},
      {"reserve id without a reservation",
       EncodeResponse(1, ArenaReserveResponse{1, {{StatusCode::kNoSpace, 0}}}, Limits{}, &f),
       StatusCode::kInvalidArgument, "reservation_id 1 with 0"},
      {"reserve reservation without an id",
       EncodeResponse(1, ArenaReserveResponse{0, {{StatusCode::kOk, 0}}}, Limits{}, &f),
       StatusCode::kInvalidArgument, "reservation_id 0 with 1"},
      {"commit id 0", EncodeRequest(1, ArenaCommitRequest{0, {1}, {}}, Limits{}, &f),
       StatusCode::kInvalidArgument, "reservation_id is 0"},
      {"commit byte 2", EncodeRequest(1, ArenaCommitRequest{1, {1, 2}, {}}, Limits{}, &f),
       StatusCode::kInvalidArgument, "item 1: commit byte 2"},
      {"commit too many",
       EncodeRequest(1, ArenaCommitRequest{1, std::vector<uint8_t>(4097, 1), {}}, Limits{}, &f),
       StatusCode::kTooLarge, "max_batch_keys"},
      {"commit response unknown status",
       EncodeResponse(1, ArenaCommitResponse{{static_cast<StatusCode>(99)}}, Limits{}, &f),
       StatusCode::kInvalidArgument, "unknown status code 99"},
      {"get any-namespace with a namespace", EncodeRequest(1, get_in_ns, Limits{}, &f),
       StatusCode::kInvalidArgument, "must be empty"},
      {"get empty key", EncodeRequest(1, get_empty_key, Limits{}, &f), StatusCode::kInvalidArgument,
       "item 0: empty key"},
      {"get offset on a miss",
       EncodeResponse(1, ArenaGetResponse{0, {{StatusCode::kNotFound, "", 0, 5}}}, Limits{}, &f),
       StatusCode::kInvalidArgument, "status NotFound with offset 5"},
      {"get miss with meta",
       EncodeResponse(1, ArenaGetResponse{0, {{StatusCode::kNotFound, "m", 0, 0}}}, Limits{}, &f),
       StatusCode::kInvalidArgument, "with a meta or value length"},
      {"get lease without hits",
       EncodeResponse(1, ArenaGetResponse{2, {{StatusCode::kNotFound, "", 0, 0}}}, Limits{}, &f),
       StatusCode::kInvalidArgument, "lease_id 2 with 0 hits"},
      {"get hits without a lease",
       EncodeResponse(1, ArenaGetResponse{0, {{StatusCode::kOk, "", 1, 0}}}, Limits{}, &f),
       StatusCode::kInvalidArgument, "lease_id 0 with 1 hits"},
      {"release nothing", EncodeRequest(1, ArenaReleaseRequest{}, Limits{}, &f),
       StatusCode::kInvalidArgument, "no lease ids"},
      {"release lease 0", EncodeRequest(1, ArenaReleaseRequest{{3, 0}}, Limits{}, &f),
       StatusCode::kInvalidArgument, "item 1: lease_id 0"},
      {"release too many",
       EncodeRequest(1, ArenaReleaseRequest{std::vector<uint64_t>(4097, 1)}, Limits{}, &f),
       StatusCode::kTooLarge, "max_batch_keys"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), c.code) << c.what << ": " << c.status.ToString();
    EXPECT_NE(c.status.message().find(c.message_part), std::string::npos)
        << c.what << ": " << c.status.ToString();
  }
}

// ---- Version 10: checksums -----------------------------------------------------------------

constexpr uint64_t kSumA = 0x0123456789ABCDEFull;
constexpr uint64_t kSumB = 0xFEDCBA9876543210ull;

template <typename Message>
std::string EncodeV10Request(const Message& m) {
  return FlatRequest(m, kChecksumVersion);
}
template <typename Message>
std::string EncodeV10Response(const Message& m) {
  return FlatResponse(m, kChecksumVersion);
}

// Every cut of the descriptor of `frame` that ends inside the 8 bytes at `offset` (into the
// whole frame) is Corruption "truncated at checksum".
void ExpectTruncatedInChecksum(const std::string& frame, size_t offset) {
  FrameView view;
  ASSERT_TRUE(SplitFrame(frame, Limits{}, &view).ok());
  for (size_t n = offset - kFrameHeaderSize; n < offset - kFrameHeaderSize + 8; ++n) {
    FrameHeader h = view.header;
    h.descriptor_length = static_cast<uint32_t>(n);
    const std::string_view prefix = view.descriptor.substr(0, n);
    Status s;
    if (h.is_response()) {
      AnyResponse r;
      s = DecodeAnyResponse(h, prefix, Limits{}, &r);
    } else {
      AnyRequest r;
      s = DecodeAnyRequest(h, prefix, Limits{}, &r);
    }
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << n << ": " << s.ToString();
    EXPECT_NE(s.message().find("truncated at checksum"), std::string::npos)
        << n << ": " << s.ToString();
  }
}

TEST(MalformedChecksumTest, MsetFields) {
  // Namespace 32 ("ns"), ttl 35, count 39; item 0: key_len 43, meta_len 45, value_len 49,
  // checksum 57, key 65, meta 66; item 1: key_len 67, meta_len 69, value_len 73, checksum 81,
  // key 89; payload 91.
  static const std::string v1 = "xyz", v2 = "pq";
  const MsetRequest in{
      "ns", 60, {{"a", "m", 3, v1.data(), kSumA}, {"bc", "", 2, v2.data(), kSumB}}};
  ExpectFieldCases(
      EncodeV10Request(in),
      {
          // 48 bytes are left: enough for 3 items of version 9 (3 x 15), not of version 10.
          {"count above bytes", 39, U32(3), StatusCode::kCorruption, "count 3 needs at least 69"},
          {"count below items", 39, U32(1), StatusCode::kCorruption, "trailing"},
          {"empty key", 43, U16(0), StatusCode::kInvalidArgument, "item 0: empty key"},
          {"key too long", 67, U16(8193), StatusCode::kTooLarge, "item 1: key_length 8193"},
          {"key past end", 67, U16(3), StatusCode::kCorruption, "truncated at key"},
          {"meta past end", 69, U32(1), StatusCode::kCorruption, "truncated at meta"},
          {"value too long", 49, U64((1ull << 30) + 1), StatusCode::kTooLarge, "max_value_bytes"},
          {"value sum above payload", 49, U64(4), StatusCode::kCorruption, "payload_length"},
          {"value sum below payload", 73, U64(1), StatusCode::kCorruption, "payload_length"},
      });
  // A cut inside the last item's checksum (the first item's key is long enough for the count
  // check to pass): item 1's checksum at 32 + 11 + (22 + 40) + 14.
  const std::string long_key(40, 'k');
  ExpectTruncatedInChecksum(
      EncodeV10Request(
          MsetRequest{"ns", 0, {{long_key, "", 3, v1.data(), 0}, {"b", "", 0, nullptr, kSumB}}}),
      32 + 11 + 62 + 14);
  // ARENA_RESERVE has the same items.
  ExpectTruncatedInChecksum(
      EncodeV10Request(ArenaReserveRequest{
          "ns", 0, {{long_key, "", 3, nullptr, 0}, {"b", "", 0, nullptr, kSumB}}}),
      32 + 11 + 62 + 14);
}

TEST(MalformedChecksumTest, MgetResponseFields) {
  // Overall 32, count 33; item 0: status 37, meta_length 38, value_length 42, checksum 50,
  // meta 58; item 1: status 59, meta_length 60, value_length 64, checksum 72; payload 80.
  const std::string hit = "hi";
  MgetResponse in;
  in.results = {{StatusCode::kOk, "M", 2, hit.data(), kSumA},
                {StatusCode::kNotFound, "", 0, nullptr, 0}};
  ExpectFieldCases(
      EncodeV10Response(in),
      {
          {"checksum on a miss", 72, U64(1), StatusCode::kCorruption,
           "item 1: status NotFound with checksum 0x1"},
          {"miss with value", 64, U64(1), StatusCode::kCorruption, "NotFound"},
          // 43 bytes are left: enough for 3 results of version 9 (3 x 13), not of version 10.
          {"count above bytes", 33, U32(3), StatusCode::kCorruption, "count 3 needs at least 63"},
          {"hit payload mismatch", 42, U64(3), StatusCode::kCorruption, "payload_length"},
          {"meta past end", 38, U32(30), StatusCode::kCorruption, "truncated at meta"},
      });
  // TooLarge carries the stored checksum; any status without object info may not.
  MgetResponse too_large;
  too_large.results = {{StatusCode::kTooLarge, "", 0, nullptr, kSumA}};
  ExpectFieldCases(EncodeV10Response(too_large),
                   {{"checksum on NotFound", 37, std::string(1, '\x02'), StatusCode::kCorruption,
                     "item 0: status NotFound with checksum 0x123456789abcdef"},
                    {"checksum on NoSpace", 37, std::string(1, '\x03'), StatusCode::kCorruption,
                     "item 0: status NoSpace with checksum"}});
  // A cut inside the last result's checksum: item 1's at 32 + 5 + (21 + 40) + 13.
  const std::string meta(40, 'm');
  MgetResponse long_meta;
  long_meta.results = {{StatusCode::kOk, meta, 0, nullptr, 0},
                       {StatusCode::kOk, "", 0, nullptr, kSumB}};
  ExpectTruncatedInChecksum(EncodeV10Response(long_meta), 32 + 5 + 61 + 13);
}

TEST(MalformedChecksumTest, ArenaCommitFields) {
  // reservation_id 32, count 40, commit bytes 44, 45, 46, checksums 47, 55, 63.
  const std::string frame = EncodeV10Request(ArenaCommitRequest{9, {1, 0, 1}, {kSumA, 0, kSumB}});
  ASSERT_EQ(frame.size(), 71u);
  ExpectFieldCases(
      frame,
      {
          {"commit byte 2", 45, std::string(1, '\x02'), StatusCode::kCorruption,
           "item 1: commit byte 2"},
          {"count above bytes", 40, U32(4), StatusCode::kCorruption, "count 4 needs at least 36"},
          {"count below items", 40, U32(2), StatusCode::kCorruption, "trailing"},
          {"count above limit", 40, U32(4097), StatusCode::kTooLarge, "max_batch_keys"},
          // Read as version 9, the checksum table is 24 bytes too many.
          {"a version 9 frame", 4, std::string(1, '\x09'), StatusCode::kCorruption,
           "24 trailing bytes"},
      });
  // A version 9 frame read as version 10 lacks its checksums.
  EncodedFrame f;
  ASSERT_TRUE(
      EncodeRequest(1, ArenaCommitRequest{9, {1, 0, 1}, {}}, Limits{}, &f, kChecksumVersion - 1)
          .ok());
  std::string v9 = f.Flatten();
  v9[4] = static_cast<char>(kChecksumVersion);
  Status s = DecodeWhole(v9);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("count 3 needs at least 27 bytes"), std::string::npos) << s.ToString();
}

TEST(MalformedChecksumTest, ArenaGetResponseFields) {
  // Overall 32, lease_id 33, count 41; item 0: status 45, meta_length 46, value_length 50,
  // offset 58, checksum 66, meta 74; item 1: status 75, meta_length 76, value_length 80,
  // offset 88, checksum 96.
  ExpectFieldCases(
      EncodeV10Response(ArenaGetResponse{
          3, {{StatusCode::kOk, "M", 2, 64, kSumA}, {StatusCode::kNotFound, "", 0, 0, 0}}}),
      {
          {"checksum on a miss", 96, U64(7), StatusCode::kCorruption,
           "item 1: status NotFound with checksum 0x7"},
          {"offset on a miss", 88, U64(64), StatusCode::kCorruption,
           "item 1: status NotFound with offset 64"},
          {"count above bytes", 41, U32(3), StatusCode::kCorruption, "count 3 needs at least 87"},
          {"meta past end", 46, U32(31), StatusCode::kCorruption, "truncated at meta"},
      });
  ExpectFieldCases(
      EncodeV10Response(ArenaGetResponse{0, {{StatusCode::kTooLarge, "", 9, 0, kSumB}}}),
      {{"offset on TooLarge", 58, U64(1), StatusCode::kCorruption,
        "status TooLarge with offset 1"}});
  // A cut inside the last result's checksum: item 1's at 32 + 13 + (29 + 40) + 21.
  const std::string meta(40, 'm');
  ExpectTruncatedInChecksum(
      EncodeV10Response(ArenaGetResponse{
          1, {{StatusCode::kOk, meta, 1, 64, 0}, {StatusCode::kOk, "", 0, 0, kSumB}}}),
      32 + 13 + 69 + 21);
}

TEST(EncoderChecksumTest, RefusesWhatDecodersReject) {
  EncodedFrame f;
  for (uint8_t version : {uint8_t{kChecksumVersion - 1}, kChecksumVersion}) {
    // A checksum on a result without object info is a caller bug whatever the version.
    MgetResponse mget;
    mget.results = {{StatusCode::kOk, "", 0, nullptr, kSumA},
                    {StatusCode::kNotFound, "", 0, nullptr, kSumB}};
    Status s = EncodeResponse(1, mget, Limits{}, &f, version);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << int{version} << ": " << s.ToString();
    EXPECT_NE(s.message().find("item 1: status NotFound with checksum 0xfedcba9876543210"),
              std::string::npos)
        << s.ToString();
    ArenaGetResponse get{0, {{StatusCode::kUnavailable, "", 0, 0, 1}}};
    s = EncodeResponse(1, get, Limits{}, &f, version);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << int{version} << ": " << s.ToString();
    EXPECT_NE(s.message().find("item 0: status Unavailable with checksum 0x1"), std::string::npos)
        << s.ToString();
    // TooLarge answers carry the stored checksum.
    get.results[0].status = StatusCode::kTooLarge;
    s = EncodeResponse(1, get, Limits{}, &f, version);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  Status s = EncodeRequest(1, ArenaCommitRequest{9, {1, 0, 1}, {1, 2, 3, 4}}, Limits{}, &f,
                           kChecksumVersion);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("4 checksums for 3 items"), std::string::npos) << s.ToString();
  s = EncodeRequest(1, ArenaCommitRequest{9, {1}, {0}}, Limits{}, &f, kShmVersion);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("1 checksums in a version 3 frame"), std::string::npos)
      << s.ToString();
}

// Whatever MGET or ARENA_GET request fits max_frame_bytes, its largest version 10 answer fits the
// response frame limit, as in older versions.
TEST(EncoderChecksumTest, FullAnswersFitInVersion10) {
  Limits l;
  l.max_key_bytes = 1024;
  l.max_frame_bytes = 8192;
  l.max_batch_keys = 256;
  ASSERT_TRUE(ValidateLimits(l).ok());
  const std::string meta(l.max_meta_bytes, 'm');
  EncodedFrame f;
  MgetResponse mget;
  mget.meta_only = true;
  mget.results.assign(l.max_batch_keys, MgetResult{StatusCode::kOk, meta, 1, nullptr, kSumA});
  Status s = EncodeResponse(1, mget, l, &f, kChecksumVersion);
  EXPECT_TRUE(s.ok()) << s.ToString();
  ArenaGetResponse get;
  get.lease_id = 1;
  get.results.assign(l.max_batch_keys, ArenaGetResult{StatusCode::kOk, meta, 1, 1, kSumA});
  s = EncodeResponse(1, get, l, &f, kChecksumVersion);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

}  // namespace
}  // namespace kvport::protocol
