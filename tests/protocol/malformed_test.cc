// Malformed input: every truncation, every bad field, every broken limit is a clean Status.
#include <gtest/gtest.h>

#include <string>
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
          {"status unknown", 51, std::string(1, '\x0D'), StatusCode::kCorruption,
           "unknown status code 13"},
          {"miss with value", 56, U64(1), StatusCode::kCorruption, "NotFound"},
          {"miss with meta", 52, U32(1), StatusCode::kCorruption, "NotFound"},
          {"hit payload mismatch", 42, U64(3), StatusCode::kCorruption, "payload_length"},
          {"meta too long", 38, U32(4097), StatusCode::kTooLarge, "max_meta_bytes"},
          {"count above limit", 33, U32(4097), StatusCode::kTooLarge, "max_batch_keys"},
      });
}

TEST(MalformedTest, HelloListErrorStatsFields) {
  EncodedFrame f;
  ASSERT_TRUE(EncodeRequest(1, HelloRequest{1, 1, "c"}, Limits{}, &f).ok());
  ExpectFieldCases(
      f.Flatten(),
      {{"min above max", 32, std::string(1, '\x02'), StatusCode::kInvalidArgument, "version range"},
       {"min 0", 32, std::string(1, '\0'), StatusCode::kInvalidArgument, "version range"}});
  ASSERT_TRUE(EncodeResponse(1, HelloResponse{1, Limits{}, "s"}, Limits{}, &f).ok());
  ExpectFieldCases(
      f.Flatten(),
      {{"version 3", 32, std::string(1, '\x03'), StatusCode::kNotSupported, "version 3"},
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
  ASSERT_TRUE(EncodeRequest(1, HelloRequest{1, 1, ""}, Limits{}, &f).ok());
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
  for (uint8_t version : {0, 3, 255}) {
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
  EXPECT_EQ(EncodeRequest(1, HelloRequest{2, 1, ""}, Limits{}, &f).code(),
            StatusCode::kInvalidArgument);
  Limits bad;
  bad.max_key_bytes = 0;
  EXPECT_EQ(EncodeResponse(1, HelloResponse{1, bad, ""}, Limits{}, &f).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeResponse(1, StatsResponse{{{"", 1}}, {}}, Limits{}, &f).code(),
            StatusCode::kInvalidArgument);
  MexistRequest empty_key{"", {"a", ""}};
  EXPECT_EQ(EncodeRequest(1, empty_key, Limits{}, &f).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvport::protocol
