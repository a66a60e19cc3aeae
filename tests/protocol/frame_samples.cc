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
  AddRequest(&out, "hello_request", 1, HelloRequest{1, 1, "kvport-client"});
  AddResponse(&out, "hello_response", 1, HelloResponse{1, Limits{}, "kvport 0.1.0"});
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
