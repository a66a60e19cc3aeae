// SPDX-License-Identifier: Apache-2.0
#include "cluster/node_registration.h"

#include <fmt/core.h>

#include <random>
#include <utility>

#include "kvport/log.h"

namespace kvport::cluster {
namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Renewing three times per TTL leaves two renewals' worth of slack before the lease lapses.
std::chrono::milliseconds IntervalFor(std::chrono::seconds ttl) {
  return std::max(std::chrono::milliseconds(100),
                  std::chrono::duration_cast<std::chrono::milliseconds>(ttl) / 3);
}

}  // namespace

uint64_t NodeRegistration::NewEpoch() {
  std::random_device random;
  uint64_t epoch = 0;
  while (epoch == 0)
    epoch = (uint64_t{random()} << 32) ^ uint64_t { random() };
  return epoch;
}

NodeRegistration::NodeRegistration(std::unique_ptr<EtcdClient> etcd, Member record,
                                   RegistrationOptions options)
    : etcd_(std::move(etcd)),
      options_(std::move(options)),
      key_(EtcdNodeKey(options_.cluster, record.id)),
      interval_(IntervalFor(options_.lease_ttl)),
      record_(std::move(record)) {}

Result<std::unique_ptr<NodeRegistration>> NodeRegistration::Start(std::unique_ptr<EtcdClient> etcd,
                                                                  Member record,
                                                                  RegistrationOptions options) {
  if (etcd == nullptr) return Status::InvalidArgument("node registration: no etcd client");
  if (options.cluster.empty()) return Status::InvalidArgument("cluster name must not be empty");
  if (record.id.empty()) return Status::InvalidArgument("node id must not be empty");
  if (options.lease_ttl.count() < 1 || options.lease_ttl.count() > 3600) {
    return Status::InvalidArgument(fmt::format(
        "lease_ttl_secs {} is out of range: expected 1..3600 seconds", options.lease_ttl.count()));
  }
  const std::string endpoints = etcd->Describe();
  const std::string id = record.id;
  std::unique_ptr<NodeRegistration> registration(
      new NodeRegistration(std::move(etcd), std::move(record), std::move(options)));
  NodeRegistration& r = *registration;
  Status registered = r.Register(NewEpoch(), /*again=*/false);
  if (!registered.ok()) {
    return registered.WithContext(
        fmt::format("cannot register node '{}' in cluster '{}' with etcd {}", id,
                    r.options_.cluster, endpoints));
  }
  log::Info("registered node '{}' in cluster '{}' (etcd {}, key {}, epoch {:016x}, lease TTL {} s)",
            id, r.options_.cluster, endpoints, r.key_, r.epoch(), r.options_.lease_ttl.count());
  r.thread_ = std::thread([&r] { r.Run(); });
  return registration;
}

NodeRegistration::~NodeRegistration() {
  Stop();
}

Member NodeRegistration::record() const {
  MutexLock lock(mu_);
  return record_;
}

void NodeRegistration::PauseKeepAliveForTesting(bool paused) {
  paused_.store(paused, std::memory_order_release);
}

Status NodeRegistration::Register(uint64_t epoch, bool again) {
  epoch_.store(epoch, std::memory_order_release);

  KVPORT_ASSIGN_OR_RETURN(int64_t lease, etcd_->GrantLease(options_.lease_ttl));
  std::string value;
  {
    MutexLock lock(mu_);
    // Kept at once, so that Stop revokes it even if the write below fails (etcd drops the
    // lease by itself otherwise, after its TTL: it holds no key then).
    lease_ = lease;
    record_.epoch = epoch;
    record_.started_unix_ms = NowUnixMs();
    value = EncodeMember(record_);
  }
  KVPORT_RETURN_IF_ERROR(etcd_->Put(key_, value, lease));
  if (again) reregistrations_.fetch_add(1, std::memory_order_relaxed);
  SetRegistered(true);
  return Status::Ok();
}

void NodeRegistration::SetRegistered(bool registered) {
  registered_.store(registered, std::memory_order_release);
  if (options_.on_state) options_.on_state(state());
}

void NodeRegistration::CountEtcdFailure() {
  etcd_failures_.fetch_add(1, std::memory_order_relaxed);
  if (options_.on_state) options_.on_state(state());
}

bool NodeRegistration::WaitInterval() {
  std::unique_lock<std::mutex> lock(wake_mu_);
  return !wake_.wait_for(lock, interval_, [this] { return stop_.load(std::memory_order_acquire); });
}

void NodeRegistration::Run() {
  bool lapsed = false;       // the lease is gone: register again with a new epoch
  uint64_t old_epoch = 0;    // while lapsed: the epoch the lease had
  bool unreachable = false;  // a warning was logged for this outage
  auto warn_once = [&](const Status& status, std::string_view doing) {
    CountEtcdFailure();
    if (unreachable) return;
    unreachable = true;
    log::Warn(
        "cluster '{}': etcd {} did not answer ({}: {}); node keeps serving and retries every "
        "{} ms",
        options_.cluster, etcd_->Describe(), doing, status.ToString(), interval_.count());
  };
  while (WaitInterval()) {
    if (paused_.load(std::memory_order_acquire)) continue;
    if (!lapsed) {
      int64_t lease = 0;
      {
        MutexLock lock(mu_);
        lease = lease_;
      }
      Result<int64_t> renewed = etcd_->KeepAlive(lease);
      if (renewed.ok()) {
        if (unreachable) {
          unreachable = false;
          // Written again in case it was lost (a restored etcd): same lease, same epoch.
          Status rewritten = etcd_->Put(key_, EncodeMember(record()), lease);
          log::Info(
              "cluster '{}': etcd {} answers again and the lease is still valid: node "
              "stays registered with epoch {:016x}{}",
              options_.cluster, etcd_->Describe(), epoch(),
              rewritten.ok() ? "" : " (rewriting its record failed: " + rewritten.ToString() + ")");
        }
        continue;
      }
      if (renewed.status().code() != StatusCode::kNotFound) {
        warn_once(renewed.status(), "lease renewal");
        continue;
      }
      lapsed = true;
      SetRegistered(false);
      old_epoch = epoch();
      const uint64_t new_epoch = NewEpoch();
      log::Warn(
          "cluster '{}': the node's lease lapsed (etcd {} no longer has it): the cluster dropped "
          "it and clients may have stored its keys elsewhere meanwhile; it registers again with "
          "a new epoch {:016x}",
          options_.cluster, etcd_->Describe(), new_epoch);
      epoch_.store(new_epoch, std::memory_order_release);
      if (options_.on_new_epoch) options_.on_new_epoch(new_epoch);
    }
    Status registered = Register(epoch(), /*again=*/true);
    if (!registered.ok()) {
      warn_once(registered, "registering again");
      continue;
    }
    lapsed = false;
    unreachable = false;
    log::Warn("cluster '{}': node re-registered as '{}' with new epoch {:016x} (was {:016x})",
              options_.cluster, key_, epoch(), old_epoch);
  }
}

void NodeRegistration::Stop() {
  MutexLock stop_lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    stop_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  // The thread is at most in one etcd call, which the request timeout bounds.
  if (thread_.joinable()) thread_.join();
  int64_t lease = 0;
  {
    MutexLock lock(mu_);
    lease = std::exchange(lease_, 0);
  }
  SetRegistered(false);
  if (lease == 0) return;
  Status revoked = etcd_->RevokeLease(lease);
  if (revoked.ok() || revoked.code() == StatusCode::kNotFound) {
    log::Info("deregistered from cluster '{}' (removed {})", options_.cluster, key_);
  } else {
    log::Warn("cluster '{}': could not deregister ({}); the record {} lapses within {} s",
              options_.cluster, revoked.ToString(), key_, options_.lease_ttl.count());
  }
}

}  // namespace kvport::cluster
