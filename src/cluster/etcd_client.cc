// SPDX-License-Identifier: Apache-2.0
// EtcdClient over etcd's v3 JSON gateway (see etcd_client.h for why the gateway).
//
// Gateway conventions this file relies on (etcd 3.4+): every call is POST /v3/<service>/<method>
// with a JSON body (encoded as etcd_codec.h says); a failed call answers a non-2xx status with
// an error object; streaming calls (watch, lease keepalive) answer one JSON object per line,
// each {"result": {...}} or {"error": {...}}; authentication is a token from
// /v3/auth/authenticate sent as the Authorization header.
#include "cluster/etcd_client.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "cluster/etcd_codec.h"
#include "cluster/etcd_http.h"
#include "net/host_port.h"
#include "net/tls.h"

namespace kvport::cluster {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string FormatEndpoint(const net::HostPort& endpoint) {
  return endpoint.ToString();
}

// How often a watch waiting for etcd looks at its stop flag.
constexpr std::chrono::milliseconds kStopCheck{200};

class GatewayClient final : public EtcdClient {
 public:
  GatewayClient(std::vector<net::HostPort> endpoints, std::chrono::milliseconds timeout,
                std::shared_ptr<net::TlsContext> tls, std::string user, std::string password)
      : endpoints_(std::move(endpoints)),
        timeout_(timeout),
        tls_(std::move(tls)),
        user_(std::move(user)),
        password_(std::move(password)),
        kept_(endpoints_.size()),
        cancel_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~GatewayClient() override {
    if (cancel_fd_ >= 0) ::close(cancel_fd_);
  }

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
               const std::atomic<bool>& stop, std::chrono::milliseconds max_silence) override;

  void CancelWatch() override {
    watch_canceled_.store(true);
    const uint64_t one = 1;
    // Every watch connection polls this descriptor too: they all wake now, and later ones
    // find it readable at once.
    if (cancel_fd_ >= 0) (void)!::write(cancel_fd_, &one, sizeof(one));
  }

  EtcdWatchStats watch_stats() const override {
    EtcdWatchStats out;
    out.streams_opened = streams_opened_.load();
    out.progress_notifications = progress_notifications_.load();
    out.silent_reopens = silent_reopens_.load();
    return out;
  }

  std::string Describe() const override {
    std::string out;
    for (const auto& endpoint : endpoints_) {
      if (!out.empty()) out += ',';
      if (tls_) out += "https://";
      out += FormatEndpoint(endpoint);
    }
    return out;
  }

 private:
  // One HTTP exchange with one endpoint: the outcome as the failover loop needs it.
  struct Exchange {
    bool reached = false;  // an HTTP answer came back (else: connect/read/write failed)
    bool denied = false;   // etcd's certificate (or ours) was refused in the TLS handshake
    int status = 0;        // its HTTP status
    std::string body;      // its body
    std::string failure;   // why it was not reached
  };

  // The token to send ("" without authentication, or while etcd has auth off), authenticating
  // first when there is none; `generation` identifies it for InvalidateToken.
  Result<std::string> Token(uint64_t* generation) {
    std::lock_guard<std::mutex> lock(auth_mu_);
    *generation = token_generation_;
    if (user_.empty() || have_token_) return token_;
    json body = {{"name", user_}, {"password", password_}};
    const std::string what = "etcd authentication as user '" + user_ + "'";
    Result<json> answer = CallOnce("/v3/auth/authenticate", body.dump(), what, "");
    if (!answer.ok()) {
      const std::string& m = answer.status().message();
      if (m.find("authentication is not enabled") != std::string::npos) {
        // etcd runs without auth: calls go without a token until it asks for one.
        token_.clear();
        have_token_ = true;
        return token_;
      }
      if (m.find("authentication failed") != std::string::npos ||
          answer.status().code() == StatusCode::kPermissionDenied ||
          answer.status().code() == StatusCode::kInvalidArgument) {
        return Status::PermissionDenied(m + " (check etcd_user and etcd_password_file)");
      }
      return answer.status();
    }
    auto it = answer->find("token");
    if (it == answer->end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
      return Status::Unavailable(what + ": etcd answered no token");
    }
    token_ = it->get<std::string>();
    have_token_ = true;
    ++token_generation_;
    *generation = token_generation_;
    return token_;
  }

  // Forgets the token etcd refused, unless another thread already replaced it.
  void InvalidateToken(uint64_t generation) {
    std::lock_guard<std::mutex> lock(auth_mu_);
    if (generation == token_generation_) {
      have_token_ = false;
      token_.clear();
    }
  }

  // A unary call with authentication: when etcd refuses the token (it expired, or etcd
  // restarted and forgot it), authenticates again once and retries.
  Result<json> Call(const char* path, const json& body, const std::string& what) {
    std::string payload;
    try {
      payload = body.dump(-1, ' ', false, json::error_handler_t::replace);
    } catch (const std::exception& e) {
      return Status::Internal(what + ": " + e.what());
    }
    for (int round = 0;; ++round) {
      uint64_t generation = 0;
      KVPORT_ASSIGN_OR_RETURN(std::string token, Token(&generation));
      Result<json> answer = CallOnce(path, payload, what, token);
      if (!answer.ok() && round == 0 && !user_.empty() && TokenRejected(answer.status())) {
        InvalidateToken(generation);
        continue;
      }
      if (!answer.ok() && user_.empty() &&
          answer.status().message().find("user name is empty") != std::string::npos) {
        return Status::PermissionDenied(answer.status().message() +
                                        " (etcd has authentication on: set etcd_user and "
                                        "etcd_password_file)");
      }
      return answer;
    }
  }

  // A unary call with failover: the endpoint that answered last first, then the others in
  // order, all within one request timeout. The answer's JSON on a 2xx; the etcd error as a Status
  // otherwise; Unavailable naming every endpoint and its failure when none answered.
  Result<json> CallOnce(const char* path, const std::string& payload, const std::string& what,
                        const std::string& token) {
    const Clock::time_point deadline = Clock::now() + timeout_;
    const size_t first = preferred_.load(std::memory_order_relaxed);
    std::string failures;
    bool all_denied = true;
    for (size_t attempt = 0; attempt < endpoints_.size(); ++attempt) {
      const size_t index = (first + attempt) % endpoints_.size();
      const net::HostPort& endpoint = endpoints_[index];
      if (attempt > 0 && Clock::now() >= deadline) {
        failures += "; " + FormatEndpoint(endpoint) + ": not tried (request timeout spent)";
        all_denied = false;
        continue;
      }
      // A dead endpoint that refuses connections costs nothing, but one that swallows them
      // would use up the whole timeout: each remaining endpoint gets a fair share to connect.
      const Clock::time_point connect_deadline =
          Clock::now() + (deadline - Clock::now()) / int64_t(endpoints_.size() - attempt);
      Exchange exchange = SendUnary(index, path, payload, token, connect_deadline, deadline);
      if (!exchange.reached) {
        all_denied = all_denied && exchange.denied;
        failures +=
            (failures.empty() ? "" : "; ") + FormatEndpoint(endpoint) + ": " + exchange.failure;
        continue;
      }
      all_denied = false;
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
    if (all_denied) {
      return Status::PermissionDenied(what + ": TLS refused by every etcd endpoint (" + failures +
                                      ")");
    }
    return Status::Unavailable(what + ": no etcd endpoint answered within " +
                               std::to_string(timeout_.count()) + " ms (" + failures + ")");
  }

  // A unary call's exchange on the connection kept to endpoint `index`: opened at the first call
  // and kept alive for the next ones (lease renewals every few seconds, the registration's and
  // the clients' reads), one call at a time. Any exchange that did not end cleanly drops it, so
  // the next call starts on a fresh connection; so does one etcd closed while it was idle.
  Exchange SendUnary(size_t index, const char* path, const std::string& payload,
                     const std::string& token, Clock::time_point connect_deadline,
                     Clock::time_point deadline) {
    KeptConnection& kept = kept_[index];
    std::lock_guard<std::mutex> lock(kept.mu);
    Exchange out;
    if (kept.connection != nullptr) {
      // An idle connection has nothing to read: readable means etcd closed it (or sent what no
      // request asked for).
      pollfd p{kept.connection->fd(), POLLIN, 0};
      if (::poll(&p, 1, 0) != 0) kept.connection.reset();
    }
    if (kept.connection == nullptr) {
      auto connected = EtcdHttpConnection::Connect(endpoints_[index], tls_.get(), connect_deadline,
                                                   -1, /*keepalive=*/false);
      if (!connected.ok()) {
        out.failure = connected.status().message();
        out.denied = connected.status().code() == StatusCode::kPermissionDenied;
        return out;
      }
      kept.connection = std::move(connected).value();
    }
    EtcdHttpConnection& connection = *kept.connection;
    Status sent = connection.SendPost(path, payload, token, deadline);
    Result<EtcdHttpHead> head =
        sent.ok() ? connection.ReadHead(deadline) : Result<EtcdHttpHead>(sent);
    if (!head.ok()) {
      out.failure = head.status().code() == StatusCode::kTimeout
                        ? "no answer within the request timeout"
                        : head.status().message();
      // TLS 1.3 checks the client's certificate after the handshake: etcd's refusal (etcd
      // --client-cert-auth, and no or a wrong client certificate) arrives as an alert at the
      // first read.
      if (tls_ && (out.failure.find("bad certificate") != std::string::npos ||
                   out.failure.find("certificate required") != std::string::npos ||
                   out.failure.find("unknown ca") != std::string::npos)) {
        out.denied = true;
        out.failure += " (etcd refused the client certificate: etcd_tls_cert_file)";
      }
      kept.connection.reset();
      return out;
    }
    bool too_large = false;
    Status read = connection.ReadBody(
        [&](const char* data, size_t size) {
          if (out.body.size() + size > kMaxAnswerBytes) {
            too_large = true;
            return false;
          }
          out.body.append(data, size);
          return true;
        },
        deadline, timeout_);
    if (too_large) {
      out.failure =
          "answered more than " + std::to_string(kMaxAnswerBytes >> 20) + " MiB (refused)";
      kept.connection.reset();
      return out;
    }
    if (!read.ok()) {
      out.failure = "the answer was cut short: " + read.message();
      kept.connection.reset();
      return out;
    }
    out.reached = true;
    out.status = head->status;
    if (!connection.reusable()) kept.connection.reset();
    return out;
  }

  // How one watch stream went.
  struct StreamRun {
    bool created = false;   // etcd created the watch on it
    bool silent = false;    // connected, but no answer (or no message) within the bound
    bool canceled = false;  // CancelWatch
    int http_status = 0;    // a non-2xx answer's status
    std::string failure;    // why it did not get created, or how it ended
  };

  StreamRun RunStream(size_t index, const std::string& payload, const std::string& token,
                      Clock::time_point connect_deadline, Clock::time_point create_deadline,
                      std::chrono::milliseconds max_silence, const EtcdBodySink& sink,
                      const std::atomic<bool>& stop, const bool& created);

  // The connection kept to one endpoint for unary calls.
  struct KeptConnection {
    std::mutex mu;
    std::unique_ptr<EtcdHttpConnection> connection;  // null until the first call, or after one
                                                     // that failed
  };

  const std::vector<net::HostPort> endpoints_;
  const std::chrono::milliseconds timeout_;
  const std::shared_ptr<net::TlsContext> tls_;  // null: plain HTTP
  const std::string user_;                      // "": no authentication
  const std::string password_;
  std::vector<KeptConnection> kept_;  // one per endpoint
  std::atomic<size_t> preferred_{0};  // the endpoint that answered last

  std::mutex auth_mu_;  // guards the token (and serializes authenticating)
  std::string token_;
  bool have_token_ = false;
  uint64_t token_generation_ = 0;

  const int cancel_fd_;  // an eventfd: readable once CancelWatch was called
  std::atomic<bool> watch_canceled_{false};
  std::atomic<uint64_t> streams_opened_{0};
  std::atomic<uint64_t> progress_notifications_{0};
  std::atomic<uint64_t> silent_reopens_{0};
};

GatewayClient::StreamRun GatewayClient::RunStream(
    size_t index, const std::string& payload, const std::string& token,
    Clock::time_point connect_deadline, Clock::time_point create_deadline,
    std::chrono::milliseconds max_silence, const EtcdBodySink& sink, const std::atomic<bool>& stop,
    const bool& created) {
  StreamRun run;
  auto connected = EtcdHttpConnection::Connect(endpoints_[index], tls_.get(), connect_deadline,
                                               cancel_fd_, /*keepalive=*/true);
  if (!connected.ok()) {
    run.canceled = connected.status().code() == StatusCode::kAborted;
    run.silent = connected.status().code() == StatusCode::kTimeout;
    run.failure = connected.status().message();
    return run;
  }
  EtcdHttpConnection& connection = **connected;
  // etcd's "require leader" (clientv3.WithRequireLeader, passed through the gateway as gRPC
  // metadata): a member that loses its leader cancels the watch instead of keeping it open
  // and silent while the rest of the cluster moves on.
  Status sent = connection.SendPost("/v3/watch", payload, token, create_deadline,
                                    "Grpc-Metadata-Hasleader: true\r\n");
  Result<EtcdHttpHead> head =
      sent.ok() ? connection.ReadHead(create_deadline) : Result<EtcdHttpHead>(sent);
  if (!head.ok()) {
    run.canceled = head.status().code() == StatusCode::kAborted;
    run.silent = head.status().code() == StatusCode::kTimeout;
    run.failure = run.silent ? "no answer" : head.status().message();
    return run;
  }
  if (head->status / 100 != 2) {
    run.http_status = head->status;
    std::string body;
    (void)connection.ReadBody(
        [&](const char* data, size_t size) {
          body.append(data, std::min(size, size_t{4096} - std::min(body.size(), size_t{4096})));
          return body.size() < 4096;
        },
        create_deadline, timeout_);
    json error = json::parse(body, nullptr, false);
    run.failure = "HTTP " + std::to_string(head->status);
    if (!error.is_discarded() && error.is_object()) {
      run.failure += ": " + ErrorStatus(error, "etcd", nullptr).message();
    }
    return run;
  }
  // Read in slices, so the stop flag is looked at while etcd is quiet; the silence bound runs
  // from the last byte etcd sent.
  Clock::time_point last_heard = Clock::now();
  while (true) {
    const Clock::time_point silent_at =
        created ? last_heard + max_silence : std::max(create_deadline, last_heard);
    const Clock::time_point slice_end = std::min(silent_at, Clock::now() + kStopCheck);
    bool heard = false;
    Status read = connection.ReadBody(
        [&](const char* data, size_t size) {
          heard = true;
          return sink(data, size);
        },
        Clock::time_point::max(),
        std::chrono::ceil<std::chrono::milliseconds>(
            std::max(slice_end - Clock::now(), Clock::duration(0))));
    if (read.code() == StatusCode::kTimeout) {
      // ReadBody gives up a slice only when nothing came in it: a partial chunk stays buffered
      // in the connection, and the framing resumes where it stopped.
      if (heard) last_heard = Clock::now();
      if (stop.load()) return run;
      if (Clock::now() < silent_at) continue;
      run.created = created;
      run.silent = true;
      run.failure = created ? "etcd sent nothing for " + std::to_string(max_silence.count()) +
                                  " ms (no event, no progress notification)"
                            : "the watch was not created in time";
      return run;
    }
    run.created = created;
    if (read.code() == StatusCode::kAborted) {
      run.canceled = read.message() == "canceled";
      return run;  // the sink stopped it (an outcome, the stop flag) or CancelWatch
    }
    run.failure = read.ok() ? "etcd ended the stream" : read.message();
    return run;
  }
}

// One watch stream at a time, on one endpoint, kept open as long as etcd keeps it: events and
// progress notifications come on it as etcd sends them. It is reopened (from the revision after
// the last one seen) when etcd ends it, when the connection breaks, or when it has been silent
// for `max_silence`: what finds an etcd that stopped answering without closing the connection
// when TCP keepalive cannot (the peer's kernel still answers the probes).
Status GatewayClient::Watch(std::string_view prefix, int64_t start_revision,
                            const std::function<void(const std::vector<EtcdEvent>&)>& on_events,
                            const std::atomic<bool>& stop, std::chrono::milliseconds max_silence) {
  const std::string what = "etcd watch of '" + Printable(prefix) + "'";
  const std::string key = Base64Encode(prefix);
  const std::string range_end = Base64Encode(PrefixEnd(prefix));
  int64_t next_revision = std::max<int64_t>(start_revision, 0);
  max_silence = std::max(max_silence, std::chrono::milliseconds(1));
  // Until when an endpoint that takes the connection but does not create the watch in time
  // counts as slow rather than gone: one request timeout after the last stream etcd created.
  Clock::time_point slow_ok_until = Clock::now() + timeout_;
  bool reauthenticated = false;

  while (!stop.load() && !watch_canceled_.load()) {
    json create = {{"create_request",
                    {{"key", key},
                     {"range_end", range_end},
                     {"start_revision", std::to_string(next_revision)},
                     {"progress_notify", true}}}};
    const std::string payload = create.dump();
    uint64_t token_generation = 0;
    Result<std::string> token = Token(&token_generation);
    if (!token.ok()) return token.status().WithContext(what);

    // What this stream ended with, when it is not simply to be reopened.
    std::optional<Status> outcome;
    bool created = false;
    bool token_refused = false;
    std::string pending;  // bytes of a message not yet ended by '\n'
    // Every message is type-checked before use, but a JSON access that still throws must end
    // this stream as Corruption, never escape.
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
          if (outcome->code() != StatusCode::kNotFound &&
              outcome->code() != StatusCode::kPermissionDenied) {
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
          Status canceled = Status::Unavailable(what + ": etcd canceled the watch: " + reason);
          if (TokenRejected(canceled) && !user_.empty() && !reauthenticated) {
            token_refused = true;  // authenticate again and reopen, once
          } else if (reason.find("permission denied") != std::string::npos ||
                     reason.find("Unauthenticated") != std::string::npos ||
                     reason.find("user name is empty") != std::string::npos) {
            outcome = Status::PermissionDenied(what + ": etcd canceled the watch: " + reason +
                                               (user_.empty() ? " (set etcd_user and "
                                                                "etcd_password_file)"
                                                              : ""));
          } else {
            outcome = canceled;
          }
          return false;
        }
        const bool is_created = result.value("created", false);
        if (is_created) {
          created = true;
          reauthenticated = false;
          streams_opened_.fetch_add(1, std::memory_order_relaxed);
          // A watch "from now" (revision 0) is pinned to the revision it was created at, so a
          // reopen misses nothing made in between.
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
        } else if (!is_created && created) {
          // A progress notification: etcd has sent every change up to its header's revision,
          // so a reopen can start after it (and is less likely to meet a compaction).
          progress_notifications_.fetch_add(1, std::memory_order_relaxed);
          auto revision = HeaderRevision(result);
          if (revision.ok() && *revision >= next_revision) next_revision = *revision + 1;
        }
        if (stop.load()) return false;
      }
      return !stop.load();
    };
    EtcdBodySink receiver = [&](const char* data, size_t length) {
      try {
        return handle(data, length);
      } catch (const std::exception& e) {
        outcome = Status::Corruption(what + ": etcd sent an unexpected message: " + e.what());
        return false;
      }
    };

    // Find an endpoint that takes the watch. Connecting and creating are bounded by the request
    // timeout, each endpoint in turn; the open stream by `max_silence`.
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
      const Clock::time_point connect_deadline =
          Clock::now() + (deadline - Clock::now()) / int64_t(endpoints_.size() - attempt);
      StreamRun run = RunStream(index, payload, *token, connect_deadline, deadline, max_silence,
                                receiver, stop, created);
      if (run.canceled) break;
      if (outcome || token_refused) break;  // etcd said something final on this stream
      if (created) {
        // The stream was open and ended (etcd ended it, it broke, it went silent, or the stop
        // flag): reopen.
        if (run.silent) silent_reopens_.fetch_add(1, std::memory_order_relaxed);
        preferred_.store(index, std::memory_order_relaxed);
        streamed = true;
        slow_ok_until = Clock::now() + timeout_;
        break;
      }
      only_slow = only_slow && run.silent;
      failures +=
          (failures.empty() ? "" : "; ") + FormatEndpoint(endpoint) + ": " +
          (run.failure.empty() ? "the stream ended before the watch was created" : run.failure);
    }
    if (stop.load() || watch_canceled_.load()) break;  // a canceled stream ends like a stopped one
    if (token_refused) {
      InvalidateToken(token_generation);
      reauthenticated = true;
      continue;
    }
    if (outcome) return *outcome;
    // Every endpoint connected but none created the watch in time (a loaded etcd): ask again,
    // for up to one request timeout.
    if (!streamed && only_slow && Clock::now() < slow_ok_until) continue;
    if (!streamed) {
      return Status::Unavailable(what + ": no etcd endpoint took the watch (" + failures + ")");
    }
  }
  return Status::Ok();
}

// The first line of `path`, the password: never quoted in an error.
Result<std::string> ReadPasswordFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Status::InvalidArgument("etcd_password_file '" + path +
                                   "': cannot read it: " + std::strerror(errno));
  }
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty()) {
    return Status::InvalidArgument("etcd_password_file '" + path +
                                   "': its first line (the password) is empty");
  }
  return line;
}

}  // namespace

Result<std::unique_ptr<EtcdClient>> EtcdClient::Open(const std::vector<std::string>& endpoints,
                                                     std::chrono::milliseconds request_timeout) {
  EtcdOptions options;
  options.endpoints = endpoints;
  options.request_timeout = request_timeout;
  return Open(options);
}

Result<std::unique_ptr<EtcdClient>> EtcdClient::Open(const EtcdOptions& options) {
  if (options.endpoints.empty()) return Status::InvalidArgument("etcd: no endpoints given");
  if (options.request_timeout.count() <= 0) {
    return Status::InvalidArgument("etcd: the request timeout must be positive");
  }
  std::vector<net::HostPort> parsed;
  bool any_http = false;
  bool any_https = false;
  for (const std::string& text : options.endpoints) {
    std::string_view view = text;
    // Accept etcd's own URL spelling of a client endpoint.
    if (view.starts_with("http://")) {
      view.remove_prefix(7);
      any_http = true;
    } else if (view.starts_with("https://")) {
      view.remove_prefix(8);
      any_https = true;
    }
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
  const bool tls = any_https || !options.tls_ca_file.empty();
  if (tls && any_http) {
    return Status::InvalidArgument(
        "etcd: http:// endpoints mixed with TLS (an https:// endpoint or etcd_tls_ca_file): one "
        "etcd cluster serves one or the other");
  }
  if (tls && options.tls_ca_file.empty()) {
    return Status::InvalidArgument(
        "etcd: https endpoints need etcd_tls_ca_file, the CA that signed etcd's certificate");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return Status::InvalidArgument(
        "etcd: etcd_tls_cert_file and etcd_tls_key_file go together (the client certificate "
        "and its key)");
  }
  if (!tls && !options.tls_cert_file.empty()) {
    return Status::InvalidArgument(
        "etcd: a client certificate (etcd_tls_cert_file) needs TLS: set etcd_tls_ca_file");
  }
  std::shared_ptr<net::TlsContext> context;
  if (tls) {
    auto created = net::TlsContext::Create(
        net::TlsRole::kClient, {options.tls_cert_file, options.tls_key_file, options.tls_ca_file});
    if (!created.ok()) return created.status().WithContext("etcd TLS");
    context = std::move(created).value();
  }
  std::string password;
  if (!options.user.empty()) {
    if (options.password_file.empty()) {
      return Status::InvalidArgument("etcd: etcd_user '" + options.user +
                                     "' needs etcd_password_file (a file holding the password)");
    }
    KVPORT_ASSIGN_OR_RETURN(password, ReadPasswordFile(options.password_file));
  } else if (!options.password_file.empty()) {
    return Status::InvalidArgument("etcd: etcd_password_file is set but etcd_user is not");
  }
  return std::unique_ptr<EtcdClient>(new GatewayClient(std::move(parsed), options.request_timeout,
                                                       std::move(context), options.user,
                                                       std::move(password)));
}

std::string EtcdNodesPrefix(std::string_view cluster) {
  return "/kvport/clusters/" + std::string(cluster) + "/nodes/";
}

std::string EtcdNodeKey(std::string_view cluster, std::string_view id) {
  return EtcdNodesPrefix(cluster) + std::string(id);
}

}  // namespace kvport::cluster
