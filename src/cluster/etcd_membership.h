// SPDX-License-Identifier: Apache-2.0
// EtcdMembership: the members of a cluster as registered in etcd (EtcdNodesPrefix(cluster)),
// kept current by a background watch.
//
// Open reads every record under the prefix once, then a thread watches the prefix from the
// revision after that read: a put adds or replaces that node, a delete (a node deregistered or
// its lease lapsed) removes it. A record DecodeMember refuses is skipped and logged once per
// version of it, so one bad record never hides the others.
//
// When etcd goes away the last member list is kept (nodes go on serving, and their leases
// cannot lapse while etcd is down), the loss is logged once, and the thread retries with a
// backoff from 100 ms doubling to 2 s; once etcd answers again it re-reads the prefix (members
// may have come and gone meanwhile), logs that it is back, and resumes watching. A watch whose
// revision was compacted re-reads the prefix the same way. So a change made in etcd reaches
// Members() within about one watch round trip while etcd is up (the watch is one long-lived
// stream, never reopened while it works), and within the backoff (at most 2 s) plus one read
// after etcd returns.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster/etcd_client.h"
#include "cluster/membership.h"
#include "common/thread_annotations.h"

namespace kvport::cluster {

class EtcdMembership final : public Membership {
 public:
  // Connects to etcd at `etcd_endpoints` ("host:port" each) and reads cluster `cluster`'s
  // members. InvalidArgument for a malformed endpoint or an empty cluster name; Unavailable,
  // naming the endpoints and the cluster, when etcd does not answer within `request_timeout`.
  // An empty cluster (no node registered yet) is not an error: Members() is empty.
  static Result<std::unique_ptr<EtcdMembership>> Open(
      const std::vector<std::string>& etcd_endpoints, std::string cluster,
      std::chrono::milliseconds request_timeout);
  // The same with TLS and authentication (EtcdOptions; its request timeout applies).
  static Result<std::unique_ptr<EtcdMembership>> Open(const EtcdOptions& etcd, std::string cluster);
  // The same over a client the caller opened (its endpoints and request timeout apply).
  static Result<std::unique_ptr<EtcdMembership>> Open(std::unique_ptr<EtcdClient> client,
                                                      std::string cluster);

  // Stops the watch thread: at once while it watches (the stream is closed), or within one
  // request timeout when a read of etcd is in flight.
  ~EtcdMembership() override;

  std::vector<Member> Members() const override EXCLUDES(mu_);
  uint64_t generation() const override { return generation_.load(std::memory_order_acquire); }
  // "etcd 127.0.0.1:2379 cluster c1".
  std::string Describe() const override;

  // Whether the watch is connected to etcd now (false from a failed watch until etcd answers a
  // re-read again). For status output and tests; Members() is served either way.
  bool connected() const { return connected_.load(std::memory_order_acquire); }

  // How long the watch stream may stay silent (no event, no progress notification) before it
  // is taken as dead and reopened from the last revision seen. etcd sends a quiet watch a
  // progress notification every 10 minutes by default, and only after a whole interval without
  // events, so up to about 22 minutes (with its 10% jitter) can pass between two messages on a
  // healthy stream. This bound is the backstop for an etcd member that stopped answering but
  // keeps the connection; a vanished peer or path is found sooner by TCP keepalive (about 16 s,
  // etcd_http.cc), and a closed or reset connection at once. The destructor does not wait for it
  // (EtcdClient::CancelWatch).
  static constexpr std::chrono::milliseconds kMaxSilence{25 * 60 * 1000};

 private:
  EtcdMembership(std::unique_ptr<EtcdClient> client, std::string cluster);

  // Reads the whole prefix and replaces the member list with it; the revision to watch from.
  Result<int64_t> Resync() EXCLUDES(mu_);
  void Apply(const std::vector<EtcdEvent>& events) EXCLUDES(mu_);
  // The record at `key`, or nullopt (logged once per key and version) when it is refused.
  std::optional<Member> Decode(const EtcdKeyValue& kv);
  void Publish() REQUIRES(mu_);
  // The watch thread: watches from `watch_from` until stopped.
  void Run(int64_t watch_from);
  // Sleeps up to `delay`; false when stopped meanwhile.
  bool SleepUnlessStopped(std::chrono::milliseconds delay);

  const std::unique_ptr<EtcdClient> client_;
  const std::string cluster_;
  const std::string prefix_;

  mutable Mutex mu_;
  std::map<std::string, Member> by_key_ GUARDED_BY(mu_);  // etcd key -> its record
  std::vector<Member> members_ GUARDED_BY(mu_);           // by_key_'s members, by id, unique
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> connected_{false};

  // Refused records already logged (key -> mod_revision): touched by Open's first read, then by
  // the watch thread alone.
  std::map<std::string, int64_t> refused_logged_;

  std::atomic<bool> stop_{false};
  // Pairs with stop_cv_ only (wakes a backoff sleep); guards no data.
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  std::thread thread_;
};

}  // namespace kvport::cluster
