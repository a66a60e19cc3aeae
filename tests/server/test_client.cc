// SPDX-License-Identifier: Apache-2.0
#include "test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>

namespace kvport::testing {

namespace {
constexpr int kReceiveTimeoutSeconds = 60;
}  // namespace

Result<TestClient> TestClient::Connect(uint16_t port, bool hello, uint8_t max_version) {
  net::Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return Status::FromErrno("socket", errno);
  timeval tv{kReceiveTimeoutSeconds, 0};
  ::setsockopt(s.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(s.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::FromErrno("connect", errno);
  }
  KVPORT_RETURN_IF_ERROR(net::SetNoDelay(s.fd()));
  TestClient client(std::move(s));
  if (hello) KVPORT_RETURN_IF_ERROR(client.Hello(max_version));
  return client;
}

Status TestClient::SendRaw(std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(socket_.fd(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::FromErrno("send", errno);
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status TestClient::Send(const protocol::EncodedFrame& frame) {
  KVPORT_RETURN_IF_ERROR(SendRaw(frame.head));
  for (const protocol::PayloadSpan& span : frame.payloads) {
    KVPORT_RETURN_IF_ERROR(
        SendRaw(std::string_view(static_cast<const char*>(span.data), span.size)));
  }
  return Status::Ok();
}

Status TestClient::ReadExactly(char* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::recv(socket_.fd(), out + done, n - done, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return Status::Aborted("server closed the connection");
    if (r < 0) return Status::FromErrno("recv", errno);
    done += static_cast<size_t>(r);
  }
  return Status::Ok();
}

Result<RawFrame> TestClient::ReadFrame() {
  RawFrame frame;
  char header[protocol::kFrameHeaderSize];
  KVPORT_RETURN_IF_ERROR(ReadExactly(header, sizeof(header)));
  KVPORT_RETURN_IF_ERROR(protocol::DecodeFrameHeader(std::string_view(header, sizeof(header)),
                                                     limits_, &frame.header));
  frame.descriptor.resize(frame.header.descriptor_length);
  KVPORT_RETURN_IF_ERROR(ReadExactly(frame.descriptor.data(), frame.descriptor.size()));
  frame.payload.resize(frame.header.payload_length);
  KVPORT_RETURN_IF_ERROR(ReadExactly(frame.payload.data(), frame.payload.size()));
  return frame;
}

Status TestClient::ErrorOf(const RawFrame& frame) const {
  if (frame.header.opcode != protocol::Opcode::kError) return Status::Ok();
  protocol::ErrorResponse error;
  KVPORT_RETURN_IF_ERROR(protocol::DecodeResponse(frame.header, frame.descriptor, limits_, &error));
  return Status(error.code, "server ERROR: " + std::string(error.message));
}

bool TestClient::ReadsEndOfStream() {
  char c;
  for (;;) {
    ssize_t r = ::recv(socket_.fd(), &c, 1, 0);
    if (r < 0 && errno == EINTR) continue;
    // A reset (ECONNRESET) also means the server closed; a timeout (EAGAIN) does not.
    return r == 0 || (r < 0 && errno == ECONNRESET);
  }
}

Result<RawFrame> TestClient::Call(const protocol::EncodedFrame& request, protocol::Opcode expect) {
  KVPORT_RETURN_IF_ERROR(Send(request));
  KVPORT_ASSIGN_OR_RETURN(RawFrame frame, ReadFrame());
  KVPORT_RETURN_IF_ERROR(ErrorOf(frame));
  if (frame.header.opcode != expect) {
    return Status::Corruption("expected a " + std::string(protocol::OpcodeName(expect)) +
                              " response, got " +
                              std::string(protocol::OpcodeName(frame.header.opcode)));
  }
  if (frame.header.request_id != next_request_id_ - 1) {
    return Status::Corruption("response request id " + std::to_string(frame.header.request_id) +
                              " does not match " + std::to_string(next_request_id_ - 1));
  }
  return frame;
}

Status TestClient::Hello(uint8_t max_version, std::string_view token) {
  protocol::EncodedFrame req;
  protocol::HelloRequest request;
  request.max_version = max_version;
  request.token = token;
  KVPORT_RETURN_IF_ERROR(protocol::EncodeRequest(next_request_id_++, request, limits_, &req));
  KVPORT_ASSIGN_OR_RETURN(RawFrame frame, Call(req, protocol::Opcode::kHello));
  protocol::HelloResponse hello;
  KVPORT_RETURN_IF_ERROR(protocol::DecodeResponse(frame.header, frame.descriptor, limits_, &hello));
  limits_ = hello.limits;
  version_ = hello.version;
  default_namespace_.reset();
  if (hello.default_namespace) default_namespace_.emplace(*hello.default_namespace);
  return Status::Ok();
}

Status TestClient::Ping() {
  protocol::EncodedFrame req;
  KVPORT_RETURN_IF_ERROR(protocol::EncodeRequest(next_request_id_++, protocol::PingRequest{},
                                                 limits_, &req, version_));
  KVPORT_ASSIGN_OR_RETURN(RawFrame frame, Call(req, protocol::Opcode::kPing));
  protocol::PingResponse ping;
  return protocol::DecodeResponse(frame.header, frame.descriptor, limits_, &ping);
}

Result<std::vector<StatusCode>> TestClient::Mset(std::string_view ns,
                                                 const std::vector<SetItem>& items,
                                                 uint32_t ttl_seconds) {
  protocol::MsetRequest m;
  m.ns = ns;
  m.ttl_seconds = ttl_seconds;
  for (const SetItem& item : items) {
    m.items.push_back({item.key, item.meta, item.value.size(), item.value.data()});
  }
  protocol::EncodedFrame req;
  KVPORT_RETURN_IF_ERROR(protocol::EncodeRequest(next_request_id_++, m, limits_, &req, version_));
  KVPORT_ASSIGN_OR_RETURN(RawFrame frame, Call(req, protocol::Opcode::kMset));
  protocol::MsetResponse resp;
  KVPORT_RETURN_IF_ERROR(protocol::DecodeResponse(frame.header, frame.descriptor, limits_, &resp));
  if (resp.statuses.size() != items.size()) return Status::Corruption("MSET status count");
  return resp.statuses;
}

Result<std::vector<GetItem>> TestClient::Mget(std::string_view ns,
                                              const std::vector<std::string>& keys, bool meta_only,
                                              uint64_t buffer_capacity, bool any_namespace) {
  protocol::MgetRequest m;
  m.ns = ns;
  m.meta_only = meta_only;
  m.any_namespace = any_namespace;
  for (const std::string& key : keys)
    m.keys.push_back({key, buffer_capacity});
  protocol::EncodedFrame req;
  KVPORT_RETURN_IF_ERROR(protocol::EncodeRequest(next_request_id_++, m, limits_, &req, version_));
  KVPORT_ASSIGN_OR_RETURN(RawFrame frame, Call(req, protocol::Opcode::kMget));
  protocol::MgetResponse resp;
  KVPORT_RETURN_IF_ERROR(protocol::DecodeResponse(frame.header, frame.descriptor, limits_, &resp));
  KVPORT_RETURN_IF_ERROR(protocol::CheckMgetResponse(m, resp));
  std::vector<GetItem> out(resp.results.size());
  size_t offset = 0;
  for (size_t i = 0; i < resp.results.size(); ++i) {
    out[i].status = resp.results[i].status;
    out[i].meta = std::string(resp.results[i].meta);
    out[i].value_length = resp.results[i].value_length;
    if (resp.CarriesPayload(i)) {
      if (offset + out[i].value_length > frame.payload.size()) {
        return Status::Corruption("MGET payload shorter than its value lengths");
      }
      out[i].value = frame.payload.substr(offset, out[i].value_length);
      offset += out[i].value_length;
    }
  }
  if (offset != frame.payload.size()) return Status::Corruption("MGET payload has extra bytes");
  return out;
}

Result<std::vector<protocol::ExistResult>> TestClient::Mexist(std::string_view ns,
                                                              const std::vector<std::string>& keys,
                                                              bool any_namespace) {
  protocol::MexistRequest m;
  m.ns = ns;
  m.any_namespace = any_namespace;
  for (const std::string& key : keys)
    m.keys.push_back(key);
  protocol::EncodedFrame req;
  KVPORT_RETURN_IF_ERROR(protocol::EncodeRequest(next_request_id_++, m, limits_, &req, version_));
  KVPORT_ASSIGN_OR_RETURN(RawFrame frame, Call(req, protocol::Opcode::kMexist));
  protocol::MexistResponse resp;
  KVPORT_RETURN_IF_ERROR(protocol::DecodeResponse(frame.header, frame.descriptor, limits_, &resp));
  return resp.results;
}

Result<std::vector<StatusCode>> TestClient::Mdel(std::string_view ns,
                                                 const std::vector<std::string>& keys,
                                                 bool any_namespace) {
  protocol::MdelRequest m;
  m.ns = ns;
  m.any_namespace = any_namespace;
  for (const std::string& key : keys)
    m.keys.push_back(key);
  protocol::EncodedFrame req;
  KVPORT_RETURN_IF_ERROR(protocol::EncodeRequest(next_request_id_++, m, limits_, &req, version_));
  KVPORT_ASSIGN_OR_RETURN(RawFrame frame, Call(req, protocol::Opcode::kMdel));
  protocol::MdelResponse resp;
  KVPORT_RETURN_IF_ERROR(protocol::DecodeResponse(frame.header, frame.descriptor, limits_, &resp));
  return resp.statuses;
}

Result<std::vector<std::string>> TestClient::List(std::string_view ns, uint64_t cursor,
                                                  uint32_t max_keys, uint64_t* next_cursor) {
  protocol::ListRequest m;
  m.ns = ns;
  m.cursor = cursor;
  m.max_keys = max_keys;
  protocol::EncodedFrame req;
  KVPORT_RETURN_IF_ERROR(protocol::EncodeRequest(next_request_id_++, m, limits_, &req, version_));
  KVPORT_ASSIGN_OR_RETURN(RawFrame frame, Call(req, protocol::Opcode::kList));
  protocol::ListResponse resp;
  KVPORT_RETURN_IF_ERROR(protocol::DecodeResponse(frame.header, frame.descriptor, limits_, &resp));
  *next_cursor = resp.next_cursor;
  return std::vector<std::string>(resp.keys.begin(), resp.keys.end());
}

Result<std::vector<std::string>> TestClient::ListAll(std::string_view ns, uint32_t page) {
  std::vector<std::string> all;
  uint64_t cursor = 0;
  for (int pages = 0; pages < 100000; ++pages) {
    uint64_t next = 0;
    KVPORT_ASSIGN_OR_RETURN(std::vector<std::string> keys, List(ns, cursor, page, &next));
    all.insert(all.end(), keys.begin(), keys.end());
    if (next == 0) return all;
    cursor = next;
  }
  return Status::Internal("LIST never finished");
}

Result<ServerStats> TestClient::Stats() {
  protocol::EncodedFrame req;
  KVPORT_RETURN_IF_ERROR(protocol::EncodeRequest(next_request_id_++, protocol::StatsRequest{},
                                                 limits_, &req, version_));
  KVPORT_ASSIGN_OR_RETURN(RawFrame frame, Call(req, protocol::Opcode::kStats));
  protocol::StatsResponse resp;
  KVPORT_RETURN_IF_ERROR(protocol::DecodeResponse(frame.header, frame.descriptor, limits_, &resp));
  ServerStats stats;
  for (const auto& c : resp.counters)
    stats.counters.emplace_back(std::string(c.name), c.value);
  for (const auto& n : resp.namespaces) {
    stats.namespaces.push_back({std::string(n.ns), n.objects, n.bytes});
  }
  return stats;
}

}  // namespace kvport::testing
