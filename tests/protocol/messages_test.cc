// Every message round-trips; hand-written bytes decode identically on every architecture.
#include "protocol/messages.h"

#include <gtest/gtest.h>

#include <string>

#include "protocol/frame.h"

namespace kvport::protocol {
namespace {

// Encodes a request, flattens it, splits it again and decodes it into `out`; `frame` keeps the
// bytes the decoded views point into.
template <typename Message>
void RequestRoundTrip(uint64_t id, const Message& in, Message* out, std::string* frame,
                      FrameView* view) {
  EncodedFrame encoded;
  ASSERT_TRUE(EncodeRequest(id, in, Limits{}, &encoded).ok());
  *frame = encoded.Flatten();
  ASSERT_TRUE(SplitFrame(*frame, Limits{}, view).ok());
  EXPECT_FALSE(view->header.is_response());
  EXPECT_EQ(view->header.request_id, id);
  ASSERT_TRUE(DecodeRequest(view->header, view->descriptor, Limits{}, out).ok());
}

template <typename Message>
void ResponseRoundTrip(uint64_t id, const Message& in, Message* out, std::string* frame,
                       FrameView* view) {
  EncodedFrame encoded;
  Status s = EncodeResponse(id, in, Limits{}, &encoded);
  ASSERT_TRUE(s.ok()) << s.ToString();
  *frame = encoded.Flatten();
  ASSERT_TRUE(SplitFrame(*frame, Limits{}, view).ok());
  EXPECT_TRUE(view->header.is_response());
  EXPECT_EQ(view->header.request_id, id);
  s = DecodeResponse(view->header, view->descriptor, Limits{}, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

TEST(MessagesTest, HelloRoundTripAndNegotiation) {
  std::string frame;
  FrameView view;
  HelloRequest req{1, 7, "client"}, req_out;
  RequestRoundTrip(1, req, &req_out, &frame, &view);
  EXPECT_EQ(req_out.min_version, 1);
  EXPECT_EQ(req_out.max_version, 7);
  EXPECT_EQ(req_out.client_name, "client");
  EXPECT_EQ(view.header.version, kHelloVersion);
  Result<uint8_t> v = NegotiateVersion(req_out);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, kMaxProtocolVersion);
  EXPECT_EQ(NegotiateVersion(HelloRequest{3, 4, ""}).status().code(), StatusCode::kNotSupported);
  // A client that speaks version 1 only gets version 1 from this build.
  Result<uint8_t> v1 = NegotiateVersion(HelloRequest{1, 1, ""});
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(*v1, 1);

  Limits announced;
  announced.max_value_bytes = 1 << 20;
  announced.max_batch_keys = 64;
  HelloResponse resp{1, announced, "kvport 0.1.0"}, resp_out;
  ResponseRoundTrip(1, resp, &resp_out, &frame, &view);
  EXPECT_EQ(resp_out.version, 1);
  EXPECT_EQ(resp_out.limits.max_value_bytes, 1u << 20);
  EXPECT_EQ(resp_out.limits.max_batch_keys, 64u);
  EXPECT_EQ(resp_out.limits.max_frame_bytes, announced.max_frame_bytes);
  EXPECT_EQ(resp_out.server_name, "kvport 0.1.0");
}

TEST(MessagesTest, PingAndStatsRoundTrip) {
  std::string frame;
  FrameView view;
  PingRequest ping;
  RequestRoundTrip(2, PingRequest{}, &ping, &frame, &view);
  EXPECT_EQ(view.header.descriptor_length, 0u);
  PingResponse pong;
  ResponseRoundTrip(2, PingResponse{}, &pong, &frame, &view);
  StatsRequest stats;
  RequestRoundTrip(3, StatsRequest{}, &stats, &frame, &view);

  StatsResponse in{{{"hits", 5}, {"used_bytes", 1ull << 40}}, {{"", 1, 2}, {"llm", 3, 4}}}, out;
  ResponseRoundTrip(3, in, &out, &frame, &view);
  ASSERT_EQ(out.counters.size(), 2u);
  EXPECT_EQ(out.counters[1].name, "used_bytes");
  EXPECT_EQ(out.counters[1].value, 1ull << 40);
  ASSERT_EQ(out.namespaces.size(), 2u);
  EXPECT_EQ(out.namespaces[1].ns, "llm");
  EXPECT_EQ(out.namespaces[1].objects, 3u);
  EXPECT_EQ(out.namespaces[1].bytes, 4u);
}

TEST(MessagesTest, MsetRoundTripKeepsPayloadsOutOfTheHead) {
  const std::string v1 = "first value", v2(1000, 'z');
  MsetRequest in;
  in.ns = "tenant";
  in.ttl_seconds = 600;
  in.items = {{"key-1", "meta-1", v1.size(), v1.data()},
              {"key-2", "", 0, nullptr},
              {"key-3", std::string_view("\0m", 2), v2.size(), v2.data()}};
  EncodedFrame encoded;
  ASSERT_TRUE(EncodeRequest(9, in, Limits{}, &encoded).ok());
  // The payload spans are the caller's buffers, in item order, zero-length values omitted.
  ASSERT_EQ(encoded.payloads.size(), 2u);
  EXPECT_EQ(encoded.payloads[0].data, v1.data());
  EXPECT_EQ(encoded.payloads[1].data, v2.data());
  EXPECT_EQ(encoded.payload_length(), v1.size() + v2.size());
  EXPECT_EQ(encoded.head.find(v2.substr(0, 100)), std::string::npos);

  const std::string frame = encoded.Flatten();
  FrameView view;
  ASSERT_TRUE(SplitFrame(frame, Limits{}, &view).ok());
  EXPECT_EQ(view.header.head_length(), encoded.head.size());
  EXPECT_EQ(view.header.payload_length, v1.size() + v2.size());
  EXPECT_EQ(view.payload, v1 + v2);
  MsetRequest out;
  ASSERT_TRUE(DecodeRequest(view.header, view.descriptor, Limits{}, &out).ok());
  EXPECT_EQ(out.ns, "tenant");
  EXPECT_EQ(out.ttl_seconds, 600u);
  ASSERT_EQ(out.items.size(), 3u);
  uint64_t sum = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out.items[i].key, in.items[i].key);
    EXPECT_EQ(out.items[i].meta, in.items[i].meta);
    EXPECT_EQ(out.items[i].value_length, in.items[i].value_length);
    EXPECT_EQ(out.items[i].value, nullptr);
    sum += out.items[i].value_length;
  }
  EXPECT_EQ(sum, view.header.payload_length);

  MsetResponse resp{{StatusCode::kOk, StatusCode::kNoSpace, StatusCode::kTooLarge}}, resp_out;
  std::string resp_frame;
  ResponseRoundTrip(9, resp, &resp_out, &resp_frame, &view);
  EXPECT_EQ(resp_out.statuses, resp.statuses);
  EXPECT_EQ(resp_out.overall(), BatchStatus::kPartial);
}

TEST(MessagesTest, MgetRoundTripCarriesOnlyHits) {
  MgetRequest req;
  req.ns = "ns";
  req.keys = {{"hit", kUnlimitedCapacity}, {"small", 8}, {"miss", 100}, {"empty", 0}};
  MgetRequest req_out;
  std::string frame;
  FrameView view;
  RequestRoundTrip(11, req, &req_out, &frame, &view);
  ASSERT_EQ(req_out.keys.size(), 4u);
  EXPECT_FALSE(req_out.meta_only);
  EXPECT_EQ(req_out.keys[1].key, "small");
  EXPECT_EQ(req_out.keys[1].buffer_capacity, 8u);
  EXPECT_EQ(req_out.keys[0].buffer_capacity, kUnlimitedCapacity);

  const std::string hit = "payload of the hit";
  MgetResponse resp;
  resp.results = {{StatusCode::kOk, "m0", hit.size(), hit.data()},
                  {StatusCode::kTooLarge, "m1", 4096, nullptr},
                  {StatusCode::kNotFound, "", 0, nullptr},
                  {StatusCode::kOk, "", 0, nullptr}};
  EncodedFrame encoded;
  ASSERT_TRUE(EncodeResponse(11, resp, Limits{}, &encoded).ok());
  ASSERT_EQ(encoded.payloads.size(), 1u);
  EXPECT_EQ(encoded.payload_length(), hit.size());
  frame = encoded.Flatten();
  ASSERT_TRUE(SplitFrame(frame, Limits{}, &view).ok());
  EXPECT_EQ(view.payload, hit);
  MgetResponse out;
  ASSERT_TRUE(DecodeResponse(view.header, view.descriptor, Limits{}, &out).ok());
  ASSERT_EQ(out.results.size(), 4u);
  EXPECT_TRUE(out.CarriesPayload(0));
  EXPECT_FALSE(out.CarriesPayload(1));
  EXPECT_FALSE(out.CarriesPayload(2));
  EXPECT_TRUE(out.CarriesPayload(3));
  EXPECT_EQ(out.results[1].status, StatusCode::kTooLarge);
  EXPECT_EQ(out.results[1].value_length, 4096u);
  EXPECT_EQ(out.results[1].meta, "m1");
  EXPECT_EQ(out.overall(), BatchStatus::kPartial);
  EXPECT_TRUE(CheckMgetResponse(req_out, out).ok());
}

TEST(MessagesTest, MgetMetaOnlyCarriesNoPayload) {
  MgetRequest req;
  req.meta_only = true;
  req.keys = {{"a", 0}};
  MgetRequest req_out;
  std::string frame;
  FrameView view;
  RequestRoundTrip(12, req, &req_out, &frame, &view);
  EXPECT_TRUE(view.header.meta_only());
  EXPECT_TRUE(req_out.meta_only);

  MgetResponse resp, out;
  resp.meta_only = true;
  resp.results = {{StatusCode::kOk, "meta", 1ull << 29, nullptr}};
  ResponseRoundTrip(12, resp, &out, &frame, &view);
  EXPECT_TRUE(out.meta_only);
  EXPECT_EQ(view.header.payload_length, 0u);
  EXPECT_FALSE(out.CarriesPayload(0));
  EXPECT_EQ(out.results[0].value_length, 1ull << 29);
  // buffer_capacity 0 is ignored for meta-only requests.
  EXPECT_TRUE(CheckMgetResponse(req_out, out).ok());
}

TEST(MessagesTest, CheckMgetResponseCatchesAServerThatOverflowsABuffer) {
  MgetRequest req;
  req.keys = {{"a", 4}, {"b", 4}};
  MgetResponse resp;
  resp.results = {{StatusCode::kOk, "", 4, nullptr}, {StatusCode::kOk, "", 5, nullptr}};
  Status s = CheckMgetResponse(req, resp);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("item 1"), std::string::npos) << s.ToString();
  resp.results.pop_back();
  EXPECT_EQ(CheckMgetResponse(req, resp).code(), StatusCode::kCorruption);  // count
  resp.results.push_back({StatusCode::kTooLarge, "", 5, nullptr});
  EXPECT_TRUE(CheckMgetResponse(req, resp).ok());
  resp.meta_only = true;
  EXPECT_EQ(CheckMgetResponse(req, resp).code(), StatusCode::kCorruption);  // flag
}

TEST(MessagesTest, MexistMdelListRoundTrip) {
  std::string frame;
  FrameView view;
  MexistRequest ex{"ns", {"a", "b"}}, ex_out;
  RequestRoundTrip(20, ex, &ex_out, &frame, &view);
  EXPECT_EQ(ex_out.ns, "ns");
  EXPECT_EQ(ex_out.keys, ex.keys);
  MexistResponse exr{{{StatusCode::kOk, 123}, {StatusCode::kNotFound, 0}}}, exr_out;
  ResponseRoundTrip(20, exr, &exr_out, &frame, &view);
  ASSERT_EQ(exr_out.results.size(), 2u);
  EXPECT_EQ(exr_out.results[0].value_length, 123u);
  EXPECT_EQ(exr_out.results[1].status, StatusCode::kNotFound);
  EXPECT_EQ(exr_out.overall(), BatchStatus::kPartial);

  MdelRequest del{"", {"x"}}, del_out;
  RequestRoundTrip(21, del, &del_out, &frame, &view);
  EXPECT_EQ(del_out.keys, del.keys);
  MdelResponse delr{{StatusCode::kNotFound}}, delr_out;
  ResponseRoundTrip(21, delr, &delr_out, &frame, &view);
  EXPECT_EQ(delr_out.statuses, delr.statuses);
  EXPECT_EQ(delr_out.overall(), BatchStatus::kFailed);

  ListRequest list{"ns", 0xDEADBEEFull, 4096}, list_out;
  RequestRoundTrip(22, list, &list_out, &frame, &view);
  EXPECT_EQ(list_out.cursor, 0xDEADBEEFull);
  EXPECT_EQ(list_out.max_keys, 4096u);
  ListResponse lr{0, {"k1", "k2"}}, lr_out;
  ResponseRoundTrip(22, lr, &lr_out, &frame, &view);
  EXPECT_EQ(lr_out.next_cursor, 0u);
  EXPECT_EQ(lr_out.keys, lr.keys);
}

TEST(MessagesTest, ErrorResponseRoundTripAndTruncatesLongMessages) {
  std::string frame;
  FrameView view;
  ErrorResponse in{StatusCode::kTooLarge, "MSET request: count 5000 exceeds max_batch_keys 4096"},
      out;
  ResponseRoundTrip(0, in, &out, &frame, &view);
  EXPECT_EQ(view.header.opcode, Opcode::kError);
  EXPECT_EQ(out.code, StatusCode::kTooLarge);
  EXPECT_EQ(out.message, in.message);
  const std::string long_message(5000, 'e');
  ResponseRoundTrip(0, ErrorResponse{StatusCode::kCorruption, long_message}, &out, &frame, &view);
  EXPECT_EQ(out.message.size(), kMaxErrorMessageBytes);
  EncodedFrame f;
  EXPECT_EQ(EncodeResponse(0, ErrorResponse{StatusCode::kOk, "x"}, Limits{}, &f).code(),
            StatusCode::kInvalidArgument);
}

TEST(MessagesTest, OverallStatus) {
  EXPECT_EQ(OverallStatus({}), BatchStatus::kOk);
  EXPECT_EQ(OverallStatus({StatusCode::kOk, StatusCode::kOk}), BatchStatus::kOk);
  EXPECT_EQ(OverallStatus({StatusCode::kOk, StatusCode::kNotFound}), BatchStatus::kPartial);
  EXPECT_EQ(OverallStatus({StatusCode::kNotFound, StatusCode::kNoSpace}), BatchStatus::kFailed);
}

TEST(MessagesTest, DecodeAnyRequestDispatchesByOpcode) {
  EncodedFrame f;
  ASSERT_TRUE(EncodeRequest(5, MdelRequest{"n", {"k"}}, Limits{}, &f).ok());
  const std::string frame = f.Flatten();
  FrameView view;
  ASSERT_TRUE(SplitFrame(frame, Limits{}, &view).ok());
  AnyRequest any;
  ASSERT_TRUE(DecodeAnyRequest(view.header, view.descriptor, Limits{}, &any).ok());
  ASSERT_TRUE(std::holds_alternative<MdelRequest>(any));
  EXPECT_EQ(std::get<MdelRequest>(any).keys[0], "k");
  // The wrong decoder for the frame is a caller bug, reported as InvalidArgument.
  MexistRequest wrong;
  EXPECT_EQ(DecodeRequest(view.header, view.descriptor, Limits{}, &wrong).code(),
            StatusCode::kInvalidArgument);
  MdelResponse wrong_direction;
  EXPECT_EQ(DecodeResponse(view.header, view.descriptor, Limits{}, &wrong_direction).code(),
            StatusCode::kInvalidArgument);
  AnyResponse any_response;
  EXPECT_EQ(DecodeAnyResponse(view.header, view.descriptor, Limits{}, &any_response).code(),
            StatusCode::kInvalidArgument);
}

// ---- Hand-written bytes: the wire format, independent of the host's byte order ----------

TEST(MessagesTest, AnyNamespaceRequestsRoundTripAtVersion2) {
  std::string frame;
  FrameView view;
  auto round_trip = [&](const auto& in, auto* out) {
    EncodedFrame encoded;
    Status s = EncodeRequest(21, in, Limits{}, &encoded, 2);
    ASSERT_TRUE(s.ok()) << s.ToString();
    frame = encoded.Flatten();
    ASSERT_TRUE(SplitFrame(frame, Limits{}, &view).ok());
    EXPECT_EQ(view.header.version, 2);
    EXPECT_TRUE(view.header.any_namespace());
    s = DecodeRequest(view.header, view.descriptor, Limits{}, out);
    ASSERT_TRUE(s.ok()) << s.ToString();
  };

  MgetRequest mget, mget_out;
  mget.any_namespace = true;
  mget.keys = {{"k1", 100}, {"k2", kUnlimitedCapacity}};
  round_trip(mget, &mget_out);
  EXPECT_TRUE(mget_out.any_namespace);
  EXPECT_FALSE(mget_out.meta_only);
  EXPECT_EQ(mget_out.ns, "");
  ASSERT_EQ(mget_out.keys.size(), 2u);
  EXPECT_EQ(mget_out.keys[0].key, "k1");
  EXPECT_EQ(mget_out.keys[0].buffer_capacity, 100u);
  mget.meta_only = true;
  round_trip(mget, &mget_out);
  EXPECT_TRUE(mget_out.any_namespace);
  EXPECT_TRUE(mget_out.meta_only);
  EXPECT_EQ(view.header.flags, kFlagAnyNamespace | kFlagMetaOnly);

  MexistRequest mexist{"", {"a", "b"}, true}, mexist_out;
  round_trip(mexist, &mexist_out);
  EXPECT_TRUE(mexist_out.any_namespace);
  EXPECT_EQ(mexist_out.keys, (std::vector<std::string_view>{"a", "b"}));
  MdelRequest mdel{"", {"c"}, true}, mdel_out;
  round_trip(mdel, &mdel_out);
  EXPECT_TRUE(mdel_out.any_namespace);
  EXPECT_EQ(mdel_out.keys, (std::vector<std::string_view>{"c"}));

  // Without the flag the request decodes as an exact one, in version 1 or 2 alike.
  MexistRequest exact{"", {"a"}}, exact_out;
  EncodedFrame encoded;
  ASSERT_TRUE(EncodeRequest(22, exact, Limits{}, &encoded, 2).ok());
  frame = encoded.Flatten();
  ASSERT_TRUE(SplitFrame(frame, Limits{}, &view).ok());
  EXPECT_EQ(view.header.flags, 0);
  ASSERT_TRUE(DecodeRequest(view.header, view.descriptor, Limits{}, &exact_out).ok());
  EXPECT_FALSE(exact_out.any_namespace);
}

TEST(MessagesTest, Version2FramesDifferFromVersion1OnlyInTheVersionByte) {
  const std::string v = "xyz";
  MsetRequest mset{"ns", 60, {{"a", "m", 3, v.data()}}};
  MgetResponse mget;
  mget.results = {{StatusCode::kOk, "M", 3, v.data()}, {StatusCode::kNotFound, "", 0, nullptr}};
  EncodedFrame one, two;
  ASSERT_TRUE(EncodeRequest(5, mset, Limits{}, &one, 1).ok());
  ASSERT_TRUE(EncodeRequest(5, mset, Limits{}, &two, 2).ok());
  std::string expected = one.Flatten();
  expected[4] = '\x02';
  EXPECT_EQ(two.Flatten(), expected);
  ASSERT_TRUE(EncodeResponse(5, mget, Limits{}, &one, 1).ok());
  ASSERT_TRUE(EncodeResponse(5, mget, Limits{}, &two, 2).ok());
  expected = one.Flatten();
  expected[4] = '\x02';
  EXPECT_EQ(two.Flatten(), expected);
  // HELLO and ERROR are version 1 frames whatever version the caller names.
  ASSERT_TRUE(EncodeResponse(5, HelloResponse{2, Limits{}, "s"}, Limits{}, &two, 2).ok());
  EXPECT_EQ(two.head[4], '\x01');
  ASSERT_TRUE(
      EncodeResponse(5, ErrorResponse{StatusCode::kCorruption, "e"}, Limits{}, &two, 2).ok());
  EXPECT_EQ(two.head[4], '\x01');
}

TEST(GoldenBytesTest, HelloRequest) {
  const std::string expected(
      "KVPT\x01\x01\x00\x00"              // magic, version 1, HELLO, flags 0
      "\x01\x00\x00\x00\x00\x00\x00\x00"  // request_id 1
      "\x04\x00\x00\x00\x00\x00\x00\x00"  // descriptor_length 4, reserved
      "\x00\x00\x00\x00\x00\x00\x00\x00"  // payload_length 0
      "\x01\x02\x01"                      // min_version 1, max_version 2, name length 1
      "c",
      36);
  EncodedFrame f;
  ASSERT_TRUE(EncodeRequest(1, HelloRequest{1, 2, "c"}, Limits{}, &f).ok());
  EXPECT_EQ(f.Flatten(), expected);

  FrameView view;
  ASSERT_TRUE(SplitFrame(expected, Limits{}, &view).ok());
  HelloRequest out;
  ASSERT_TRUE(DecodeRequest(view.header, view.descriptor, Limits{}, &out).ok());
  EXPECT_EQ(out.min_version, 1);
  EXPECT_EQ(out.max_version, 2);
  EXPECT_EQ(out.client_name, "c");
}

TEST(GoldenBytesTest, TwoKeyMsetRequest) {
  const std::string expected(
      "KVPT\x01\x03\x00\x00"                                      // magic, version 1, MSET, flags 0
      "\x08\x07\x06\x05\x04\x03\x02\x01"                          // request_id 0x0102030405060708
      "\x2B\x00\x00\x00\x00\x00\x00\x00"                          // descriptor_length 43, reserved
      "\x05\x00\x00\x00\x00\x00\x00\x00"                          // payload_length 5
      "\x02ns"                                                    // namespace "ns"
      "\x3C\x00\x00\x00"                                          // ttl_seconds 60
      "\x02\x00\x00\x00"                                          // count 2
      "\x01\x00\x01\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00"  // key 1, meta 1, value 3
      "a"
      "m"
      "\x02\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00"  // key 2, meta 0, value 2
      "bc"
      "xyzpq",  // payload: the two values back to back
      80);
  const std::string v1 = "xyz", v2 = "pq";
  MsetRequest in;
  in.ns = "ns";
  in.ttl_seconds = 60;
  in.items = {{"a", "m", 3, v1.data()}, {"bc", "", 2, v2.data()}};
  EncodedFrame f;
  ASSERT_TRUE(EncodeRequest(0x0102030405060708ull, in, Limits{}, &f).ok());
  EXPECT_EQ(f.head, expected.substr(0, 75));
  EXPECT_EQ(f.Flatten(), expected);

  FrameView view;
  ASSERT_TRUE(SplitFrame(expected, Limits{}, &view).ok());
  EXPECT_EQ(view.header.request_id, 0x0102030405060708ull);
  MsetRequest out;
  ASSERT_TRUE(DecodeRequest(view.header, view.descriptor, Limits{}, &out).ok());
  ASSERT_EQ(out.items.size(), 2u);
  EXPECT_EQ(out.ns, "ns");
  EXPECT_EQ(out.ttl_seconds, 60u);
  EXPECT_EQ(out.items[0].key, "a");
  EXPECT_EQ(out.items[0].meta, "m");
  EXPECT_EQ(out.items[0].value_length, 3u);
  EXPECT_EQ(out.items[1].key, "bc");
  EXPECT_EQ(out.items[1].meta, "");
  EXPECT_EQ(out.items[1].value_length, 2u);
  EXPECT_EQ(view.payload.substr(0, 3), "xyz");
  EXPECT_EQ(view.payload.substr(3), "pq");
}

TEST(GoldenBytesTest, MgetResponseWithHitAndMiss) {
  const std::string expected(
      "KVPT\x01\x04\x01\x00"                                  // MGET, flags: response
      "\x09\x00\x00\x00\x00\x00\x00\x00"                      // request_id 9
      "\x20\x00\x00\x00\x00\x00\x00\x00"                      // descriptor_length 32
      "\x02\x00\x00\x00\x00\x00\x00\x00"                      // payload_length 2
      "\x01"                                                  // overall: PARTIAL
      "\x02\x00\x00\x00"                                      // count 2
      "\x00\x01\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00"  // OK, meta 1, value 2
      "M"
      "\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"  // NotFound
      "hi",
      66);
  const std::string hit = "hi";
  MgetResponse in;
  in.results = {{StatusCode::kOk, "M", 2, hit.data()}, {StatusCode::kNotFound, "", 0, nullptr}};
  EncodedFrame f;
  ASSERT_TRUE(EncodeResponse(9, in, Limits{}, &f).ok());
  EXPECT_EQ(f.Flatten(), expected);
  FrameView view;
  ASSERT_TRUE(SplitFrame(expected, Limits{}, &view).ok());
  MgetResponse out;
  ASSERT_TRUE(DecodeResponse(view.header, view.descriptor, Limits{}, &out).ok());
  EXPECT_EQ(out.overall(), BatchStatus::kPartial);
  EXPECT_EQ(out.results[0].meta, "M");
  EXPECT_EQ(out.results[1].status, StatusCode::kNotFound);
}

// docs/protocol.md's version 2 example: an any-namespace MEXIST of "k1" and "b".
TEST(GoldenBytesTest, AnyNamespaceMexistRequestVersion2) {
  const std::string expected(
      "KVPT\x02\x05\x04\x00"              // magic, version 2, MEXIST, flags: ANY_NAMESPACE
      "\x0B\x00\x00\x00\x00\x00\x00\x00"  // request_id 11
      "\x0C\x00\x00\x00\x00\x00\x00\x00"  // descriptor_length 12, reserved
      "\x00\x00\x00\x00\x00\x00\x00\x00"  // payload_length 0
      "\x00"                              // namespace "" (it must be empty)
      "\x02\x00\x00\x00"                  // count 2
      "\x02\x00"
      "k1"  // key_len 2, "k1"
      "\x01\x00"
      "b",  // key_len 1, "b"
      44);
  MexistRequest in{"", {"k1", "b"}, /*any_namespace=*/true};
  EncodedFrame f;
  ASSERT_TRUE(EncodeRequest(11, in, Limits{}, &f, 2).ok());
  EXPECT_EQ(f.Flatten(), expected);

  FrameView view;
  ASSERT_TRUE(SplitFrame(expected, Limits{}, &view).ok());
  EXPECT_EQ(view.header.version, 2);
  EXPECT_EQ(view.header.flags, kFlagAnyNamespace);
  MexistRequest out;
  ASSERT_TRUE(DecodeRequest(view.header, view.descriptor, Limits{}, &out).ok());
  EXPECT_TRUE(out.any_namespace);
  EXPECT_EQ(out.ns, "");
  EXPECT_EQ(out.keys, (std::vector<std::string_view>{"k1", "b"}));
}

}  // namespace
}  // namespace kvport::protocol
