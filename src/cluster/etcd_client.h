// SPDX-License-Identifier: Apache-2.0
// EtcdClient: the few etcd v3 calls a cluster needs (leases, put, range and watch of a prefix),
// over etcd's JSON gateway (HTTP/1.1 POST /v3/..., keys and values base64).
//
// Why the gateway and cpp-httplib: etcd serves it on its client port with no extra process, it
// is stable across etcd 3.4+, and cpp-httplib is the HTTP library kvport already ships (Debian's
// libcpp-httplib-dev, on every architecture we build), so clusters add no dependency. gRPC
// would add protobuf, grpc++ and generated code for five calls.
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

struct EtcdLeaseTtl {
  int64_t ttl_seconds = -1;  // left; -1 when the lease is gone
  int64_t granted_ttl_seconds = 0;
};

class EtcdClient {
 public:
  // `endpoints`: "host:port" of etcd's client URLs (http only). No I/O; InvalidArgument for an
  // empty list or a malformed entry, quoting it.
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
  // (on this thread) for each batch etcd sends, until `stop` is set (noticed at the next
  // message, or within `poll_interval`, the read timeout after which a quiet stream is reopened
  // from the last revision seen; CancelWatch ends it at once) or the stream fails. Returns Ok when
  // stopped; Unavailable when etcd went away; NotFound when `start_revision` was compacted (re-read
  // the range and watch again).
  virtual Status Watch(std::string_view prefix, int64_t start_revision,
                       const std::function<void(const std::vector<EtcdEvent>&)>& on_events,
                       const std::atomic<bool>& stop, std::chrono::milliseconds poll_interval) = 0;

  // Ends a Watch running on another thread at once (it returns as if `stop` were set: set the
  // flag first), by closing its stream; without it a quiet watch notices `stop` only when its
  // read times out. A Watch that starts after this stops at once too. For shutdown only.
  virtual void CancelWatch() = 0;

  // "127.0.0.1:2379,127.0.0.1:22379", for logs.
  virtual std::string Describe() const = 0;
};

// The etcd key of node `id` in cluster `cluster`, and the prefix of all of them.
std::string EtcdNodesPrefix(std::string_view cluster);
std::string EtcdNodeKey(std::string_view cluster, std::string_view id);

}  // namespace kvport::cluster
