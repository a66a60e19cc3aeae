// SPDX-License-Identifier: Apache-2.0
// EtcdClient: the few etcd v3 calls a cluster needs (leases, put, range and watch of a prefix),
// over etcd's JSON gateway (HTTP/1.1 POST /v3/..., keys and values base64), plain or TLS, with
// etcd's user/password authentication when asked for.
//
// Why the gateway: etcd serves it on its client port with no extra process and it is stable
// across etcd 3.4+; gRPC would add protobuf, grpc++ and generated code for five calls. The HTTP
// is a small codec of ours over net::Stream (etcd_http.h), so TLS to etcd is the project's one
// TLS implementation (net/tls.h).
//
// Several endpoints (one etcd cluster): each call starts with the endpoint that answered last
// and tries the others in order; Unavailable, naming every endpoint and why it failed, when none
// answers within the request timeout. Thread-safe: calls may run from several threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvport/status.h"

namespace kvport::cluster {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t lease = 0;         // 0: none
  int64_t mod_revision = 0;  // the revision of its last change
};

struct EtcdRange {
  std::vector<EtcdKeyValue> kvs;
  int64_t revision = 0;  // the store's revision the range was read at: watch from revision + 1
};

struct EtcdEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  EtcdKeyValue kv;  // for kDelete: the key and mod_revision only
};

// How to reach etcd.
struct EtcdOptions {
  // etcd's client URLs: "host:port", "http://host:port" or "https://host:port". TLS is used for
  // every endpoint when one is https or tls_ca_file is set (mixing http and https is refused).
  std::vector<std::string> endpoints;
  std::chrono::milliseconds request_timeout{3000};
  // TLS (etcd's --cert-file/--key-file): the CA file etcd's certificate must chain to (required
  // for TLS; the certificate must also name the endpoint's host), and optionally a client
  // certificate and key, both or neither, for an etcd run with --client-cert-auth.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // etcd authentication (etcdctl auth enable): the user, and a file whose first line is its
  // password. The password is read once at Open and never logged; the token etcd gives for it
  // is sent with every call, and asked for again once when etcd says it expired.
  std::string user;
  std::string password_file;
};

// What the watches of one client did, for status output and tests.
struct EtcdWatchStats {
  uint64_t streams_opened = 0;          // watch streams etcd created (reopens included)
  uint64_t progress_notifications = 0;  // progress notifications received
  uint64_t silent_reopens = 0;          // streams given up as dead after max_silence
};

struct EtcdLeaseTtl {
  int64_t ttl_seconds = -1;  // left; -1 when the lease is gone
  int64_t granted_ttl_seconds = 0;
};

class EtcdClient {
 public:
  // No network I/O. InvalidArgument for an empty list, a malformed entry (quoting it), http
  // mixed with https, https without a CA file, a certificate without its key, an unreadable
  // TLS or password file (naming the file, never its content), or a user without a password
  // file. TLS files are loaded here (net::TlsContext::Create's errors).
  static Result<std::unique_ptr<EtcdClient>> Open(const EtcdOptions& options);
  // Plain HTTP, no authentication.
  static Result<std::unique_ptr<EtcdClient>> Open(const std::vector<std::string>& endpoints,
                                                  std::chrono::milliseconds request_timeout);
  virtual ~EtcdClient() = default;

  // A lease of `ttl` seconds (etcd may round it up to its minimum); its id.
  virtual Result<int64_t> GrantLease(std::chrono::seconds ttl) = 0;
  // Renews `lease` once; the seconds it now has left. NotFound when etcd no longer has it (it
  // lapsed, or was revoked).
  virtual Result<int64_t> KeepAlive(int64_t lease) = 0;
  virtual Status RevokeLease(int64_t lease) = 0;
  virtual Result<EtcdLeaseTtl> TimeToLive(int64_t lease) = 0;

  // Writes key = value, attached to `lease` when nonzero (the key goes when the lease does).
  virtual Status Put(std::string_view key, std::string_view value, int64_t lease = 0) = 0;
  virtual Status Delete(std::string_view key) = 0;
  // Every key starting with `prefix`, ascending, and the revision read at.
  virtual Result<EtcdRange> RangePrefix(std::string_view prefix) = 0;

  // Streams the changes of keys under `prefix` from `start_revision` on, calling `on_events`
  // (on this thread) for each batch etcd sends, until `stop` is set or the stream fails.
  //
  // One long-lived stream (POST /v3/watch with progress_notify): a change arrives as soon as
  // etcd sends it, and a quiet stream is not reopened. A stream that etcd ends, or that stays
  // silent (no event, no progress notification) for `max_silence`, is reopened from the
  // revision after the last one seen (a progress notification counts as seen up to its
  // revision), on any endpoint; TCP keepalive finds a vanished peer sooner (about 16 s). etcd
  // sends a progress notification to a quiet watch every 10 minutes by default
  // (--experimental-watch-progress-notify-interval), and only after an interval without events,
  // so `max_silence` should exceed twice etcd's interval.
  //
  // `stop` is noticed at the next message or within 200 ms; CancelWatch ends it at once.
  // Returns Ok when stopped; Unavailable when no endpoint takes the stream again; NotFound when
  // `start_revision` was compacted (re-read the range and watch again); PermissionDenied when
  // etcd refuses the credentials.
  virtual Status Watch(std::string_view prefix, int64_t start_revision,
                       const std::function<void(const std::vector<EtcdEvent>&)>& on_events,
                       const std::atomic<bool>& stop, std::chrono::milliseconds max_silence) = 0;

  // Ends a Watch running on another thread at once (it returns as if `stop` were set: set the
  // flag first). A Watch that starts after this stops at once too. For shutdown only.
  virtual void CancelWatch() = 0;

  // Counters of this client's watches (zero for a client that does not count them).
  virtual EtcdWatchStats watch_stats() const { return {}; }

  // "127.0.0.1:2379,127.0.0.1:22379", for logs.
  virtual std::string Describe() const = 0;
};

// The etcd key of node `id` in cluster `cluster`, and the prefix of all of them.
std::string EtcdNodesPrefix(std::string_view cluster);
std::string EtcdNodeKey(std::string_view cluster, std::string_view id);

}  // namespace kvport::cluster
