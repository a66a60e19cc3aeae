// SPDX-License-Identifier: Apache-2.0
#include "session_inputs.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "protocol/frame.h"
#include "protocol/messages.h"

namespace kvport::fuzz {
namespace {

using protocol::EncodedFrame;
using protocol::kMaxProtocolVersion;

// Encodes one request at the current protocol version; the seeds are fixed, so a failure is a
// bug in this file.
template <typename Request>
std::string Frame(uint64_t id, const Request& request, uint8_t version = kMaxProtocolVersion) {
  EncodedFrame frame;
  Status s = protocol::EncodeRequest(id, request, FuzzLimits(), &frame, version);
  if (!s.ok()) {
    std::fprintf(stderr, "session seeds: cannot encode a request: %s\n", s.ToString().c_str());
    std::abort();
  }
  return frame.Flatten();
}

std::string Mset(uint64_t id, std::string_view ns, uint32_t ttl,
                 const std::vector<std::pair<std::string_view, std::string_view>>& items,
                 std::string_view meta = "m") {
  protocol::MsetRequest m;
  m.ns = ns;
  m.ttl_seconds = ttl;
  for (const auto& [key, value] : items)
    m.items.push_back({key, meta, value.size(), value.data()});
  return Frame(id, m);
}

std::string Mget(uint64_t id, std::string_view ns, std::vector<std::string_view> keys,
                 bool meta_only = false, uint64_t capacity = protocol::kUnlimitedCapacity) {
  protocol::MgetRequest m;
  m.ns = ns;
  m.meta_only = meta_only;
  for (std::string_view k : keys)
    m.keys.push_back({k, capacity});
  return Frame(id, m);
}

std::string Mexist(uint64_t id, std::string_view ns, std::vector<std::string_view> keys) {
  protocol::MexistRequest m;
  m.ns = ns;
  m.keys = std::move(keys);
  return Frame(id, m);
}

std::string Mdel(uint64_t id, std::string_view ns, std::vector<std::string_view> keys,
                 bool any_namespace = false) {
  protocol::MdelRequest m;
  m.ns = any_namespace ? std::string_view() : ns;
  m.keys = std::move(keys);
  m.any_namespace = any_namespace;
  return Frame(id, m);
}

std::string List(uint64_t id, std::string_view ns, uint64_t cursor, uint32_t max_keys) {
  protocol::ListRequest m;
  m.ns = ns;
  m.cursor = cursor;
  m.max_keys = max_keys;
  return Frame(id, m);
}

std::string Control(uint8_t feed, bool unix_socket, bool hello, uint8_t salt) {
  uint8_t c = static_cast<uint8_t>(feed | (unix_socket ? kUnixSocket : 0) | (hello ? 0 : kNoHello) |
                                   (salt << 5));
  return std::string(1, static_cast<char>(c));
}

}  // namespace

protocol::Limits FuzzLimits() {
  protocol::Limits l;
  l.max_key_bytes = 64;
  l.max_namespace_bytes = 16;
  l.max_meta_bytes = 64;
  l.max_value_bytes = 64 << 10;
  l.max_batch_keys = 16;
  l.max_frame_bytes = 4096;
  return l;
}

std::string HelloFrame() {
  protocol::HelloRequest hello;
  hello.client_name = "fuzz";
  return Frame(1, hello, protocol::kHelloVersion);
}

std::vector<SeedInput> SeedInputs() {
  const std::string big(3000, 'v');
  // Request sequences after the HELLO the driver sends (ids from 2).
  std::vector<std::pair<std::string, std::string>> streams;
  streams.emplace_back(
      "keys", Mset(2, "ns", 0, {{"a", "alpha"}, {"b", "beta"}}) + Mget(3, "ns", {"a", "b", "zz"}) +
                  Mexist(4, "ns", {"a", "q"}) + Mget(5, "ns", {"a"}, /*meta_only=*/true) +
                  Mget(6, "ns", {"b"}, false, /*capacity=*/2) + Mdel(7, "ns", {"a"}) +
                  Mdel(8, "", {"b"}, true) + Frame(9, protocol::PingRequest{}));
  streams.emplace_back("overwrite_ttl", Mset(2, "", 30, {{"k", "one"}, {"k", "two"}}) +
                                            Mset(3, "t", 0, {{"k", big}}) + Mget(4, "t", {"k"}) +
                                            Mget(5, "", {"k"}));
  {
    // An MSET whose payload stops short: nothing of it may become visible.
    std::string cut = Mset(2, "ns", 0, {{"whole", "12345678"}, {"torn", big}});
    cut.resize(cut.size() - big.size() / 2);
    streams.emplace_back("truncated_mset", Mset(3, "ns", 0, {{"before", "ok"}}) + cut);
  }
  streams.emplace_back("list_stats", Mset(2, "l", 0, {{"x", "1"}, {"y", "2"}, {"z", "3"}}) +
                                         List(3, "l", 0, 2) + List(4, "l", 12345, 2) +
                                         Frame(5, protocol::StatsRequest{}) +
                                         Frame(6, protocol::NodeInfoRequest{}));
  {
    // A malformed frame (bad magic) after valid requests: ERROR, half-close.
    std::string bad = Frame(3, protocol::PingRequest{});
    bad[0] = 'X';
    streams.emplace_back("malformed", Mset(2, "ns", 0, {{"m", "v"}}) + bad + Mget(4, "ns", {"m"}));
  }
  {
    protocol::ArenaReserveRequest reserve;
    reserve.ns = "s";
    reserve.items.push_back({"r", "", 16, nullptr});
    reserve.items.push_back({"q", "", 8, nullptr});
    protocol::ArenaCommitRequest commit;
    commit.reservation_id = 1;
    commit.commit = {1, 0};
    protocol::ArenaGetRequest get;
    get.ns = "s";
    get.keys.push_back({"r", 64});
    protocol::ArenaReleaseRequest release;
    release.lease_ids = {1, 2};
    streams.emplace_back("shm", Frame(2, protocol::NodeInfoRequest{}) +
                                    Frame(3, protocol::ShmAttachRequest{}) + Frame(4, reserve) +
                                    Frame(5, commit) + Frame(6, get) + Frame(7, release) +
                                    Mget(8, "s", {"r", "q"}));
    // The same requests on a TCP session attached to the node's UCX (when it offers UCX).
    streams.emplace_back(
        "ucx", Frame(2, protocol::NodeInfoRequest{}) + Frame(3, protocol::UcxAttachRequest{}) +
                   Frame(4, reserve) + Frame(5, commit) + Frame(6, get) + Frame(7, release) +
                   Frame(8, protocol::UcxAttachRequest{}) + Mget(9, "s", {"r", "q"}));
    // Version 8's UCX_ATTACH is served no more: its frame is malformed (ERROR, half-close).
    std::string v8_attach = Frame(3, protocol::UcxAttachRequest{});
    v8_attach[4] = 8;
    streams.emplace_back("ucx_v8", Frame(2, protocol::PingRequest{}) + v8_attach +
                                       Frame(4, protocol::PingRequest{}));
  }

  std::vector<SeedInput> seeds;
  for (const auto& [name, stream] : streams) {
    const bool unix_socket = name == "shm";
    seeds.push_back({name + "_bytes", Control(kFeedByteByByte, unix_socket, true, 0) + stream});
    seeds.push_back({name + "_chunks", Control(kFeedChunks, unix_socket, true, 5) + stream});
  }
  // The handshake itself, sent by the input.
  seeds.push_back({"hello_raw", Control(kFeedSmallChunks, false, false, 1) + HelloFrame() +
                                    Frame(2, protocol::PingRequest{})});
  seeds.push_back({"no_hello", Control(kFeedAtOnce, false, false, 0) + Mget(1, "", {"a"})});
  return seeds;
}

}  // namespace kvport::fuzz
