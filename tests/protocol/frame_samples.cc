// SPDX-License-Identifier: Apache-2.0
#include "frame_samples.h"

#include <cstdlib>
#include <string>
#include <type_traits>
#include <variant>

#include "protocol/frame.h"
#include "protocol/messages.h"

namespace kvport::protocol::testing {
namespace {

// The values behind the payload spans of the samples; static so the spans stay valid.
const std::string& ValueA() {
  static const std::string v = "value-a bytes";
  return v;
}
const std::string& ValueB() {
  static const std::string v(300, 'b');
  return v;
}

template <typename Message>
void AddRequest(std::vector<SampleFrame>* out, std::string name, uint64_t id, const Message& m,
                uint8_t version = kMinProtocolVersion) {
  EncodedFrame f;
  Status s = EncodeRequest(id, m, Limits{}, &f, version);
  if (!s.ok()) std::abort();  // a sample that does not encode is a bug in this file
  out->push_back({std::move(name), f.Flatten()});
}

template <typename Message>
void AddResponse(std::vector<SampleFrame>* out, std::string name, uint64_t id, const Message& m,
                 uint8_t version = kMinProtocolVersion) {
  EncodedFrame f;
  Status s = EncodeResponse(id, m, Limits{}, &f, version);
  if (!s.ok()) std::abort();
  out->push_back({std::move(name), f.Flatten()});
}

}  // namespace

std::vector<SampleFrame> SampleFrames() {
  std::vector<SampleFrame> out;
  AddRequest(&out, "hello_request", 1, HelloRequest{1, 1, "kvport-client", ""});
  AddResponse(&out, "hello_response", 1, HelloResponse{1, Limits{}, "kvport 0.1.0", std::nullopt});
  AddResponse(&out, "hello_response_v5", 1, HelloResponse{5, Limits{}, "kvport 0.1.0", "lmcache"});
  AddRequest(&out, "ping_request", 2, PingRequest{});
  AddResponse(&out, "ping_response", 2, PingResponse{});

  MsetRequest mset;
  mset.ns = "llm";
  mset.ttl_seconds = 3600;
  mset.items = {{"k1", "meta-1", ValueA().size(), ValueA().data()},
                {"k2", "", ValueB().size(), ValueB().data()},
                {"empty-value", "m", 0, nullptr}};
  AddRequest(&out, "mset_request", 3, mset);
  AddResponse(&out, "mset_response", 3,
              MsetResponse{{StatusCode::kOk, StatusCode::kNoSpace, StatusCode::kOk}});

  MgetRequest mget;
  mget.ns = "llm";
  mget.keys = {{"k1", kUnlimitedCapacity}, {"k2", 64}, {"missing", 1024}};
  AddRequest(&out, "mget_request", 4, mget);
  MgetResponse mget_response;
  mget_response.results = {{StatusCode::kOk, "meta-1", ValueA().size(), ValueA().data()},
                           {StatusCode::kTooLarge, "", ValueB().size(), nullptr},
                           {StatusCode::kNotFound, "", 0, nullptr}};
  AddResponse(&out, "mget_response", 4, mget_response);
  mget.meta_only = true;
  AddRequest(&out, "mget_meta_only_request", 5, mget);
  MgetResponse meta_only_response;
  meta_only_response.meta_only = true;
  meta_only_response.results = {{StatusCode::kOk, "meta-1", ValueA().size(), nullptr},
                                {StatusCode::kOk, "", ValueB().size(), nullptr},
                                {StatusCode::kNotFound, "", 0, nullptr}};
  AddResponse(&out, "mget_meta_only_response", 5, meta_only_response);

  AddRequest(&out, "mexist_request", 6, MexistRequest{"", {"k1", "k2"}});
  AddResponse(&out, "mexist_response", 6,
              MexistResponse{{{StatusCode::kOk, 13}, {StatusCode::kNotFound, 0}}});
  AddRequest(&out, "mdel_request", 7, MdelRequest{"ns", {"k1"}});
  AddResponse(&out, "mdel_response", 7, MdelResponse{{StatusCode::kNotFound}});
  AddRequest(&out, "list_request", 8, ListRequest{"llm", 42, 100});
  AddResponse(&out, "list_response", 8, ListResponse{7, {"a", "bb", "ccc"}});
  AddRequest(&out, "stats_request", 9, StatsRequest{});
  AddResponse(&out, "stats_response", 9,
              StatsResponse{{{"hits", 10}, {"misses", 2}, {"used_bytes", 4096}},
                            {{"", 3, 300}, {"llm", 1, 13}}});
  AddResponse(&out, "error_response", 10,
              ErrorResponse{StatusCode::kCorruption, "frame header: bad magic"});

  // Version 2: the same layouts, plus the any-namespace flag on MGET, MEXIST and MDEL requests.
  AddRequest(&out, "v2_ping_request", 11, PingRequest{}, 2);
  AddRequest(&out, "v2_mset_request", 12, mset, 2);
  AddResponse(&out, "v2_mget_response", 13, mget_response, 2);
  MgetRequest any_mget;
  any_mget.any_namespace = true;
  any_mget.keys = {{"k1", kUnlimitedCapacity}, {"k2", 64}};
  AddRequest(&out, "v2_any_namespace_mget_request", 14, any_mget, 2);
  any_mget.meta_only = true;
  AddRequest(&out, "v2_any_namespace_mget_meta_only_request", 15, any_mget, 2);
  AddRequest(&out, "v2_any_namespace_mexist_request", 16,
             MexistRequest{"", {"k1", "k2"}, /*any_namespace=*/true}, 2);
  AddResponse(&out, "v2_mexist_response", 16,
              MexistResponse{{{StatusCode::kOk, 13}, {StatusCode::kNotFound, 0}}}, 2);
  AddRequest(&out, "v2_any_namespace_mdel_request", 17,
             MdelRequest{"", {"k1"}, /*any_namespace=*/true}, 2);
  AddResponse(&out, "v2_mdel_response", 17, MdelResponse{{StatusCode::kOk}}, 2);

  // Version 3: the older opcodes unchanged, plus NODE_INFO, SHM_ATTACH and the ARENA_* opcodes (no
  // payloads).
  AddRequest(&out, "v3_mset_request", 18, mset, 3);
  AddResponse(&out, "v3_mget_response", 19, mget_response, 3);
  AddRequest(&out, "v3_node_info_request", 20, NodeInfoRequest{}, 3);
  AddResponse(&out, "v3_node_info_response", 20,
              NodeInfoResponse{0x1122334455667788ull, kOfferSharedMemory | 0x80000000u,
                               "0b7c3a5e-8f51-4d8e-a4c2-6f0e2d1b9c47", "/run/kvport/node.sock"},
              3);
  AddResponse(&out, "v3_node_info_tcp_only_response", 21, NodeInfoResponse{7, 0, "", ""}, 3);
  AddRequest(&out, "v3_shm_attach_request", 22, ShmAttachRequest{}, 3);
  AddResponse(&out, "v3_shm_attach_response", 22,
              ShmAttachResponse{StatusCode::kOk, 1ull << 30, ""}, 3);
  AddResponse(&out, "v3_shm_attach_refused_response", 23,
              ShmAttachResponse{StatusCode::kNotSupported, 0, "not a Unix-socket session"}, 3);
  ArenaReserveRequest reserve;
  reserve.ns = "llm";
  reserve.ttl_seconds = 60;
  reserve.items = {{"k1", "meta-1", 4096, nullptr},
                   {"k2", "", 1ull << 20, nullptr},
                   {"empty-value", "m", 0, nullptr}};
  AddRequest(&out, "v3_arena_reserve_request", 24, reserve, 3);
  AddResponse(&out, "v3_arena_reserve_response", 24,
              ArenaReserveResponse{
                  9, {{StatusCode::kOk, 4096}, {StatusCode::kNoSpace, 0}, {StatusCode::kOk, 0}}},
              3);
  AddResponse(&out, "v3_arena_reserve_failed_response", 25,
              ArenaReserveResponse{0, {{StatusCode::kTooLarge, 0}}}, 3);
  AddRequest(&out, "v3_arena_commit_request", 26, ArenaCommitRequest{9, {1, 0, 1}, {}}, 3);
  AddResponse(&out, "v3_arena_commit_response", 26,
              ArenaCommitResponse{{StatusCode::kOk, StatusCode::kNoSpace, StatusCode::kAborted}},
              3);
  ArenaGetRequest arena_get;
  arena_get.ns = "llm";
  arena_get.keys = {{"k1", kUnlimitedCapacity}, {"k2", 64}, {"missing", 1024}};
  AddRequest(&out, "v3_arena_get_request", 27, arena_get, 3);
  ArenaGetRequest any_arena_get;
  any_arena_get.any_namespace = true;
  any_arena_get.keys = {{"k1", 4096}};
  AddRequest(&out, "v3_any_namespace_arena_get_request", 28, any_arena_get, 3);
  AddResponse(&out, "v3_arena_get_response", 27,
              ArenaGetResponse{5,
                               {{StatusCode::kOk, "meta-1", 4096, 1ull << 20},
                                {StatusCode::kTooLarge, "", 1ull << 20, 0},
                                {StatusCode::kNotFound, "", 0, 0}}},
              3);
  AddResponse(&out, "v3_arena_get_miss_response", 28,
              ArenaGetResponse{0, {{StatusCode::kNotFound, "", 0, 0}}}, 3);
  AddRequest(&out, "v3_arena_release_request", 29,
             ArenaReleaseRequest{{5, 6, 0xFFFFFFFFFFFFFFFFull}}, 3);
  AddResponse(&out, "v3_arena_release_response", 29, ArenaReleaseResponse{2}, 3);
  // Version 9: UCX_ATTACH (version 8's layout is served no more).
  AddRequest(&out, "v9_ucx_attach_request", 30, UcxAttachRequest{}, kUcxVersion);
  AddResponse(&out, "v9_ucx_attach_response", 30,
              UcxAttachResponse{StatusCode::kOk, 40123, "0123456789abcdef", 1ull << 30, ""},
              kUcxVersion);
  AddResponse(&out, "v9_ucx_attach_refused_response", 31,
              UcxAttachResponse{StatusCode::kNotSupported, 0, "", 0, "this node offers no UCX"},
              kUcxVersion);

  // Version 10: values carry their checksums (MSET and ARENA_RESERVE items, MGET and ARENA_GET
  // results, ARENA_COMMIT requests); some are 0 ("none"). The other layouts are unchanged.
  constexpr uint64_t kSumA = 0x0123456789ABCDEFull, kSumB = 0xFEDCBA9876543210ull;
  MsetRequest mset_sums = mset;
  mset_sums.items[0].checksum = kSumA;
  mset_sums.items[1].checksum = kSumB;
  AddRequest(&out, "v10_mset_request", 32, mset_sums, kChecksumVersion);
  AddResponse(&out, "v10_mset_response", 32,
              MsetResponse{{StatusCode::kOk, StatusCode::kNoSpace, StatusCode::kOk}},
              kChecksumVersion);
  AddRequest(&out, "v10_mget_request", 33, mget, kChecksumVersion);  // meta-only
  MgetResponse mget_sums = mget_response;
  mget_sums.results[0].checksum = kSumA;
  mget_sums.results[1].checksum = kSumB;  // TooLarge carries it too
  AddResponse(&out, "v10_mget_response", 34, mget_sums, kChecksumVersion);
  MgetResponse meta_only_sums = meta_only_response;
  meta_only_sums.results[0].checksum = kSumB;
  AddResponse(&out, "v10_mget_meta_only_response", 33, meta_only_sums, kChecksumVersion);
  ArenaReserveRequest reserve_sums = reserve;
  reserve_sums.items[1].checksum = kSumA;  // ignored by the node, but on the wire
  AddRequest(&out, "v10_arena_reserve_request", 35, reserve_sums, kChecksumVersion);
  AddRequest(&out, "v10_arena_commit_request", 36,
             ArenaCommitRequest{9, {1, 0, 1}, {kSumA, 0, kSumB}}, kChecksumVersion);
  AddRequest(&out, "v10_arena_commit_no_checksums_request", 37, ArenaCommitRequest{9, {1, 1}, {}},
             kChecksumVersion);
  AddResponse(&out, "v10_arena_get_response", 38,
              ArenaGetResponse{5,
                               {{StatusCode::kOk, "meta-1", 4096, 1ull << 20, kSumA},
                                {StatusCode::kTooLarge, "", 1ull << 20, 0, kSumB},
                                {StatusCode::kNotFound, "", 0, 0, 0}}},
              kChecksumVersion);
  AddResponse(&out, "v10_arena_get_miss_response", 39,
              ArenaGetResponse{0, {{StatusCode::kNotFound, "", 0, 0, 0}}}, kChecksumVersion);
  return out;
}

namespace {

// Points the value of every payload-carrying item at its bytes in `payload`, in item order.
void AttachPayload(std::string_view payload, MsetRequest* m) {
  uint64_t offset = 0;
  for (MsetItem& item : m->items) {
    item.value = payload.data() + offset;
    offset += item.value_length;
  }
}
void AttachPayload(std::string_view payload, MgetResponse* m) {
  uint64_t offset = 0;
  for (size_t i = 0; i < m->results.size(); ++i) {
    if (!m->CarriesPayload(i)) continue;
    m->results[i].value = payload.data() + offset;
    offset += m->results[i].value_length;
  }
}
template <typename T>
void AttachPayload(std::string_view, T*) {}

}  // namespace

Status DecodeAndReencode(std::string_view frame, const Limits& limits, std::string* reencoded) {
  FrameView view;
  KVPORT_RETURN_IF_ERROR(SplitFrame(frame, limits, &view));
  EncodedFrame encoded;
  Status status;
  if (view.header.is_response()) {
    AnyResponse response;
    KVPORT_RETURN_IF_ERROR(DecodeAnyResponse(view.header, view.descriptor, limits, &response));
    status = std::visit(
        [&](auto& m) {
          AttachPayload(view.payload, &m);
          return EncodeResponse(view.header.request_id, m, limits, &encoded, view.header.version);
        },
        response);
  } else {
    AnyRequest request;
    KVPORT_RETURN_IF_ERROR(DecodeAnyRequest(view.header, view.descriptor, limits, &request));
    status = std::visit(
        [&](auto& m) {
          AttachPayload(view.payload, &m);
          return EncodeRequest(view.header.request_id, m, limits, &encoded, view.header.version);
        },
        request);
  }
  // A decoded message must always be encodable again: anything else is a codec bug.
  if (!status.ok())
    return Status::Internal("re-encoding a decoded frame failed: " + status.ToString());
  *reencoded = encoded.Flatten();
  return Status::Ok();
}

}  // namespace kvport::protocol::testing
