// SPDX-License-Identifier: Apache-2.0
// NodeRegistration: a cache node's membership of a cluster in etcd (docs/cluster.md, "What a
// node does in etcd").
//
// Start grants a lease of `lease_ttl` seconds and writes the node's record (EncodeMember) under
// EtcdNodeKey(cluster, id), attached to the lease; a thread then renews the lease every
// lease_ttl / 3. The record's epoch is chosen here: random, nonzero, new on every Start.
//
// Failures after Start never stop the node: it keeps serving.
//   - etcd does not answer a renewal: one warning, then a renewal every interval until it
//     answers. If the lease is still there, nothing changed (same epoch; the record is written
//     again in case it was lost).
//   - the lease is gone (it lapsed while etcd was unreachable or the renewals paused, or someone
//     revoked it): clients have dropped the node and may have written its keys elsewhere
//     meanwhile. It takes a new epoch, once per lapse, calls `on_new_epoch` with it (the owner
//     decides what its store keeps: server.h, on_lease_loss) and registers again with that
//     epoch and a new lease (a warning). Until that succeeds it retries every interval with the
//     same epoch.
// Stop (and the destructor) joins the thread and revokes the lease, so the record is gone at
// once; each etcd call is bounded by the EtcdClient's request timeout, so a Stop with etcd down
// takes at most one in-flight call plus one revoke attempt (the record then lapses by itself).
//
// Thread-safe: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cluster/etcd_client.h"
#include "cluster/member.h"
#include "common/thread_annotations.h"
#include "kvport/status.h"

namespace kvport::cluster {

// What the owner's counters show (STATS cluster_*).
struct RegistrationState {
  bool registered = false;
  uint64_t reregistrations = 0;
  uint64_t etcd_failures = 0;
};

struct RegistrationOptions {
  std::string cluster;                 // the cluster's name: the key prefix's last part
  std::chrono::seconds lease_ttl{10};  // 1 .. 3600
  // Called (on the keepalive thread, never with a lock of this class held) with the new epoch
  // once per lapse, when the lease was found gone, before the first attempt to register again
  // (every attempt of that lapse registers this epoch). May be empty.
  std::function<void(uint64_t new_epoch)> on_new_epoch;
  // Called with state() whenever it changes (on the thread that changed it; no lock of this
  // class held), for the owner's counters. May be empty.
  std::function<void(const RegistrationState& state)> on_state;
};

class NodeRegistration {
 public:
  // Registers `record` (its epoch and started_unix_ms are set here) and starts the keepalive
  // thread. Errors: InvalidArgument (empty cluster or id, ttl outside 1..3600 s); Unavailable
  // naming etcd's endpoints and the cluster when etcd does not answer.
  static Result<std::unique_ptr<NodeRegistration>> Start(std::unique_ptr<EtcdClient> etcd,
                                                         Member record,
                                                         RegistrationOptions options);
  ~NodeRegistration();  // Stop()
  NodeRegistration(const NodeRegistration&) = delete;
  NodeRegistration& operator=(const NodeRegistration&) = delete;

  // Deregisters (revokes the lease) and joins the thread. Idempotent.
  void Stop();

  // The epoch of the record registered now (or being registered after a lapse).
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  // True while the node's record is believed to be in etcd: since the last successful write
  // or renewal, until a renewal finds the lease gone or Stop. Unreachable etcd does not clear
  // it (the lease may well still be there).
  bool registered() const { return registered_.load(std::memory_order_acquire); }
  // How many times the node registered again with a new epoch after its lease lapsed.
  uint64_t reregistrations() const { return reregistrations_.load(std::memory_order_relaxed); }
  // etcd calls of the keepalive thread (renewals, registrations) that etcd did not answer.
  uint64_t etcd_failures() const { return etcd_failures_.load(std::memory_order_relaxed); }
  RegistrationState state() const { return {registered(), reregistrations(), etcd_failures()}; }
  // The record as last written.
  Member record() const EXCLUDES(mu_);
  const std::string& key() const { return key_; }
  const std::string& cluster() const { return options_.cluster; }

  // Tests only: while paused, the thread renews nothing and does not re-register, as if the
  // node were cut off from etcd (a partition); resuming lets the next interval proceed.
  void PauseKeepAliveForTesting(bool paused);

  // A random, nonzero 64-bit epoch (std::random_device).
  static uint64_t NewEpoch();

 private:
  NodeRegistration(std::unique_ptr<EtcdClient> etcd, Member record, RegistrationOptions options);

  // Grants a lease and writes the record with `epoch` and it; `again`: after a lapse (counted).
  Status Register(uint64_t epoch, bool again) EXCLUDES(mu_);
  // The keepalive thread.
  void Run() EXCLUDES(mu_);
  // Waits one interval; false when Stop asked the thread to end.
  bool WaitInterval();
  void SetRegistered(bool registered);
  void CountEtcdFailure();

  const std::unique_ptr<EtcdClient> etcd_;
  const RegistrationOptions options_;
  const std::string key_;
  const std::chrono::milliseconds interval_;

  // Serializes Stop callers: one stops, the others wait for it.
  Mutex stop_mu_;
  bool stopped_ GUARDED_BY(stop_mu_) = false;

  mutable Mutex mu_;
  Member record_ GUARDED_BY(mu_);
  int64_t lease_ GUARDED_BY(mu_) = 0;  // the lease the record is attached to; 0 none

  // Only the wake-up of the thread's wait (it guards no data: `stop_` is atomic), so a plain
  // std::mutex, invisible to the thread-safety analysis.
  std::mutex wake_mu_;
  std::condition_variable wake_;
  std::atomic<bool> stop_{false};

  std::atomic<uint64_t> epoch_{0};
  std::atomic<bool> registered_{false};
  std::atomic<uint64_t> reregistrations_{0};
  std::atomic<uint64_t> etcd_failures_{0};
  std::atomic<bool> paused_{false};
  std::thread thread_;
};

}  // namespace kvport::cluster
