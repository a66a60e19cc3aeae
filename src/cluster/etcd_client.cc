// SPDX-License-Identifier: Apache-2.0
// EtcdClient over etcd's v3 JSON gateway (see etcd_client.h for why the gateway).
//
// Gateway conventions this file relies on (etcd 3.4+): every call is POST /v3/<service>/<method>
// with a JSON body; bytes (keys, values) are base64; int64 fields are JSON strings and fields
// equal to their default (0, false, "") are left out; a failed call answers a non-2xx status with
// {"error"|"message": ..., "code": <gRPC code>}; streaming calls (watch, lease keepalive) answer
// one JSON object per line, each {"result": {...}} or {"error": {...}}.
#include "cluster/etcd_client.h"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>

#include "net/host_port.h"

namespace kvport::cluster {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// gRPC status codes the gateway reports in "code".
// The most bytes kept of one answer or one watch message. etcd's own request limit is 1.5 MiB
// and a cluster's node records are a few hundred bytes each, so this holds the records of tens of
// thousands of nodes; an etcd (or something posing as one) that sends more cannot make a node or
// a client grow without bound.
constexpr size_t kMaxAnswerBytes = size_t{64} << 20;

constexpr int kGrpcInvalidArgument = 3;
constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcNotFound = 5;
constexpr int kGrpcUnavailable = 14;

constexpr char kBase64Alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t n = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) |
                 uint32_t(uint8_t(in[i + 2]));
    out += kBase64Alphabet[(n >> 18) & 63];
    out += kBase64Alphabet[(n >> 12) & 63];
    out += kBase64Alphabet[(n >> 6) & 63];
    out += kBase64Alphabet[n & 63];
  }
  size_t rest = in.size() - i;
  if (rest > 0) {
    uint32_t n = uint32_t(uint8_t(in[i])) << 16;
    if (rest == 2) n |= uint32_t(uint8_t(in[i + 1])) << 8;
    out += kBase64Alphabet[(n >> 18) & 63];
    out += kBase64Alphabet[(n >> 12) & 63];
    out += rest == 2 ? kBase64Alphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Standard alphabet, padding optional (etcd always pads; being lenient costs nothing).
std::optional<std::string> Base64Decode(std::string_view in) {
  static const std::array<int8_t, 256> kValues = [] {
    std::array<int8_t, 256> values{};
    values.fill(-1);
    for (int i = 0; i < 64; ++i)
      values[uint8_t(kBase64Alphabet[i])] = int8_t(i);
    return values;
  }();
  while (!in.empty() && in.back() == '=')
    in.remove_suffix(1);
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t bits = 0;
  int count = 0;
  for (char c : in) {
    int8_t v = kValues[uint8_t(c)];
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | uint32_t(v);
    if (++count == 4) {
      out += char((bits >> 16) & 0xff);
      out += char((bits >> 8) & 0xff);
      out += char(bits & 0xff);
      bits = 0;
      count = 0;
    }
  }
  if (count == 2) out += char((bits >> 4) & 0xff);
  if (count == 3) {
    out += char((bits >> 10) & 0xff);
    out += char((bits >> 2) & 0xff);
  }
  return out;
}

// The first key after every key starting with `prefix`: etcd's range_end for a prefix. An
// all-0xff (or empty) prefix has none: "\0" means "to the end of the keyspace".
std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (uint8_t(end.back()) < 0xff) {
      end.back() = char(uint8_t(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

// An int64 field: a JSON string in the gateway's encoding, a number from other encoders, absent
// when 0.
Result<int64_t> Int64Field(const json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return int64_t{0};
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string& text = it->get_ref<const std::string&>();
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (!text.empty() && ec == std::errc() && end == text.data() + text.size()) return value;
  }
  return Status::Corruption(std::string("etcd answered a non-integer '") + field + "'");
}

Result<std::string> BytesField(const json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return std::string();
  if (!it->is_string())
    return Status::Corruption(std::string("etcd's '") + field + "' not a string");
  auto decoded = Base64Decode(it->get_ref<const std::string&>());
  if (!decoded) return Status::Corruption(std::string("etcd's '") + field + "' is not base64");
  return std::move(*decoded);
}

Result<EtcdKeyValue> ParseKeyValue(const json& kv) {
  if (!kv.is_object()) return Status::Corruption("etcd answered a key-value that is not an object");
  EtcdKeyValue out;
  KVPORT_ASSIGN_OR_RETURN(out.key, BytesField(kv, "key"));
  KVPORT_ASSIGN_OR_RETURN(out.value, BytesField(kv, "value"));
  KVPORT_ASSIGN_OR_RETURN(out.lease, Int64Field(kv, "lease"));
  KVPORT_ASSIGN_OR_RETURN(out.mod_revision, Int64Field(kv, "mod_revision"));
  return out;
}

// The revision in a response's header.
Result<int64_t> HeaderRevision(const json& response) {
  auto it = response.find("header");
  if (it == response.end() || !it->is_object()) return int64_t{0};
  return Int64Field(*it, "revision");
}

// An etcd error answer ({"error": "...", "message": "...", "code": N}, or streaming's
// {"error": {"grpc_code": N, "message": "..."}}) as a Status. `retry_elsewhere` says whether
// another endpoint might do better (this member has no leader, or timed out).
Status ErrorStatus(const json& error_body, std::string_view what, bool* retry_elsewhere) {
  const json* body = &error_body;
  if (auto it = error_body.find("error"); it != error_body.end() && it->is_object()) body = &*it;
  int code = -1;
  for (const char* field : {"code", "grpc_code"}) {
    if (auto it = body->find(field); it != body->end() && it->is_number_integer()) {
      code = it->get<int>();
    }
  }
  std::string message;
  for (const char* field : {"message", "error"}) {
    if (auto it = body->find(field); it != body->end() && it->is_string()) {
      message = it->get<std::string>();
      break;
    }
  }
  if (message.empty()) message = body->dump(-1, ' ', false, json::error_handler_t::replace);
  std::string text = std::string(what) + ": " + message;
  if (retry_elsewhere) *retry_elsewhere = code == kGrpcUnavailable || code == kGrpcDeadlineExceeded;
  switch (code) {
    case kGrpcNotFound:
      return Status::NotFound(std::move(text));
    case kGrpcInvalidArgument:
      return Status::InvalidArgument(std::move(text));
    case kGrpcDeadlineExceeded:
      return Status::Timeout(std::move(text));
    default:
      return Status::Unavailable(std::move(text));
  }
}

std::string FormatEndpoint(const net::HostPort& endpoint) {
  return endpoint.ToString();
}

// Milliseconds left until `deadline`, at least 1 (httplib treats 0 as "no wait at all").
std::chrono::milliseconds Left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

class GatewayClient final : public EtcdClient {
 public:
  GatewayClient(std::vector<net::HostPort> endpoints, std::chrono::milliseconds timeout)
      : endpoints_(std::move(endpoints)), timeout_(timeout), kept_(endpoints_.size()) {}

  Result<int64_t> GrantLease(std::chrono::seconds ttl) override {
    KVPORT_ASSIGN_OR_RETURN(
        json answer,
        Call("/v3/lease/grant", {{"TTL", std::to_string(ttl.count())}}, "etcd lease grant"));
    KVPORT_ASSIGN_OR_RETURN(int64_t id, Int64Field(answer, "ID"));
    if (id == 0) {
      return Status::Unavailable("etcd lease grant: " + Describe() + " answered no lease id");
    }
    return id;
  }

  Result<int64_t> KeepAlive(int64_t lease) override {
    // A streaming call: the gateway answers one {"result": ...} per request line, then ends the
    // stream when the request body does.
    std::string what = "etcd lease keepalive of " + std::to_string(lease);
    KVPORT_ASSIGN_OR_RETURN(json answer,
                            Call("/v3/lease/keepalive", {{"ID", std::to_string(lease)}}, what));
    const json* result = &answer;
    if (auto it = answer.find("result"); it != answer.end() && it->is_object()) result = &*it;
    if (auto it = answer.find("error"); it != answer.end()) {
      return ErrorStatus(answer, what, nullptr);
    }
    KVPORT_ASSIGN_OR_RETURN(int64_t ttl, Int64Field(*result, "TTL"));
    // etcd answers TTL 0 (left out) for a lease it no longer has.
    if (ttl <= 0) return Status::NotFound(what + ": the lease is gone (lapsed or revoked)");
    return ttl;
  }

  Status RevokeLease(int64_t lease) override {
    return Call("/v3/lease/revoke", {{"ID", std::to_string(lease)}},
                "etcd lease revoke of " + std::to_string(lease))
        .status();
  }

  Result<EtcdLeaseTtl> TimeToLive(int64_t lease) override {
    KVPORT_ASSIGN_OR_RETURN(json answer,
                            Call("/v3/lease/timetolive", {{"ID", std::to_string(lease)}},
                                 "etcd lease timetolive of " + std::to_string(lease)));
    EtcdLeaseTtl out;
    KVPORT_ASSIGN_OR_RETURN(out.ttl_seconds, Int64Field(answer, "TTL"));
    KVPORT_ASSIGN_OR_RETURN(out.granted_ttl_seconds, Int64Field(answer, "grantedTTL"));
    if (out.ttl_seconds < 0) out.ttl_seconds = -1;
    return out;
  }

  Status Put(std::string_view key, std::string_view value, int64_t lease) override {
    json body = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
    if (lease != 0) body["lease"] = std::to_string(lease);
    return Call("/v3/kv/put", body, "etcd put of '" + Printable(key) + "'").status();
  }

  Status Delete(std::string_view key) override {
    return Call("/v3/kv/deleterange", {{"key", Base64Encode(key)}},
                "etcd delete of '" + Printable(key) + "'")
        .status();
  }

  Result<EtcdRange> RangePrefix(std::string_view prefix) override {
    std::string what = "etcd range of '" + Printable(prefix) + "'";
    KVPORT_ASSIGN_OR_RETURN(json answer, Call("/v3/kv/range",
                                              {{"key", Base64Encode(prefix)},
                                               {"range_end", Base64Encode(PrefixEnd(prefix))}},
                                              what));
    EtcdRange out;
    KVPORT_ASSIGN_OR_RETURN(out.revision, HeaderRevision(answer));
    if (auto it = answer.find("kvs"); it != answer.end()) {
      if (!it->is_array()) return Status::Corruption(what + ": 'kvs' is not an array");
      for (const json& kv : *it) {
        KVPORT_ASSIGN_OR_RETURN(EtcdKeyValue parsed, ParseKeyValue(kv));
        out.kvs.push_back(std::move(parsed));
      }
    }
    return out;
  }

  Status Watch(std::string_view prefix, int64_t start_revision,
               const std::function<void(const std::vector<EtcdEvent>&)>& on_events,
               const std::atomic<bool>& stop, std::chrono::milliseconds poll_interval) override;

  void CancelWatch() override {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watch_canceled_ = true;
    if (watching_ != nullptr) watching_->stop();  // httplib: may be called from another thread
  }
  bool watch_canceled() {
    std::lock_guard<std::mutex> lock(watch_mu_);
    return watch_canceled_;
  }

  std::string Describe() const override {
    std::string out;
    for (const auto& endpoint : endpoints_) {
      if (!out.empty()) out += ',';
      out += FormatEndpoint(endpoint);
    }
    return out;
  }

 private:
  // One HTTP exchange with one endpoint: the outcome as the failover loop needs it.
  struct Exchange {
    bool reached = false;    // an HTTP answer came back (else: connect/read/write failed)
    int status = 0;          // its HTTP status
    std::string body;        // its body
    std::string failure;     // why it was not reached
    bool silent = false;     // connected, but nothing came back before the read timeout
    bool too_large = false;  // the answer passed kMaxAnswerBytes (and was cut off)
    bool clean = false;      // the exchange ended as HTTP says: the connection can be reused
  };

  static std::string Describe(httplib::Error error) {
    switch (error) {
      case httplib::Error::Connection:
        return "cannot connect";
      case httplib::Error::ConnectionTimeout:
        return "connect timed out";
      case httplib::Error::Read:
        return "no answer (read failed or timed out)";
      case httplib::Error::Write:
        return "sending the request failed";
      default:
        return httplib::to_string(error);
    }
  }

  static std::string Printable(std::string_view key) {
    std::string out;
    for (char c : key) {
      if (uint8_t(c) >= 0x20 && uint8_t(c) < 0x7f) {
        out += c;
      } else {
        out += '?';
      }
    }
    return out;
  }

  // A unary call with failover: the endpoint that answered last first, then the others in
  // order, all within one request timeout. The answer's JSON on a 2xx; the etcd error as a Status
  // otherwise; Unavailable naming every endpoint and its failure when none answered.
  Result<json> Call(const char* path, const json& body, const std::string& what) {
    std::string payload;
    try {
      payload = body.dump(-1, ' ', false, json::error_handler_t::replace);
    } catch (const std::exception& e) {
      return Status::Internal(what + ": " + e.what());
    }
    const Clock::time_point deadline = Clock::now() + timeout_;
    const size_t first = preferred_.load(std::memory_order_relaxed);
    std::string failures;
    for (size_t attempt = 0; attempt < endpoints_.size(); ++attempt) {
      const size_t index = (first + attempt) % endpoints_.size();
      const net::HostPort& endpoint = endpoints_[index];
      if (attempt > 0 && Clock::now() >= deadline) {
        failures += "; " + FormatEndpoint(endpoint) + ": not tried (request timeout spent)";
        continue;
      }
      // A dead endpoint that refuses connections costs nothing, but one that swallows them
      // would use up the whole timeout: each remaining endpoint gets a fair share to connect.
      const auto connect_budget = Left(deadline) / int64_t(endpoints_.size() - attempt);
      Exchange exchange =
          SendUnary(index, path, payload, std::max(connect_budget, std::chrono::milliseconds(1)),
                    Left(deadline));
      if (!exchange.reached) {
        failures +=
            (failures.empty() ? "" : "; ") + FormatEndpoint(endpoint) + ": " + exchange.failure;
        continue;
      }
      json answer = json::parse(exchange.body, nullptr, /*allow_exceptions=*/false);
      if (exchange.status / 100 != 2) {
        bool retry_elsewhere = false;
        Status status =
            answer.is_discarded()
                ? Status::Unavailable(what + ": " + FormatEndpoint(endpoint) + " answered HTTP " +
                                      std::to_string(exchange.status))
                : ErrorStatus(answer, what, &retry_elsewhere);
        if (retry_elsewhere || answer.is_discarded()) {
          failures +=
              (failures.empty() ? "" : "; ") + FormatEndpoint(endpoint) + ": " + status.message();
          continue;
        }
        preferred_.store(index, std::memory_order_relaxed);
        return status;
      }
      // Streaming answers come one object per line; a unary call's is the first (and only).
      if (answer.is_discarded()) {
        size_t newline = exchange.body.find('\n');
        if (newline != std::string::npos) {
          answer = json::parse(exchange.body.substr(0, newline), nullptr, false);
        }
      }
      if (answer.is_discarded() || !answer.is_object()) {
        return Status::Corruption(what + ": " + FormatEndpoint(endpoint) +
                                  " answered something that is not a JSON object");
      }
      preferred_.store(index, std::memory_order_relaxed);
      return answer;
    }
    return Status::Unavailable(what + ": no etcd endpoint answered within " +
                               std::to_string(timeout_.count()) + " ms (" + failures + ")");
  }

  // A unary call's exchange on the connection kept to endpoint `index`: opened at the first call
  // and kept alive for the next ones (lease renewals every few seconds, the registration's and
  // the clients' reads), one call at a time. Any exchange that did not end cleanly drops it, so
  // the next call starts on a fresh connection.
  Exchange SendUnary(size_t index, const char* path, const std::string& payload,
                     std::chrono::milliseconds connect_timeout,
                     std::chrono::milliseconds read_timeout) {
    KeptConnection& kept = kept_[index];
    std::lock_guard<std::mutex> lock(kept.mu);
    if (kept.client == nullptr) {
      const net::HostPort& endpoint = endpoints_[index];
      kept.client = std::make_unique<httplib::Client>(endpoint.host, endpoint.port);
      kept.client->set_keep_alive(true);
      // A request is written as headers, then body: with Nagle's algorithm on, the body of every
      // call after the first waits for the delayed ACK of the headers (40 ms).
      kept.client->set_tcp_nodelay(true);
    }
    Exchange out = Send(*kept.client, path, payload, connect_timeout, read_timeout, nullptr);
    if (!out.clean) kept.client.reset();
    return out;
  }

  // A watch stream's exchange, on a connection of its own that CancelWatch can close: the body
  // is streamed to `receiver` as it arrives (returning false aborts).
  Exchange SendStream(const net::HostPort& endpoint, const char* path, const std::string& payload,
                      std::chrono::milliseconds connect_timeout,
                      std::chrono::milliseconds read_timeout,
                      const std::function<bool(const char*, size_t)>& receiver) {
    try {
      httplib::Client client(endpoint.host, endpoint.port);
      WatchRegistration registration(this, &client);
      if (registration.canceled()) {
        Exchange out;
        out.failure = "the watch was canceled";
        return out;
      }
      client.set_keep_alive(false);
      client.set_tcp_nodelay(true);  // the create request leaves at once (see SendUnary)
      return Send(client, path, payload, connect_timeout, read_timeout, &receiver);
    } catch (const std::exception& e) {
      Exchange out;
      out.failure = e.what();
      return out;
    }
  }

  // POSTs `payload` to `path` on `client`'s endpoint. With `receiver`, the body is streamed to it
  // as it arrives (returning false aborts) instead of collected.
  Exchange Send(httplib::Client& client, const char* path, const std::string& payload,
                std::chrono::milliseconds connect_timeout, std::chrono::milliseconds read_timeout,
                const std::function<bool(const char*, size_t)>* receiver) {
    Exchange out;
    try {
      client.set_connection_timeout(connect_timeout);
      client.set_read_timeout(read_timeout);
      client.set_write_timeout(read_timeout);
      httplib::Request request;
      request.method = "POST";
      request.path = path;
      request.body = payload;
      request.set_header("Content-Type", "application/json");
      request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
        if (receiver) return (*receiver)(data, length);
        if (out.body.size() + length > kMaxAnswerBytes) {
          out.too_large = true;
          return false;
        }
        out.body.append(data, length);
        return true;
      };
      httplib::Response response;
      httplib::Error error = httplib::Error::Success;
      if (client.send(request, response, error)) {
        out.reached = true;
        out.clean = true;
        out.status = response.status;
      } else {
        out.failure = Describe(error);
        out.status = response.status;
        out.silent = error == httplib::Error::Read && response.status <= 0;
        // The gateway sends its error answers chunked with an HTTP trailer, which cpp-httplib
        // 0.11 cannot parse: it reports a read error after the whole body has arrived. A status
        // line and a body mean etcd answered; a body cut short fails to parse as JSON later.
        if (error == httplib::Error::Read && response.status > 0 && !out.body.empty()) {
          out.reached = true;
        }
      }
      if (out.too_large) {
        out.reached = false;
        out.clean = false;
        out.failure =
            "answered more than " + std::to_string(kMaxAnswerBytes >> 20) + " MiB (refused)";
      }
    } catch (const std::exception& e) {
      out.reached = false;
      out.failure = e.what();
    }
    return out;
  }

  // Makes the watch stream's client known to CancelWatch for the scope of one Send.
  class WatchRegistration {
   public:
    WatchRegistration(GatewayClient* owner, httplib::Client* client) : owner_(owner) {
      if (owner_ == nullptr) return;
      std::lock_guard<std::mutex> lock(owner_->watch_mu_);
      canceled_ = owner_->watch_canceled_;
      if (!canceled_) owner_->watching_ = client;
    }
    ~WatchRegistration() {
      if (owner_ == nullptr) return;
      std::lock_guard<std::mutex> lock(owner_->watch_mu_);
      owner_->watching_ = nullptr;
    }
    bool canceled() const { return canceled_; }

   private:
    GatewayClient* const owner_;
    bool canceled_ = false;
  };

  // The connection kept to one endpoint for unary calls (a plain std::mutex: httplib's client
  // is not annotated data of ours).
  struct KeptConnection {
    std::mutex mu;
    std::unique_ptr<httplib::Client> client;  // null until the first call, or after a failure
  };

  const std::vector<net::HostPort> endpoints_;
  const std::chrono::milliseconds timeout_;
  std::vector<KeptConnection> kept_;  // one per endpoint
  std::atomic<size_t> preferred_{0};  // the endpoint that answered last
  // The watch stream open now, for CancelWatch (a plain std::mutex: httplib's client is not
  // annotated data of ours).
  std::mutex watch_mu_;
  httplib::Client* watching_ = nullptr;
  bool watch_canceled_ = false;
};

// One watch stream at a time, on one endpoint, reopened (from the revision after the last event
// seen) whenever it ends without an answer to act on: that is how `stop` is noticed when etcd
// is quiet (the stream is read with `poll_interval` as its timeout), and how a member that
// restarted is picked up again.
Status GatewayClient::Watch(std::string_view prefix, int64_t start_revision,
                            const std::function<void(const std::vector<EtcdEvent>&)>& on_events,
                            const std::atomic<bool>& stop,
                            std::chrono::milliseconds poll_interval) {
  const std::string what = "etcd watch of '" + Printable(prefix) + "'";
  const std::string key = Base64Encode(prefix);
  const std::string range_end = Base64Encode(PrefixEnd(prefix));
  int64_t next_revision = std::max<int64_t>(start_revision, 0);
  // Until when an endpoint that takes the connection but sends nothing within the poll interval
  // counts as slow rather than gone: one request timeout after the last stream etcd created.
  Clock::time_point slow_ok_until = Clock::now() + timeout_;

  while (!stop.load()) {
    json create = {{"create_request",
                    {{"key", key},
                     {"range_end", range_end},
                     {"start_revision", std::to_string(next_revision)}}}};
    const std::string payload = create.dump();

    // What this stream ended with, when it is not simply to be reopened.
    std::optional<Status> outcome;
    bool created = false;
    std::string pending;  // bytes of a message not yet ended by '\n'
    // Every message is type-checked before use, but a JSON access that still throws must end
    // this stream as Corruption, never escape through httplib.
    auto handle = [&](const char* data, size_t length) -> bool {
      if (pending.size() + length > kMaxAnswerBytes) {
        outcome = Status::TooLarge(what + ": etcd sent a message of more than " +
                                   std::to_string(kMaxAnswerBytes >> 20) + " MiB");
        return false;
      }
      // Only the new bytes can end the message: looking at the old ones again would make a long
      // message cost quadratic time.
      size_t from = pending.size();
      pending.append(data, length);
      size_t newline;
      while ((newline = pending.find('\n', from)) != std::string::npos) {
        std::string line = pending.substr(0, newline);
        pending.erase(0, newline + 1);
        from = 0;  // what is left came with this chunk and is not looked at yet
        if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
        json message = json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (message.is_discarded() || !message.is_object()) {
          outcome = Status::Corruption(what + ": etcd sent a message that is not JSON");
          return false;
        }
        if (message.contains("error")) {
          outcome = ErrorStatus(message, what, nullptr);
          if (outcome->code() != StatusCode::kNotFound) {
            outcome = Status::Unavailable(outcome->message());
          }
          return false;
        }
        auto result_it = message.find("result");
        if (result_it == message.end() || !result_it->is_object()) continue;
        const json& result = *result_it;
        auto compact = Int64Field(result, "compact_revision");
        if (compact.ok() && *compact > 0) {
          outcome = Status::NotFound(what + ": revision " + std::to_string(next_revision) +
                                     " was compacted (etcd keeps from " + std::to_string(*compact) +
                                     "): re-read and watch again");
          return false;
        }
        if (result.value("canceled", false)) {
          std::string reason = result.value("cancel_reason", std::string("no reason given"));
          outcome = Status::Unavailable(what + ": etcd canceled the watch: " + reason);
          return false;
        }
        if (result.value("created", false)) {
          created = true;
          // A watch "from now" (revision 0) is pinned to the revision it was created at, so a
          // reopen after a quiet poll misses nothing made in between.
          if (next_revision == 0) {
            auto revision = HeaderRevision(result);
            if (revision.ok() && *revision > 0) next_revision = *revision + 1;
          }
        }
        auto events_it = result.find("events");
        if (events_it != result.end() && events_it->is_array() && !events_it->empty()) {
          std::vector<EtcdEvent> events;
          for (const json& event : *events_it) {
            EtcdEvent parsed;
            parsed.type = event.value("type", std::string("PUT")) == "DELETE"
                              ? EtcdEvent::Type::kDelete
                              : EtcdEvent::Type::kPut;
            auto kv_it = event.find("kv");
            if (kv_it == event.end()) continue;
            auto kv = ParseKeyValue(*kv_it);
            if (!kv.ok()) {
              outcome = kv.status().WithContext(what);
              return false;
            }
            parsed.kv = std::move(kv).value();
            next_revision = std::max(next_revision, parsed.kv.mod_revision + 1);
            events.push_back(std::move(parsed));
          }
          if (!events.empty()) on_events(events);
        }
        if (stop.load()) return false;
      }
      return !stop.load();
    };
    std::function<bool(const char*, size_t)> receiver = [&](const char* data, size_t length) {
      try {
        return handle(data, length);
      } catch (const std::exception& e) {
        outcome = Status::Corruption(what + ": etcd sent an unexpected message: " + e.what());
        return false;
      }
    };

    // Find an endpoint that takes the watch. Connecting is bounded by the request timeout, each
    // endpoint in turn; reading by the poll interval.
    const Clock::time_point deadline = Clock::now() + timeout_;
    const size_t first = preferred_.load(std::memory_order_relaxed);
    std::string failures;
    bool streamed = false;
    bool only_slow = true;
    for (size_t attempt = 0; attempt < endpoints_.size() && !stop.load(); ++attempt) {
      const size_t index = (first + attempt) % endpoints_.size();
      const net::HostPort& endpoint = endpoints_[index];
      created = false;
      pending.clear();
      const auto connect_budget = Left(deadline) / int64_t(endpoints_.size() - attempt);
      Exchange exchange = SendStream(endpoint, "/v3/watch", payload,
                                     std::max(connect_budget, std::chrono::milliseconds(1)),
                                     poll_interval, receiver);
      if (outcome) break;  // etcd said something final on this stream
      if (created) {
        // The stream was open and ended (read timeout while quiet, or the stop flag): reopen.
        preferred_.store(index, std::memory_order_relaxed);
        streamed = true;
        slow_ok_until = Clock::now() + timeout_;
        break;
      }
      only_slow = only_slow && exchange.silent;
      if (exchange.status > 0 && exchange.status / 100 != 2) {
        failures += (failures.empty() ? "" : "; ") + FormatEndpoint(endpoint) + ": HTTP " +
                    std::to_string(exchange.status);
      } else {
        failures += (failures.empty() ? "" : "; ") + FormatEndpoint(endpoint) + ": " +
                    (exchange.failure.empty() ? "the stream ended before the watch was created"
                                              : exchange.failure);
      }
    }
    if (stop.load() || watch_canceled()) break;  // a canceled stream ends like a stopped one
    if (outcome) return *outcome;
    // Every endpoint connected but none created the watch within the poll interval (a loaded
    // etcd): ask again, for up to one request timeout.
    if (!streamed && only_slow && Clock::now() < slow_ok_until) continue;
    if (!streamed) {
      return Status::Unavailable(what + ": no etcd endpoint took the watch (" + failures + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<EtcdClient>> EtcdClient::Open(const std::vector<std::string>& endpoints,
                                                     std::chrono::milliseconds request_timeout) {
  if (endpoints.empty()) return Status::InvalidArgument("etcd: no endpoints given");
  if (request_timeout.count() <= 0) {
    return Status::InvalidArgument("etcd: the request timeout must be positive");
  }
  std::vector<net::HostPort> parsed;
  for (const std::string& text : endpoints) {
    std::string_view view = text;
    // Accept etcd's own URL spelling of a client endpoint, http only (no TLS here).
    if (view.starts_with("http://")) view.remove_prefix(7);
    if (view.ends_with("/")) view.remove_suffix(1);
    auto endpoint = net::ParseHostPort(view, "");
    if (!endpoint.ok()) {
      return Status::InvalidArgument("etcd endpoint '" + text +
                                     "': " + endpoint.status().message());
    }
    if (endpoint->host.empty() || endpoint->port == 0) {
      return Status::InvalidArgument("etcd endpoint '" + text +
                                     "': expected HOST:PORT with a host and a nonzero port");
    }
    parsed.push_back(std::move(endpoint).value());
  }
  return std::unique_ptr<EtcdClient>(new GatewayClient(std::move(parsed), request_timeout));
}

std::string EtcdNodesPrefix(std::string_view cluster) {
  return "/kvport/clusters/" + std::string(cluster) + "/nodes/";
}

std::string EtcdNodeKey(std::string_view cluster, std::string_view id) {
  return EtcdNodesPrefix(cluster) + std::string(id);
}

}  // namespace kvport::cluster
