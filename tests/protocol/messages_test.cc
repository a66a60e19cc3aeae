// SPDX-License-Identifier: Apache-2.0
// Every message round-trips; hand-written bytes decode identically on every architecture.
#include "protocol/messages.h"

#include <gtest/gtest.h>

#include <string>

#include "protocol/frame.h"
#include "protocol/wire.h"

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
  HelloRequest req{1, 10, "client", ""}, req_out;
  RequestRoundTrip(1, req, &req_out, &frame, &view);
  EXPECT_EQ(req_out.min_version, 1);
  EXPECT_EQ(req_out.max_version, 10);
  EXPECT_EQ(req_out.client_name, "client");
  EXPECT_EQ(view.header.version, kHelloVersion);
  Result<uint8_t> v = NegotiateVersion(req_out);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, kMaxProtocolVersion);
  EXPECT_EQ(*v, 10);
  EXPECT_EQ(NegotiateVersion(HelloRequest{11, 12, "", ""}).status().code(),
            StatusCode::kNotSupported);
  // A version 9 client gets version 9: values without checksums, byte for byte as before.
  Result<uint8_t> v9 = NegotiateVersion(HelloRequest{1, 9, "", ""});
  ASSERT_TRUE(v9.ok());
  EXPECT_EQ(*v9, 9);
  // A version 8 client gets version 8 (its sessions are served; its UCX_ATTACH is not).
  Result<uint8_t> v8 = NegotiateVersion(HelloRequest{1, 8, "", ""});
  ASSERT_TRUE(v8.ok());
  EXPECT_EQ(*v8, 8);
  // A version 2 client gets version 2.
  Result<uint8_t> v2 = NegotiateVersion(HelloRequest{1, 2, "", ""});
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(*v2, 2);
  // A client that speaks version 1 only gets version 1 from this build.
  Result<uint8_t> v1 = NegotiateVersion(HelloRequest{1, 1, "", ""});
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(*v1, 1);

  Limits announced;
  announced.max_value_bytes = 1 << 20;
  announced.max_batch_keys = 64;
  HelloResponse resp{1, announced, "kvport 0.1.0", std::nullopt}, resp_out;
  ResponseRoundTrip(1, resp, &resp_out, &frame, &view);
  EXPECT_EQ(resp_out.version, 1);
  EXPECT_EQ(resp_out.limits.max_value_bytes, 1u << 20);
  EXPECT_EQ(resp_out.limits.max_batch_keys, 64u);
  EXPECT_EQ(resp_out.limits.max_frame_bytes, announced.max_frame_bytes);
  EXPECT_EQ(resp_out.server_name, "kvport 0.1.0");
}

// Version 5: a HELLO response ends with the token's default namespace (or says there is none);
// an older version cannot carry one, and its response is byte for byte what it was.
TEST(MessagesTest, HelloResponseCarriesTheDefaultNamespaceFromVersion5) {
  std::string frame;
  FrameView view;
  HelloResponse out;
  ResponseRoundTrip(1, HelloResponse{5, Limits{}, "s", "lmcache/prefill"}, &out, &frame, &view);
  ASSERT_TRUE(out.default_namespace.has_value());
  EXPECT_EQ(*out.default_namespace, "lmcache/prefill");
  // The default namespace "" is a namespace, not the absence of one.
  ResponseRoundTrip(1, HelloResponse{5, Limits{}, "s", ""}, &out, &frame, &view);
  ASSERT_TRUE(out.default_namespace.has_value());
  EXPECT_EQ(*out.default_namespace, "");
  ResponseRoundTrip(1, HelloResponse{5, Limits{}, "s", std::nullopt}, &out, &frame, &view);
  EXPECT_FALSE(out.default_namespace.has_value());
  const size_t v5_without = frame.size();
  ResponseRoundTrip(1, HelloResponse{4, Limits{}, "s", std::nullopt}, &out, &frame, &view);
  EXPECT_FALSE(out.default_namespace.has_value());
  EXPECT_EQ(frame.size() + 1, v5_without);  // version 4: no presence byte
  EncodedFrame f;
  EXPECT_EQ(EncodeResponse(1, HelloResponse{4, Limits{}, "s", "ns"}, Limits{}, &f).code(),
            StatusCode::kNotSupported);
  // A namespace longer than the announced limit is refused both ways.
  Limits narrow;
  narrow.max_namespace_bytes = 2;
  EXPECT_EQ(EncodeResponse(1, HelloResponse{5, narrow, "s", "abc"}, Limits{}, &f).code(),
            StatusCode::kTooLarge);
}

// Version 4: a HELLO request may end with a token; only a client offering version 4 may send
// one, and a decoder of such a client's HELLO reads it.
TEST(MessagesTest, HelloCarriesATokenFromVersion4) {
  std::string frame;
  FrameView view;
  HelloRequest with_token{1, kAccessVersion, "c", "s3cret-s3cret-s3cret"}, out;
  RequestRoundTrip(1, with_token, &out, &frame, &view);
  EXPECT_EQ(out.token, "s3cret-s3cret-s3cret");
  EXPECT_EQ(out.client_name, "c");
  HelloRequest without{1, kAccessVersion, "c", ""};
  RequestRoundTrip(1, without, &out, &frame, &view);
  EXPECT_TRUE(out.token.empty());

  EncodedFrame encoded;
  HelloRequest too_old{1, 3, "c", "s3cret-s3cret-s3cret"};
  EXPECT_EQ(EncodeRequest(1, too_old, Limits{}, &encoded).code(), StatusCode::kInvalidArgument);
  // A version 3 HELLO with bytes after the name is malformed, as it always was.
  ASSERT_TRUE(EncodeRequest(1, with_token, Limits{}, &encoded).ok());
  std::string bytes = encoded.Flatten();
  ASSERT_TRUE(SplitFrame(bytes, Limits{}, &view).ok());
  std::string descriptor(view.descriptor);
  descriptor[1] = 3;  // max_version 3
  EXPECT_EQ(DecodeRequest(view.header, descriptor, Limits{}, &out).code(), StatusCode::kCorruption);
}

TEST(MessagesTest, Version4StatsPagesAndSaysWhetherMoreFollow) {
  EncodedFrame encoded;
  StatsRequest page;
  page.from_start = false;
  page.after = "tenant-17";
  page.max_namespaces = 100;
  ASSERT_TRUE(EncodeRequest(5, page, Limits{}, &encoded, kAccessVersion).ok());
  std::string bytes = encoded.Flatten();
  FrameView view;
  ASSERT_TRUE(SplitFrame(bytes, Limits{}, &view).ok());
  StatsRequest page_out;
  ASSERT_TRUE(DecodeRequest(view.header, view.descriptor, Limits{}, &page_out).ok());
  EXPECT_FALSE(page_out.from_start);
  EXPECT_EQ(page_out.after, "tenant-17");
  EXPECT_EQ(page_out.max_namespaces, 100u);
  // Below version 4 a STATS request is empty: a page cannot be asked for.
  EXPECT_EQ(EncodeRequest(5, page, Limits{}, &encoded, kShmVersion).code(),
            StatusCode::kNotSupported);
  ASSERT_TRUE(EncodeRequest(5, StatsRequest{}, Limits{}, &encoded, kShmVersion).ok());
  EXPECT_EQ(encoded.head.size(), kFrameHeaderSize);

  StatsResponse in{{{"hits", 1}}, {{"a", 1, 2}}, /*more=*/true}, out;
  ASSERT_TRUE(EncodeResponse(5, in, Limits{}, &encoded, kAccessVersion).ok());
  bytes = encoded.Flatten();
  ASSERT_TRUE(SplitFrame(bytes, Limits{}, &view).ok());
  ASSERT_TRUE(DecodeResponse(view.header, view.descriptor, Limits{}, &out).ok());
  EXPECT_TRUE(out.more);
  ASSERT_EQ(out.namespaces.size(), 1u);
  EXPECT_EQ(EncodeResponse(5, in, Limits{}, &encoded, kShmVersion).code(),
            StatusCode::kNotSupported);
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

  StatsResponse in{{{"hits", 5}, {"used_bytes", 1ull << 40}}, {{"", 1, 2}, {"llm", 3, 4}}, false},
      out;
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
  ASSERT_TRUE(
      EncodeResponse(5, HelloResponse{2, Limits{}, "s", std::nullopt}, Limits{}, &two, 2).ok());
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
  ASSERT_TRUE(EncodeRequest(1, HelloRequest{1, 2, "c", ""}, Limits{}, &f).ok());
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

// ---- Version 3: NODE_INFO and the shared-memory opcodes ----------------------------------

// The version 3 encoders default to kShmVersion, so the round-trip helpers above apply as they
// are; every frame is checked to be a version 3 frame without payload.
void ExpectVersion3WithoutPayload(const FrameView& view) {
  EXPECT_EQ(view.header.version, kShmVersion);
  EXPECT_EQ(view.header.payload_length, 0u);
  EXPECT_TRUE(view.payload.empty());
  EXPECT_FALSE(view.header.meta_only());
}

TEST(ShmMessagesTest, NodeInfoRoundTrip) {
  std::string frame;
  FrameView view;
  NodeInfoRequest req;
  RequestRoundTrip(40, NodeInfoRequest{}, &req, &frame, &view);
  ExpectVersion3WithoutPayload(view);
  EXPECT_EQ(view.header.opcode, Opcode::kNodeInfo);
  EXPECT_EQ(view.header.descriptor_length, 0u);

  const std::string host(255, 'h'), path(kMaxUnixPathBytes, 'p');
  NodeInfoResponse in{~0ull, kOfferSharedMemory | 0x40u, host, path}, out;
  ResponseRoundTrip(40, in, &out, &frame, &view);
  ExpectVersion3WithoutPayload(view);
  EXPECT_EQ(out.node_id, ~0ull);
  EXPECT_EQ(out.offers, kOfferSharedMemory | 0x40u);  // unknown offer bits pass through
  EXPECT_EQ(out.host_id, host);
  EXPECT_EQ(out.unix_path, path);
  // A node without a Unix socket: nothing offered, empty strings.
  ResponseRoundTrip(41, NodeInfoResponse{5, 0, "", ""}, &out, &frame, &view);
  EXPECT_EQ(out.node_id, 5u);
  EXPECT_EQ(out.offers, 0u);
  EXPECT_TRUE(out.host_id.empty());
  EXPECT_TRUE(out.unix_path.empty());
}

TEST(ShmMessagesTest, ShmAttachRoundTrip) {
  std::string frame;
  FrameView view;
  ShmAttachRequest req;
  RequestRoundTrip(42, ShmAttachRequest{}, &req, &frame, &view);
  ExpectVersion3WithoutPayload(view);
  EXPECT_EQ(view.header.descriptor_length, 0u);

  ShmAttachResponse granted{StatusCode::kOk, 64ull << 30, ""}, out;
  ResponseRoundTrip(42, granted, &out, &frame, &view);
  ExpectVersion3WithoutPayload(view);
  EXPECT_EQ(out.status, StatusCode::kOk);
  EXPECT_EQ(out.arena_bytes, 64ull << 30);
  EXPECT_TRUE(out.reason.empty());
  ShmAttachResponse refused{StatusCode::kNotSupported, 0, "not a Unix-socket session"};
  ResponseRoundTrip(43, refused, &out, &frame, &view);
  EXPECT_EQ(out.status, StatusCode::kNotSupported);
  EXPECT_EQ(out.arena_bytes, 0u);
  EXPECT_EQ(out.reason, "not a Unix-socket session");
  // Long reasons are truncated, as ERROR messages are.
  const std::string long_reason(3000, 'r');
  ResponseRoundTrip(44, ShmAttachResponse{StatusCode::kUnavailable, 0, long_reason}, &out, &frame,
                    &view);
  EXPECT_EQ(out.reason.size(), kMaxErrorMessageBytes);
}

TEST(ShmMessagesTest, ShmAttachResponseNamesTheLeaseWordFromVersion6On) {
  ShmAttachResponse granted{StatusCode::kOk, 1ull << 30, ""};
  granted.lease_word_offset = 8 * 77;
  granted.lease_generation = 12345;
  std::string frame;
  FrameView view;
  ShmAttachResponse out;
  EncodedFrame v6;
  ASSERT_TRUE(EncodeResponse(7, granted, Limits{}, &v6, kLeaseWordVersion).ok());
  frame = v6.Flatten();
  ASSERT_TRUE(SplitFrame(frame, Limits{}, &view).ok());
  EXPECT_EQ(view.header.version, kLeaseWordVersion);
  ASSERT_TRUE(DecodeResponse(view.header, view.descriptor, Limits{}, &out).ok());
  EXPECT_EQ(out.lease_word_offset, 8u * 77);
  EXPECT_EQ(out.lease_generation, 12345u);
  EXPECT_EQ(view.descriptor.size(), 1u + 3 * 8 + 2);

  // Version 5 is byte for byte as before: no lease word on the wire, none decoded.
  EncodedFrame v5;
  ASSERT_TRUE(EncodeResponse(7, granted, Limits{}, &v5, kDefaultNamespaceVersion).ok());
  frame = v5.Flatten();
  ASSERT_TRUE(SplitFrame(frame, Limits{}, &view).ok());
  EXPECT_EQ(view.descriptor.size(), 1u + 8 + 2);
  ASSERT_TRUE(DecodeResponse(view.header, view.descriptor, Limits{}, &out).ok());
  EXPECT_EQ(out.lease_word_offset, 0u);
  EXPECT_EQ(out.lease_generation, 0u);

  // A word that is not 8-byte aligned, or one with a refusal, is refused both ways.
  EncodedFrame bad;
  granted.lease_word_offset = 12;
  EXPECT_EQ(EncodeResponse(7, granted, Limits{}, &bad, kLeaseWordVersion).code(),
            StatusCode::kInvalidArgument);
  ShmAttachResponse refused{StatusCode::kNotSupported, 0, "no"};
  refused.lease_generation = 1;
  EXPECT_EQ(EncodeResponse(7, refused, Limits{}, &bad, kLeaseWordVersion).code(),
            StatusCode::kInvalidArgument);
  granted.lease_word_offset = 16;
  ASSERT_TRUE(EncodeResponse(7, granted, Limits{}, &bad, kLeaseWordVersion).ok());
  frame = bad.Flatten();
  frame[kFrameHeaderSize + 1 + 8] = 13;  // the offset's low byte: 16 -> 13
  ASSERT_TRUE(SplitFrame(frame, Limits{}, &view).ok());
  EXPECT_EQ(DecodeResponse(view.header, view.descriptor, Limits{}, &out).code(),
            StatusCode::kCorruption);
}

TEST(ShmMessagesTest, ArenaReserveRoundTripHasNoPayload) {
  ArenaReserveRequest in;
  in.ns = "tenant";
  in.ttl_seconds = 600;
  const std::string ignored = "value pointers are ignored";
  in.items = {{"key-1", "meta-1", 1ull << 20, ignored.data()},
              {"key-2", "", 0, nullptr},
              {"key-3", std::string_view("\0m", 2), 1ull << 30, nullptr}};
  ArenaReserveRequest out;
  std::string frame;
  FrameView view;
  RequestRoundTrip(45, in, &out, &frame, &view);
  ExpectVersion3WithoutPayload(view);
  EXPECT_EQ(out.ns, "tenant");
  EXPECT_EQ(out.ttl_seconds, 600u);
  ASSERT_EQ(out.items.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out.items[i].key, in.items[i].key);
    EXPECT_EQ(out.items[i].meta, in.items[i].meta);
    EXPECT_EQ(out.items[i].value_length, in.items[i].value_length);
    EXPECT_EQ(out.items[i].value, nullptr);
  }

  ArenaReserveResponse resp{
      77, {{StatusCode::kOk, 4096}, {StatusCode::kNoSpace, 0}, {StatusCode::kOk, 0}}},
      resp_out;
  ResponseRoundTrip(45, resp, &resp_out, &frame, &view);
  ExpectVersion3WithoutPayload(view);
  EXPECT_EQ(resp_out.reservation_id, 77u);
  ASSERT_EQ(resp_out.items.size(), 3u);
  EXPECT_EQ(resp_out.items[0].offset, 4096u);
  EXPECT_EQ(resp_out.items[1].status, StatusCode::kNoSpace);
  EXPECT_EQ(resp_out.items[2].offset, 0u);
  EXPECT_EQ(resp_out.overall(), BatchStatus::kPartial);
  EXPECT_TRUE(CheckArenaReserveResponse(out, resp_out).ok());
  // Nothing reserved: no reservation id.
  ResponseRoundTrip(46, ArenaReserveResponse{0, {{StatusCode::kTooLarge, 0}}}, &resp_out, &frame,
                    &view);
  EXPECT_EQ(resp_out.reservation_id, 0u);
  EXPECT_EQ(resp_out.overall(), BatchStatus::kFailed);
}

TEST(ShmMessagesTest, ArenaCommitRoundTrip) {
  std::string frame;
  FrameView view;
  ArenaCommitRequest in{0xABCDEF0123456789ull, {1, 0, 1, 1}, {}}, out;
  RequestRoundTrip(47, in, &out, &frame, &view);
  ExpectVersion3WithoutPayload(view);
  EXPECT_EQ(out.reservation_id, in.reservation_id);
  EXPECT_EQ(out.commit, in.commit);

  ArenaCommitResponse resp{
      {StatusCode::kOk, StatusCode::kAborted, StatusCode::kOk, StatusCode::kOk}},
      resp_out;
  ResponseRoundTrip(47, resp, &resp_out, &frame, &view);
  ExpectVersion3WithoutPayload(view);
  EXPECT_EQ(resp_out.statuses, resp.statuses);
  EXPECT_EQ(resp_out.overall(), BatchStatus::kPartial);
}

TEST(ShmMessagesTest, ArenaGetRoundTripAnswersWithOffsets) {
  ArenaGetRequest req;
  req.ns = "ns";
  req.keys = {{"hit", kUnlimitedCapacity}, {"small", 8}, {"miss", 100}, {"empty", 0}};
  ArenaGetRequest req_out;
  std::string frame;
  FrameView view;
  RequestRoundTrip(48, req, &req_out, &frame, &view);
  ExpectVersion3WithoutPayload(view);
  EXPECT_EQ(view.header.flags, 0);
  EXPECT_FALSE(req_out.any_namespace);
  EXPECT_EQ(req_out.ns, "ns");
  ASSERT_EQ(req_out.keys.size(), 4u);
  EXPECT_EQ(req_out.keys[1].key, "small");
  EXPECT_EQ(req_out.keys[1].buffer_capacity, 8u);

  ArenaGetResponse resp;
  resp.lease_id = 99;
  resp.results = {{StatusCode::kOk, "m0", 1ull << 20, 1ull << 34},
                  {StatusCode::kTooLarge, "m1", 4096, 0},
                  {StatusCode::kNotFound, "", 0, 0},
                  {StatusCode::kOk, "", 0, 12345}};
  ArenaGetResponse out;
  ResponseRoundTrip(48, resp, &out, &frame, &view);
  ExpectVersion3WithoutPayload(view);
  EXPECT_EQ(out.lease_id, 99u);
  ASSERT_EQ(out.results.size(), 4u);
  EXPECT_EQ(out.results[0].meta, "m0");
  EXPECT_EQ(out.results[0].value_length, 1ull << 20);
  EXPECT_EQ(out.results[0].offset, 1ull << 34);
  EXPECT_EQ(out.results[1].status, StatusCode::kTooLarge);
  EXPECT_EQ(out.results[1].value_length, 4096u);
  EXPECT_EQ(out.results[1].meta, "m1");
  EXPECT_EQ(out.results[3].offset, 12345u);
  EXPECT_EQ(out.overall(), BatchStatus::kPartial);
  EXPECT_TRUE(CheckArenaGetResponse(req_out, out).ok());
  EXPECT_TRUE(CheckArenaGetResponse(req_out, out, (1ull << 34) + (1ull << 20)).ok());
  EXPECT_EQ(CheckArenaGetResponse(req_out, out, (1ull << 34) + (1ull << 20) - 1).code(),
            StatusCode::kCorruption);

  // Any-namespace, as for MGET.
  ArenaGetRequest any;
  any.any_namespace = true;
  any.keys = {{"k", 10}};
  RequestRoundTrip(49, any, &req_out, &frame, &view);
  EXPECT_EQ(view.header.flags, kFlagAnyNamespace);
  EXPECT_TRUE(req_out.any_namespace);
  EXPECT_EQ(req_out.ns, "");
}

TEST(ShmMessagesTest, ArenaReleaseRoundTrip) {
  std::string frame;
  FrameView view;
  ArenaReleaseRequest in{{1, 2, ~0ull}}, out;
  RequestRoundTrip(50, in, &out, &frame, &view);
  ExpectVersion3WithoutPayload(view);
  EXPECT_EQ(out.lease_ids, in.lease_ids);
  ArenaReleaseResponse resp{2}, resp_out;
  ResponseRoundTrip(50, resp, &resp_out, &frame, &view);
  ExpectVersion3WithoutPayload(view);
  EXPECT_EQ(resp_out.released, 2u);
}

TEST(ShmMessagesTest, CheckArenaGetResponseCatchesANodeThatBreaksTheRequest) {
  ArenaGetRequest req;
  req.keys = {{"a", 4}, {"b", 4}};
  ArenaGetResponse resp;
  resp.lease_id = 1;
  resp.results = {{StatusCode::kOk, "", 4, 0}, {StatusCode::kOk, "", 5, 100}};
  Status s = CheckArenaGetResponse(req, resp);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("item 1: value_length 5 exceeds the buffer_capacity 4"),
            std::string::npos)
      << s.ToString();
  resp.results.pop_back();
  EXPECT_EQ(CheckArenaGetResponse(req, resp).code(), StatusCode::kCorruption);  // count
  resp.results.push_back({StatusCode::kTooLarge, "", 5, 0});  // not a hit: no capacity rule
  EXPECT_TRUE(CheckArenaGetResponse(req, resp).ok());
  // Offsets past the arena (and ones whose sum overflows) are caught given its size.
  resp.results[0].offset = 100;
  EXPECT_TRUE(CheckArenaGetResponse(req, resp, 104).ok());
  s = CheckArenaGetResponse(req, resp, 103);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("overrun the arena"), std::string::npos) << s.ToString();
  resp.results[0].offset = ~0ull - 1;
  EXPECT_EQ(CheckArenaGetResponse(req, resp, ~0ull).code(), StatusCode::kCorruption);

  ArenaReserveRequest reserve;
  reserve.items = {{"a", "", 10, nullptr}, {"b", "", 10, nullptr}};
  ArenaReserveResponse reserved{3, {{StatusCode::kOk, 90}, {StatusCode::kNoSpace, 0}}};
  EXPECT_TRUE(CheckArenaReserveResponse(reserve, reserved, 100).ok());
  EXPECT_EQ(CheckArenaReserveResponse(reserve, reserved, 99).code(), StatusCode::kCorruption);
  reserved.items.pop_back();
  EXPECT_EQ(CheckArenaReserveResponse(reserve, reserved).code(), StatusCode::kCorruption);
}

// ARENA_RESERVE and ARENA_GET requests reuse the MSET and MGET request descriptors byte for byte,
// ARENA_COMMIT responses the MSET response layout; version 3 frames of older opcodes differ from
// version 2 only in the version byte.
TEST(ShmMessagesTest, SharedLayoutsAreByteIdentical) {
  const std::string v1 = "xyz";
  MsetRequest mset{"ns", 60, {{"a", "m", 3, v1.data()}, {"bc", "", 0, nullptr}}};
  ArenaReserveRequest reserve{"ns", 60, {{"a", "m", 3, nullptr}, {"bc", "", 0, nullptr}}};
  EncodedFrame a, b;
  ASSERT_TRUE(EncodeRequest(1, mset, Limits{}, &a, 3).ok());
  ASSERT_TRUE(EncodeRequest(1, reserve, Limits{}, &b, 3).ok());
  EXPECT_EQ(a.head.substr(kFrameHeaderSize), b.head.substr(kFrameHeaderSize));
  EXPECT_TRUE(b.payloads.empty());

  MgetRequest mget;
  mget.ns = "n";
  mget.keys = {{"k1", 7}, {"k2", kUnlimitedCapacity}};
  ArenaGetRequest get{"n", mget.keys};
  ASSERT_TRUE(EncodeRequest(1, mget, Limits{}, &a, 3).ok());
  ASSERT_TRUE(EncodeRequest(1, get, Limits{}, &b, 3).ok());
  EXPECT_EQ(a.head.substr(kFrameHeaderSize), b.head.substr(kFrameHeaderSize));

  const std::vector<StatusCode> statuses = {StatusCode::kOk, StatusCode::kAborted};
  ASSERT_TRUE(EncodeResponse(1, MsetResponse{statuses}, Limits{}, &a, 3).ok());
  ASSERT_TRUE(EncodeResponse(1, ArenaCommitResponse{statuses}, Limits{}, &b, 3).ok());
  EXPECT_EQ(a.head.substr(kFrameHeaderSize), b.head.substr(kFrameHeaderSize));

  EncodedFrame two, three;
  ASSERT_TRUE(EncodeRequest(5, mset, Limits{}, &two, 2).ok());
  ASSERT_TRUE(EncodeRequest(5, mset, Limits{}, &three, 3).ok());
  std::string expected = two.Flatten();
  expected[4] = '\x03';
  EXPECT_EQ(three.Flatten(), expected);
}

// docs/protocol.md's version 3 example: an ARENA_GET response with a hit and a miss.
TEST(GoldenBytesTest, ArenaGetResponseWithHitAndMiss) {
  const std::string expected(
      "KVPT\x03\x0D\x01\x00"               // magic, version 3, ARENA_GET, flags: response
      "\x0C\x00\x00\x00\x00\x00\x00\x00"   // request_id 12
      "\x38\x00\x00\x00\x00\x00\x00\x00"   // descriptor_length 56, reserved
      "\x00\x00\x00\x00\x00\x00\x00\x00"   // payload_length 0
      "\x01"                               // overall: PARTIAL
      "\x07\x00\x00\x00\x00\x00\x00\x00"   // lease_id 7
      "\x02\x00\x00\x00"                   // count 2
      "\x00\x01\x00\x00\x00"               // OK, meta_len 1
      "\x00\x10\x00\x00\x00\x00\x00\x00"   // value_len 4096
      "\x00\x00\x20\x00\x00\x00\x00\x00"   // offset 0x200000
      "M"                                  // meta
      "\x02\x00\x00\x00\x00"               // NotFound, meta_len 0
      "\x00\x00\x00\x00\x00\x00\x00\x00"   // value_len 0
      "\x00\x00\x00\x00\x00\x00\x00\x00",  // offset 0
      88);
  ArenaGetResponse in{7,
                      {{StatusCode::kOk, "M", 4096, 0x200000}, {StatusCode::kNotFound, "", 0, 0}}};
  EncodedFrame f;
  ASSERT_TRUE(EncodeResponse(12, in, Limits{}, &f, 3).ok());
  EXPECT_EQ(f.Flatten(), expected);
  FrameView view;
  ASSERT_TRUE(SplitFrame(expected, Limits{}, &view).ok());
  ArenaGetResponse out;
  ASSERT_TRUE(DecodeResponse(view.header, view.descriptor, Limits{}, &out).ok());
  EXPECT_EQ(out.lease_id, 7u);
  EXPECT_EQ(out.results[0].offset, 0x200000u);
  EXPECT_EQ(out.results[0].meta, "M");
  EXPECT_EQ(out.results[1].status, StatusCode::kNotFound);
}

TEST(GoldenBytesTest, NodeInfoResponse) {
  const std::string expected(
      "KVPT\x03\x09\x01\x00"              // magic, version 3, NODE_INFO, flags: response
      "\x01\x00\x00\x00\x00\x00\x00\x00"  // request_id 1
      "\x13\x00\x00\x00\x00\x00\x00\x00"  // descriptor_length 19, reserved
      "\x00\x00\x00\x00\x00\x00\x00\x00"  // payload_length 0
      "\x08\x07\x06\x05\x04\x03\x02\x01"  // node_id 0x0102030405060708
      "\x01\x00\x00\x00"                  // offers: SHARED_MEMORY
      "\x02"
      "hb"  // host_id "hb"
      "\x02\x00"
      "/s",  // unix_path "/s"
      51);
  NodeInfoResponse in{0x0102030405060708ull, kOfferSharedMemory, "hb", "/s"};
  EncodedFrame f;
  ASSERT_TRUE(EncodeResponse(1, in, Limits{}, &f, 3).ok());
  EXPECT_EQ(f.Flatten(), expected);
}

// ---- Version 9: UCX_ATTACH and the messages over UCX ---------------------------------------

TEST(UcxMessagesTest, UcxAttachRoundTrip) {
  std::string frame;
  FrameView view;
  UcxAttachRequest req;
  RequestRoundTrip(50, UcxAttachRequest{}, &req, &frame, &view);  // kUcxVersion by default
  EXPECT_EQ(view.header.version, kUcxVersion);
  EXPECT_EQ(view.header.opcode, Opcode::kUcxAttach);
  EXPECT_EQ(view.header.descriptor_length, 0u);

  const std::string key(kUcxSessionKeyBytes, '\xA5');
  UcxAttachResponse granted{StatusCode::kOk, 65535, key, ~0ull, ""}, out;
  ResponseRoundTrip(50, granted, &out, &frame, &view);
  EXPECT_EQ(view.header.version, kUcxVersion);
  EXPECT_EQ(view.header.payload_length, 0u);
  EXPECT_EQ(view.descriptor.size(), 1u + 2 + 1 + 16 + 8 + 2);
  EXPECT_EQ(out.status, StatusCode::kOk);
  EXPECT_EQ(out.ucx_port, 65535);
  EXPECT_EQ(out.session_key, key);
  EXPECT_EQ(out.arena_bytes, ~0ull);
  EXPECT_TRUE(out.reason.empty());

  UcxAttachResponse refused{StatusCode::kNotSupported, 0, "", 0, "this node offers no UCX"};
  ResponseRoundTrip(51, refused, &out, &frame, &view);
  EXPECT_EQ(view.descriptor.size(), 1u + 2 + 1 + 8 + 2 + refused.reason.size());
  EXPECT_EQ(out.status, StatusCode::kNotSupported);
  EXPECT_EQ(out.ucx_port, 0);
  EXPECT_TRUE(out.session_key.empty());
  EXPECT_EQ(out.arena_bytes, 0u);
  EXPECT_EQ(out.reason, "this node offers no UCX");
  // Long reasons are truncated, as ERROR messages are.
  const std::string long_reason(3000, 'r');
  ResponseRoundTrip(52, UcxAttachResponse{StatusCode::kUnavailable, 0, "", 0, long_reason}, &out,
                    &frame, &view);
  EXPECT_EQ(out.reason.size(), kMaxErrorMessageBytes);
}

TEST(UcxMessagesTest, PutGetDoneRoundTrip) {
  const std::string key = "0123456789abcdef";
  ASSERT_EQ(key.size(), kUcxSessionKeyBytes);
  for (uint64_t v : {0ull, 1ull, 0x0102030405060708ull, ~0ull}) {
    const std::string put = EncodeUcxPut({key, v, ~v});
    ASSERT_EQ(put.size(), kUcxSessionKeyBytes + 16);
    UcxPut put_out;
    ASSERT_TRUE(DecodeUcxPut(put, &put_out).ok());
    EXPECT_EQ(put_out.session_key, key);
    EXPECT_EQ(put_out.offset, v);
    EXPECT_EQ(put_out.token, ~v);
    EXPECT_EQ(EncodeUcxPut(put_out), put);

    const std::string get = EncodeUcxGet({key, v, v ^ 0xFF, ~v});
    ASSERT_EQ(get.size(), kUcxSessionKeyBytes + 24);
    UcxGet get_out;
    ASSERT_TRUE(DecodeUcxGet(get, &get_out).ok());
    EXPECT_EQ(get_out.session_key, key);
    EXPECT_EQ(get_out.offset, v);
    EXPECT_EQ(get_out.bytes, v ^ 0xFF);
    EXPECT_EQ(get_out.token, ~v);
    EXPECT_EQ(EncodeUcxGet(get_out), get);
  }
  // Every status code the table has rides in an answer.
  for (int code = 0; code <= static_cast<int>(StatusCode::kPermissionDenied); ++code) {
    const UcxDone in{0x1122334455667788ull + code, static_cast<StatusCode>(code)};
    const std::string done = EncodeUcxDone(in);
    ASSERT_EQ(done.size(), 9u);
    UcxDone out;
    ASSERT_TRUE(DecodeUcxDone(done, &out).ok()) << code;
    EXPECT_EQ(out.token, in.token);
    EXPECT_EQ(out.status, in.status);
    EXPECT_EQ(EncodeUcxDone(out), done);
  }
}

// The fixed layouts, byte for byte (little-endian).
TEST(UcxMessagesTest, GoldenHeaders) {
  const std::string key = "0123456789abcdef";
  EXPECT_EQ(EncodeUcxPut({key, 0x0102030405060708ull, 0x1112131415161718ull}),
            std::string("0123456789abcdef"
                        "\x08\x07\x06\x05\x04\x03\x02\x01"   // offset
                        "\x18\x17\x16\x15\x14\x13\x12\x11",  // token
                        32));
  EXPECT_EQ(
      EncodeUcxGet({key, 0x0102030405060708ull, 0x2122232425262728ull, 0x1112131415161718ull}),
      std::string("0123456789abcdef"
                  "\x08\x07\x06\x05\x04\x03\x02\x01"   // offset
                  "\x28\x27\x26\x25\x24\x23\x22\x21"   // bytes
                  "\x18\x17\x16\x15\x14\x13\x12\x11",  // token
                  40));
  EXPECT_EQ(EncodeUcxDone({0x1112131415161718ull, StatusCode::kPermissionDenied}),
            std::string("\x18\x17\x16\x15\x14\x13\x12\x11"  // token
                        "\x0D",                             // status: PermissionDenied
                        9));
  EXPECT_EQ(static_cast<unsigned>(UcxMessage::kPut), 1u);
  EXPECT_EQ(static_cast<unsigned>(UcxMessage::kPutDone), 2u);
  EXPECT_EQ(static_cast<unsigned>(UcxMessage::kGet), 3u);
  EXPECT_EQ(static_cast<unsigned>(UcxMessage::kGetDone), 4u);
}

// The encoders write exactly kUcxSessionKeyBytes of key whatever they are given: a short key is
// padded with zero bytes (the node knows no such key), a long one cut; the layout never shifts.
TEST(UcxMessagesTest, KeysOfTheWrongSizeKeepTheLayout) {
  const std::string put = EncodeUcxPut({"short", 7, 9});
  ASSERT_EQ(put.size(), 32u);
  EXPECT_EQ(put.substr(0, 16), std::string("short") + std::string(11, '\0'));
  UcxPut put_out;
  ASSERT_TRUE(DecodeUcxPut(put, &put_out).ok());
  EXPECT_EQ(put_out.offset, 7u);
  EXPECT_EQ(put_out.token, 9u);

  const std::string get = EncodeUcxGet({"0123456789abcdefXYZ", 7, 8, 9});
  ASSERT_EQ(get.size(), 40u);
  UcxGet get_out;
  ASSERT_TRUE(DecodeUcxGet(get, &get_out).ok());
  EXPECT_EQ(get_out.session_key, "0123456789abcdef");
  EXPECT_EQ(get_out.offset, 7u);
  EXPECT_EQ(get_out.bytes, 8u);
  EXPECT_EQ(get_out.token, 9u);
}

// docs/protocol.md's version 9 UCX_ATTACH response.
TEST(GoldenBytesTest, UcxAttachResponse) {
  const std::string expected(
      "KVPT\x09\x10\x01\x00"              // magic, version 9, UCX_ATTACH, flags: response
      "\x01\x00\x00\x00\x00\x00\x00\x00"  // request_id 1
      "\x1E\x00\x00\x00\x00\x00\x00\x00"  // descriptor_length 30, reserved
      "\x00\x00\x00\x00\x00\x00\x00\x00"  // payload_length 0
      "\x00"                              // status OK
      "\xBB\x9C"                          // ucx_port 40123
      "\x10"                              // session_key_length 16
      "0123456789abcdef"                  // session_key
      "\x00\x00\x00\x40\x00\x00\x00\x00"  // arena_bytes 1 GiB
      "\x00\x00",                         // reason_length 0
      62);
  UcxAttachResponse in{StatusCode::kOk, 40123, "0123456789abcdef", 1ull << 30, ""};
  EncodedFrame f;
  ASSERT_TRUE(EncodeResponse(1, in, Limits{}, &f).ok());
  EXPECT_EQ(f.Flatten(), expected);
}

// ---- Version 10: values carry their checksums ----------------------------------------------

constexpr uint64_t kSumA = 0x0123456789ABCDEFull;
constexpr uint64_t kSumB = 0xFEDCBA9876543210ull;

std::string Le64(uint64_t v) {
  std::string s(8, '\0');
  StoreLE64(s.data(), v);
  return s;
}

// The flattened frame of `m` as a request (response) of `version`.
template <typename Message>
std::string RequestBytes(const Message& m, uint8_t version) {
  EncodedFrame f;
  Status s = EncodeRequest(1, m, Limits{}, &f, version);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return f.Flatten();
}
template <typename Message>
std::string ResponseBytes(const Message& m, uint8_t version) {
  EncodedFrame f;
  Status s = EncodeResponse(1, m, Limits{}, &f, version);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return f.Flatten();
}

// Decodes a whole frame into `out` (which may hold an earlier decode: decoders overwrite it).
template <typename Message>
Status DecodeFrame(std::string_view frame, Message* out) {
  FrameView view;
  KVPORT_RETURN_IF_ERROR(SplitFrame(frame, Limits{}, &view));
  if constexpr (requires { DecodeRequest(view.header, view.descriptor, Limits{}, out); })
    return DecodeRequest(view.header, view.descriptor, Limits{}, out);
  else
    return DecodeResponse(view.header, view.descriptor, Limits{}, out);
}

// `frame` with its version byte set to `version`.
std::string WithVersion(std::string frame, uint8_t version) {
  frame[4] = static_cast<char>(version);
  return frame;
}

TEST(ChecksumMessagesTest, MsetItemsCarryTheirChecksumFromVersion10) {
  const std::string v1 = "xyz", v2 = "pq";
  MsetRequest in{"ns", 60, {{"a", "m", 3, v1.data(), kSumA}, {"bc", "", 2, v2.data(), 0}}};
  MsetRequest plain = in;
  for (MsetItem& item : plain.items)
    item.checksum = 0;
  // Below version 10 the checksums are not on the wire: the version 9 frame is the one a caller
  // without checksums sends, and the version 1 frame but for its version byte.
  const std::string v9 = RequestBytes(in, kChecksumVersion - 1);
  EXPECT_EQ(v9, RequestBytes(plain, kChecksumVersion - 1));
  EXPECT_EQ(v9, WithVersion(RequestBytes(plain, kMinProtocolVersion), kChecksumVersion - 1));
  MsetRequest out;
  ASSERT_TRUE(DecodeFrame(v9, &out).ok());
  ASSERT_EQ(out.items.size(), 2u);
  EXPECT_EQ(out.items[0].checksum, 0u);

  // Version 10: each item has a u64 checksum after value_len; the payload is unchanged.
  const std::string v10 = RequestBytes(in, kChecksumVersion);
  ASSERT_EQ(v10.size(), v9.size() + 2 * 8);
  EXPECT_EQ(v10.substr(v10.size() - 5), "xyzpq");
  EXPECT_EQ(v10.substr(57, 8), Le64(kSumA));  // item 0: lengths at 43, checksum at 57
  Status s = DecodeFrame(v10, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(out.items.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out.items[i].key, in.items[i].key);
    EXPECT_EQ(out.items[i].meta, in.items[i].meta);
    EXPECT_EQ(out.items[i].value_length, in.items[i].value_length);
    EXPECT_EQ(out.items[i].checksum, in.items[i].checksum);
    EXPECT_EQ(out.items[i].value, nullptr);
  }
  // Decoding a version 9 frame into the same items clears the checksums.
  ASSERT_TRUE(DecodeFrame(v9, &out).ok());
  EXPECT_EQ(out.items[0].checksum, 0u);
}

// ARENA_RESERVE keeps the MSET descriptor in version 10 too, checksums included (the node ignores
// them there: ARENA_COMMIT carries the ones it stores).
TEST(ChecksumMessagesTest, ArenaReserveItemsAreMsetItemsInVersion10) {
  const std::string v1 = "xyz";
  MsetRequest mset{"ns", 60, {{"a", "m", 3, v1.data(), kSumA}, {"bc", "", 0, nullptr, kSumB}}};
  ArenaReserveRequest reserve{
      "ns", 60, {{"a", "m", 3, nullptr, kSumA}, {"bc", "", 0, nullptr, kSumB}}};
  const std::string a = RequestBytes(mset, kChecksumVersion);
  const std::string b = RequestBytes(reserve, kChecksumVersion);
  EXPECT_EQ(a.substr(kFrameHeaderSize, a.size() - kFrameHeaderSize - 3),
            b.substr(kFrameHeaderSize));
  ArenaReserveRequest out;
  ASSERT_TRUE(DecodeFrame(b, &out).ok());
  ASSERT_EQ(out.items.size(), 2u);
  EXPECT_EQ(out.items[0].checksum, kSumA);
  EXPECT_EQ(out.items[1].checksum, kSumB);
  // Version 9: as before, without them.
  ArenaReserveRequest plain = reserve;
  for (MsetItem& item : plain.items)
    item.checksum = 0;
  const std::string v9 = RequestBytes(reserve, kChecksumVersion - 1);
  EXPECT_EQ(v9, RequestBytes(plain, kChecksumVersion - 1));
  EXPECT_EQ(v9, WithVersion(RequestBytes(plain, kShmVersion), kChecksumVersion - 1));
  EXPECT_EQ(v9.size() + 2 * 8, b.size());
  ASSERT_TRUE(DecodeFrame(v9, &out).ok());
  EXPECT_EQ(out.items[1].checksum, 0u);
}

TEST(ChecksumMessagesTest, MgetResultsCarryTheStoredChecksumFromVersion10) {
  const std::string hit = "payload";
  MgetResponse in;
  in.results = {{StatusCode::kOk, "m0", hit.size(), hit.data(), kSumA},
                {StatusCode::kTooLarge, "m1", 4096, nullptr, kSumB},
                {StatusCode::kNotFound, "", 0, nullptr, 0},
                {StatusCode::kOk, "", 0, nullptr, 0}};
  MgetResponse plain = in;
  for (MgetResult& res : plain.results)
    res.checksum = 0;
  const std::string v9 = ResponseBytes(in, kChecksumVersion - 1);
  EXPECT_EQ(v9, ResponseBytes(plain, kChecksumVersion - 1));
  EXPECT_EQ(v9, WithVersion(ResponseBytes(plain, kMinProtocolVersion), kChecksumVersion - 1));
  MgetResponse out;
  ASSERT_TRUE(DecodeFrame(v9, &out).ok());
  ASSERT_EQ(out.results.size(), 4u);
  EXPECT_EQ(out.results[0].checksum, 0u);
  EXPECT_EQ(out.results[1].checksum, 0u);

  const std::string v10 = ResponseBytes(in, kChecksumVersion);
  ASSERT_EQ(v10.size(), v9.size() + 4 * 8);
  EXPECT_EQ(v10.substr(v10.size() - hit.size()), hit);
  // Result 0: status 37, meta_len 38, value_len 42, checksum 50, meta 58.
  EXPECT_EQ(v10.substr(50, 8), Le64(kSumA));
  Status s = DecodeFrame(v10, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(out.results.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out.results[i].status, in.results[i].status);
    EXPECT_EQ(out.results[i].meta, in.results[i].meta);
    EXPECT_EQ(out.results[i].value_length, in.results[i].value_length);
    EXPECT_EQ(out.results[i].checksum, in.results[i].checksum);
  }
  ASSERT_TRUE(DecodeFrame(v9, &out).ok());
  EXPECT_EQ(out.results[0].checksum, 0u);

  // Meta-only answers carry the checksums as well.
  MgetResponse meta_only;
  meta_only.meta_only = true;
  meta_only.results = {{StatusCode::kOk, "m", 1ull << 20, nullptr, kSumB}};
  const std::string mo = ResponseBytes(meta_only, kChecksumVersion);
  ASSERT_TRUE(DecodeFrame(mo, &out).ok());
  EXPECT_TRUE(out.meta_only);
  EXPECT_EQ(out.results[0].checksum, kSumB);
  EXPECT_EQ(out.results[0].value_length, 1ull << 20);
}

TEST(ChecksumMessagesTest, ArenaCommitCarriesOneChecksumPerItemFromVersion10) {
  const ArenaCommitRequest in{9, {1, 0, 1}, {kSumA, 0, kSumB}};
  const ArenaCommitRequest plain{9, {1, 0, 1}, {}};
  const std::string v9 = RequestBytes(plain, kChecksumVersion - 1);
  EXPECT_EQ(v9, WithVersion(RequestBytes(plain, kShmVersion), kChecksumVersion - 1));
  ArenaCommitRequest out;
  ASSERT_TRUE(DecodeFrame(v9, &out).ok());
  EXPECT_EQ(out.commit, plain.commit);
  EXPECT_TRUE(out.checksums.empty());

  // Version 10: the commit bytes as before, then count x u64 checksum.
  const std::string v10 = RequestBytes(in, kChecksumVersion);
  EXPECT_EQ(v10.substr(0, 4), "KVPT");
  EXPECT_EQ(v10.substr(kFrameHeaderSize),
            v9.substr(kFrameHeaderSize) + Le64(kSumA) + Le64(0) + Le64(kSumB));
  ASSERT_TRUE(DecodeFrame(v10, &out).ok());
  EXPECT_EQ(out.reservation_id, 9u);
  EXPECT_EQ(out.commit, in.commit);
  EXPECT_EQ(out.checksums, in.checksums);
  // A version 9 decode into the same request leaves no checksums behind.
  ASSERT_TRUE(DecodeFrame(v9, &out).ok());
  EXPECT_TRUE(out.checksums.empty());

  // No checksums given in version 10: all zero ("none"), one per item.
  const std::string zeros = RequestBytes(plain, kChecksumVersion);
  EXPECT_EQ(zeros.substr(kFrameHeaderSize),
            v9.substr(kFrameHeaderSize) + Le64(0) + Le64(0) + Le64(0));
  ASSERT_TRUE(DecodeFrame(zeros, &out).ok());
  EXPECT_EQ(out.checksums, (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_EQ(RequestBytes(out, kChecksumVersion), zeros);

  // The encoder refuses checksums it cannot place: another count, or a frame without them.
  EncodedFrame f;
  Status s = EncodeRequest(1, ArenaCommitRequest{9, {1, 0, 1}, {kSumA, kSumB}}, Limits{}, &f,
                           kChecksumVersion);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("2 checksums for 3 items"), std::string::npos) << s.ToString();
  for (uint8_t version = kShmVersion; version < kChecksumVersion; ++version) {
    s = EncodeRequest(1, in, Limits{}, &f, version);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << int{version} << ": " << s.ToString();
    EXPECT_NE(s.message().find("need protocol version 10"), std::string::npos) << s.ToString();
  }
}

TEST(ChecksumMessagesTest, ArenaGetResultsCarryTheStoredChecksumFromVersion10) {
  ArenaGetResponse in;
  in.lease_id = 99;
  in.results = {{StatusCode::kOk, "m0", 1ull << 20, 1ull << 34, kSumA},
                {StatusCode::kTooLarge, "m1", 4096, 0, kSumB},
                {StatusCode::kNotFound, "", 0, 0, 0},
                {StatusCode::kOk, "", 0, 12345, 0}};
  ArenaGetResponse plain = in;
  for (ArenaGetResult& res : plain.results)
    res.checksum = 0;
  const std::string v9 = ResponseBytes(in, kChecksumVersion - 1);
  EXPECT_EQ(v9, ResponseBytes(plain, kChecksumVersion - 1));
  EXPECT_EQ(v9, WithVersion(ResponseBytes(plain, kShmVersion), kChecksumVersion - 1));
  ArenaGetResponse out;
  ASSERT_TRUE(DecodeFrame(v9, &out).ok());
  ASSERT_EQ(out.results.size(), 4u);
  EXPECT_EQ(out.results[0].checksum, 0u);

  const std::string v10 = ResponseBytes(in, kChecksumVersion);
  ASSERT_EQ(v10.size(), v9.size() + 4 * 8);
  // Result 0: status 45, meta_len 46, value_len 50, offset 58, checksum 66, meta 74.
  EXPECT_EQ(v10.substr(58, 8), Le64(1ull << 34));
  EXPECT_EQ(v10.substr(66, 8), Le64(kSumA));
  EXPECT_EQ(v10.substr(74, 2), "m0");
  Status s = DecodeFrame(v10, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out.lease_id, 99u);
  ASSERT_EQ(out.results.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out.results[i].status, in.results[i].status);
    EXPECT_EQ(out.results[i].meta, in.results[i].meta);
    EXPECT_EQ(out.results[i].value_length, in.results[i].value_length);
    EXPECT_EQ(out.results[i].offset, in.results[i].offset);
    EXPECT_EQ(out.results[i].checksum, in.results[i].checksum);
  }
  ASSERT_TRUE(DecodeFrame(v9, &out).ok());
  EXPECT_EQ(out.results[1].checksum, 0u);
}

// The opcodes that carry no value are the same in version 10 as in version 9 but for the
// version byte.
TEST(ChecksumMessagesTest, OtherLayoutsAreUnchangedInVersion10) {
  MgetRequest mget;
  mget.ns = "n";
  mget.keys = {{"k1", 7}, {"k2", kUnlimitedCapacity}};
  EXPECT_EQ(RequestBytes(mget, kChecksumVersion),
            WithVersion(RequestBytes(mget, kChecksumVersion - 1), kChecksumVersion));
  const std::vector<StatusCode> statuses = {StatusCode::kOk, StatusCode::kAborted};
  EXPECT_EQ(
      ResponseBytes(MsetResponse{statuses}, kChecksumVersion),
      WithVersion(ResponseBytes(MsetResponse{statuses}, kChecksumVersion - 1), kChecksumVersion));
  EXPECT_EQ(ResponseBytes(ArenaCommitResponse{statuses}, kChecksumVersion),
            WithVersion(ResponseBytes(ArenaCommitResponse{statuses}, kChecksumVersion - 1),
                        kChecksumVersion));
  const ArenaReserveResponse reserved{5, {{StatusCode::kOk, 64}}};
  EXPECT_EQ(ResponseBytes(reserved, kChecksumVersion),
            WithVersion(ResponseBytes(reserved, kChecksumVersion - 1), kChecksumVersion));
  const MexistResponse exist{{{StatusCode::kOk, 13}}};
  EXPECT_EQ(ResponseBytes(exist, kChecksumVersion),
            WithVersion(ResponseBytes(exist, kChecksumVersion - 1), kChecksumVersion));
}

// docs/protocol.md's version 10 example: the two-key MSET with a checksum on its first item.
TEST(GoldenBytesTest, TwoKeyMsetRequestVersion10) {
  const std::string expected(
      "KVPT\x0A\x03\x00\x00"                                      // magic, version 10, MSET
      "\x08\x07\x06\x05\x04\x03\x02\x01"                          // request_id 0x0102030405060708
      "\x3B\x00\x00\x00\x00\x00\x00\x00"                          // descriptor_length 59, reserved
      "\x05\x00\x00\x00\x00\x00\x00\x00"                          // payload_length 5
      "\x02ns"                                                    // namespace "ns"
      "\x3C\x00\x00\x00"                                          // ttl_seconds 60
      "\x02\x00\x00\x00"                                          // count 2
      "\x01\x00\x01\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00"  // key 1, meta 1, value 3
      "\xEF\xCD\xAB\x89\x67\x45\x23\x01"                          // checksum 0x0123456789ABCDEF
      "a"
      "m"
      "\x02\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00"  // key 2, meta 0, value 2
      "\x00\x00\x00\x00\x00\x00\x00\x00"                          // checksum 0: none
      "bc"
      "xyzpq",  // payload: the two values back to back
      96);
  const std::string v1 = "xyz", v2 = "pq";
  MsetRequest in{"ns", 60, {{"a", "m", 3, v1.data(), kSumA}, {"bc", "", 2, v2.data(), 0}}};
  EncodedFrame f;
  ASSERT_TRUE(EncodeRequest(0x0102030405060708ull, in, Limits{}, &f, kChecksumVersion).ok());
  EXPECT_EQ(f.head, expected.substr(0, 91));
  EXPECT_EQ(f.Flatten(), expected);
  MsetRequest out;
  ASSERT_TRUE(DecodeFrame(expected, &out).ok());
  ASSERT_EQ(out.items.size(), 2u);
  EXPECT_EQ(out.items[0].checksum, kSumA);
  EXPECT_EQ(out.items[1].checksum, 0u);
  EXPECT_EQ(out.items[1].key, "bc");
}

TEST(GoldenBytesTest, MgetResponseWithHitAndMissVersion10) {
  const std::string expected(
      "KVPT\x0A\x04\x01\x00"                                  // version 10, MGET, flags: response
      "\x09\x00\x00\x00\x00\x00\x00\x00"                      // request_id 9
      "\x30\x00\x00\x00\x00\x00\x00\x00"                      // descriptor_length 48
      "\x02\x00\x00\x00\x00\x00\x00\x00"                      // payload_length 2
      "\x01"                                                  // overall: PARTIAL
      "\x02\x00\x00\x00"                                      // count 2
      "\x00\x01\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00"  // OK, meta 1, value 2
      "\x10\x32\x54\x76\x98\xBA\xDC\xFE"                      // checksum 0xFEDCBA9876543210
      "M"
      "\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"  // NotFound
      "\x00\x00\x00\x00\x00\x00\x00\x00"                      // checksum 0
      "hi",
      82);
  const std::string hit = "hi";
  MgetResponse in;
  in.results = {{StatusCode::kOk, "M", 2, hit.data(), kSumB},
                {StatusCode::kNotFound, "", 0, nullptr, 0}};
  EncodedFrame f;
  ASSERT_TRUE(EncodeResponse(9, in, Limits{}, &f, kChecksumVersion).ok());
  EXPECT_EQ(f.Flatten(), expected);
  MgetResponse out;
  ASSERT_TRUE(DecodeFrame(expected, &out).ok());
  EXPECT_EQ(out.results[0].checksum, kSumB);
  EXPECT_EQ(out.results[1].checksum, 0u);
}

}  // namespace
}  // namespace kvport::protocol
