// SPDX-License-Identifier: Apache-2.0
// TestClient: a minimal, blocking kvport protocol client for server tests.
//
// It speaks the wire protocol with the codec (protocol/) over one blocking TCP socket, one
// request at a time, copying everything it receives into owned strings. Every read has a
// receive timeout (a bound so a broken server fails the test instead of hanging it; no test
// asserts on time). Not a model for the real client SDK: no pooling, pipelining or zero-copy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/server.h"
#include "kvport/status.h"
#include "net/socket.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace kvport::testing {

struct SetItem {
  std::string key;
  std::string value;
  std::string meta;
};

struct GetItem {
  StatusCode status = StatusCode::kNotFound;
  std::string meta;
  uint64_t value_length = 0;
  std::string value;  // the payload, when the item carried one
};

struct RawFrame {
  protocol::FrameHeader header;
  std::string descriptor;
  std::string payload;
};

class TestClient {
 public:
  // Connects to 127.0.0.1:port and, when `hello`, negotiates (adopting the server's limits and
  // chosen version), offering protocol versions 1..max_version.
  static Result<TestClient> Connect(uint16_t port, bool hello = true,
                                    uint8_t max_version = protocol::kMaxProtocolVersion);

  // `token`: the secret to present (version 4 on). The answer's default namespace (version 5
  // on) is kept in default_namespace().
  Status Hello(uint8_t max_version = protocol::kMaxProtocolVersion, std::string_view token = {});
  const std::optional<std::string>& default_namespace() const { return default_namespace_; }
  Status Ping();
  Result<std::vector<StatusCode>> Mset(std::string_view ns, const std::vector<SetItem>& items,
                                       uint32_t ttl_seconds = 0);
  // `any_namespace` sets the request's any-namespace flag (then `ns` should be empty).
  Result<std::vector<GetItem>> Mget(std::string_view ns, const std::vector<std::string>& keys,
                                    bool meta_only = false,
                                    uint64_t buffer_capacity = protocol::kUnlimitedCapacity,
                                    bool any_namespace = false);
  Result<std::vector<protocol::ExistResult>> Mexist(std::string_view ns,
                                                    const std::vector<std::string>& keys,
                                                    bool any_namespace = false);
  Result<std::vector<StatusCode>> Mdel(std::string_view ns, const std::vector<std::string>& keys,
                                       bool any_namespace = false);
  // One LIST page; *next_cursor is 0 when the listing is complete.
  Result<std::vector<std::string>> List(std::string_view ns, uint64_t cursor, uint32_t max_keys,
                                        uint64_t* next_cursor);
  // Every key of `ns`, paging `page` keys at a time.
  Result<std::vector<std::string>> ListAll(std::string_view ns, uint32_t page);
  Result<ServerStats> Stats();

  // Low level: write bytes as they are; read one whole frame. An ERROR frame is returned as a
  // RawFrame like any other (ErrorOf() decodes it).
  Status SendRaw(std::string_view bytes);
  Status Send(const protocol::EncodedFrame& frame);
  Result<RawFrame> ReadFrame();
  // The Status carried by an ERROR frame (OK if `frame` is not one).
  Status ErrorOf(const RawFrame& frame) const;
  // True when the server closed the connection (a read returns end of stream).
  bool ReadsEndOfStream();

  const protocol::Limits& limits() const { return limits_; }
  // The negotiated protocol version (1 before HELLO); requests are encoded with it.
  uint8_t version() const { return version_; }
  int fd() const { return socket_.fd(); }
  void Close() { socket_.Close(); }

 private:
  explicit TestClient(net::Socket socket) : socket_(std::move(socket)) {}
  // Sends `frame`, reads the answer, checks its opcode and request id; an ERROR frame becomes
  // its Status.
  Result<RawFrame> Call(const protocol::EncodedFrame& frame, protocol::Opcode expect);
  Status ReadExactly(char* out, size_t n);

  net::Socket socket_;
  protocol::Limits limits_;
  uint8_t version_ = protocol::kMinProtocolVersion;
  std::optional<std::string> default_namespace_;
  uint64_t next_request_id_ = 1;
};

// Sends `request` in the client's version and decodes its answer as a `Response` (whose views
// point into *descriptor). An ERROR frame's status when the node sent one.
template <typename Response, typename Request>
Result<Response> Exchange(TestClient& client, const Request& request, std::string* descriptor) {
  static uint64_t next_id = 1 << 20;  // apart from the ids the client's own calls take
  protocol::EncodedFrame frame;
  KVPORT_RETURN_IF_ERROR(
      protocol::EncodeRequest(next_id++, request, client.limits(), &frame, client.version()));
  KVPORT_RETURN_IF_ERROR(client.Send(frame));
  KVPORT_ASSIGN_OR_RETURN(RawFrame raw, client.ReadFrame());
  KVPORT_RETURN_IF_ERROR(client.ErrorOf(raw));
  *descriptor = std::move(raw.descriptor);
  Response response;
  KVPORT_RETURN_IF_ERROR(
      protocol::DecodeResponse(raw.header, *descriptor, client.limits(), &response));
  return response;
}

}  // namespace kvport::testing
