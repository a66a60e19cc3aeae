// SPDX-License-Identifier: Apache-2.0
#include "cluster/etcd_membership.h"

#include <algorithm>
#include <optional>
#include <set>

#include "kvport/log.h"

namespace kvport::cluster {
namespace {

constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{2000};

}  // namespace

Result<std::unique_ptr<EtcdMembership>> EtcdMembership::Open(
    const std::vector<std::string>& etcd_endpoints, std::string cluster,
    std::chrono::milliseconds request_timeout) {
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client,
                          EtcdClient::Open(etcd_endpoints, request_timeout));
  return Open(std::move(client), std::move(cluster));
}

Result<std::unique_ptr<EtcdMembership>> EtcdMembership::Open(const EtcdOptions& etcd,
                                                             std::string cluster) {
  KVPORT_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client, EtcdClient::Open(etcd));
  return Open(std::move(client), std::move(cluster));
}

Result<std::unique_ptr<EtcdMembership>> EtcdMembership::Open(std::unique_ptr<EtcdClient> client,
                                                             std::string cluster) {
  if (!client) return Status::InvalidArgument("etcd membership: no etcd client");
  if (cluster.empty()) return Status::InvalidArgument("etcd membership: the cluster name is empty");
  std::unique_ptr<EtcdMembership> membership(new EtcdMembership(std::move(client), cluster));
  auto revision = membership->Resync();
  if (!revision.ok()) {
    return Status::Unavailable("cannot read the members of cluster '" + cluster +
                               "' from etcd at " + membership->client_->Describe() + ": " +
                               revision.status().message());
  }
  membership->connected_.store(true, std::memory_order_release);
  const int64_t watch_from = *revision + 1;
  EtcdMembership* self = membership.get();
  // The thread starts only once the first read succeeded, so the object it runs on is complete
  // and the destructor always has a thread to join.
  membership->thread_ = std::thread([self, watch_from] { self->Run(watch_from); });
  return membership;
}

EtcdMembership::EtcdMembership(std::unique_ptr<EtcdClient> client, std::string cluster)
    : client_(std::move(client)),
      cluster_(std::move(cluster)),
      prefix_(EtcdNodesPrefix(cluster_)) {}

EtcdMembership::~EtcdMembership() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_.store(true);
  }
  stop_cv_.notify_all();
  client_->CancelWatch();  // ends the open watch stream at once
  if (thread_.joinable()) thread_.join();
}

std::vector<Member> EtcdMembership::Members() const {
  MutexLock lock(mu_);
  return members_;
}

std::string EtcdMembership::Describe() const {
  return "etcd " + client_->Describe() + " cluster " + cluster_;
}

std::optional<Member> EtcdMembership::Decode(const EtcdKeyValue& kv) {
  auto member = DecodeMember(kv.value);
  if (member.ok()) {
    refused_logged_.erase(kv.key);
    return std::move(member).value();
  }
  auto [it, inserted] = refused_logged_.try_emplace(kv.key, kv.mod_revision);
  if (inserted || it->second != kv.mod_revision) {
    it->second = kv.mod_revision;
    log::Warn("cluster {}: skipping the member record at {} (revision {}): {}", cluster_, kv.key,
              kv.mod_revision, member.status().ToString());
  }
  return std::nullopt;
}

void EtcdMembership::Publish() {
  // Members() promises one entry per id, sorted by id. Two keys holding the same id (a record
  // written under the wrong key by hand) keep the first key's record.
  std::vector<Member> members;
  std::set<std::string> seen;
  for (const auto& [key, member] : by_key_) {
    if (seen.insert(member.id).second) members.push_back(member);
  }
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.id < b.id; });
  if (members != members_) {
    members_ = std::move(members);
  }
  // Bumped after every applied change, even one Members() does not show (the interface allows
  // it), so a reader never misses one.
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

Result<int64_t> EtcdMembership::Resync() {
  KVPORT_ASSIGN_OR_RETURN(EtcdRange range, client_->RangePrefix(prefix_));
  std::map<std::string, Member> by_key;
  for (const EtcdKeyValue& kv : range.kvs) {
    if (auto member = Decode(kv)) by_key.emplace(kv.key, std::move(*member));
  }
  MutexLock lock(mu_);
  by_key_ = std::move(by_key);
  Publish();
  return range.revision;
}

void EtcdMembership::Apply(const std::vector<EtcdEvent>& events) {
  // Decoded before the lock: Decode logs, and the list is swapped in one step per batch.
  std::vector<std::pair<std::string, std::optional<Member>>> changes;
  for (const EtcdEvent& event : events) {
    if (event.type == EtcdEvent::Type::kDelete) {
      changes.emplace_back(event.kv.key, std::nullopt);
    } else {
      // A refused record replaces what the key held before: that node's last good record no
      // longer describes it.
      changes.emplace_back(event.kv.key, Decode(event.kv));
    }
  }
  MutexLock lock(mu_);
  for (auto& [key, member] : changes) {
    if (member) {
      by_key_.insert_or_assign(key, std::move(*member));
    } else {
      by_key_.erase(key);
    }
  }
  Publish();
}

bool EtcdMembership::SleepUnlessStopped(std::chrono::milliseconds delay) {
  std::unique_lock<std::mutex> lock(stop_mu_);
  return !stop_cv_.wait_for(lock, delay, [this] { return stop_.load(); });
}

void EtcdMembership::Run(int64_t watch_from) {
  auto on_events = [this](const std::vector<EtcdEvent>& events) { Apply(events); };
  std::chrono::milliseconds backoff = kFirstBackoff;
  // Backoff between failed watches too: a watch etcd keeps refusing while its reads succeed
  // (say, a cancel) must not spin.
  std::chrono::milliseconds watch_backoff = kFirstBackoff;
  while (!stop_.load()) {
    const auto started = std::chrono::steady_clock::now();
    Status watched = client_->Watch(prefix_, watch_from, on_events, stop_, kMaxSilence);
    if (stop_.load()) break;
    if (std::chrono::steady_clock::now() - started < kMaxBackoff) {
      if (!SleepUnlessStopped(watch_backoff)) return;
      watch_backoff = std::min(watch_backoff * 2, kMaxBackoff);
    } else {
      watch_backoff = kFirstBackoff;
    }
    if (watched.code() == StatusCode::kNotFound) {
      // Compacted past the revision we had: what changed in between is lost, so re-read.
      log::Info("cluster {}: the membership watch fell behind etcd's compaction; re-reading",
                cluster_);
    } else if (connected_.exchange(false, std::memory_order_acq_rel)) {
      MutexLock lock(mu_);
      log::Warn("cluster {}: lost etcd ({}); keeping the last {} members and retrying", cluster_,
                watched.ToString(), members_.size());
    }
    // Re-read before watching again, with backoff while etcd does not answer: members may have
    // joined or left while the watch was down, and the watch only reports changes after the
    // revision it starts from.
    while (!stop_.load()) {
      auto revision = Resync();
      if (revision.ok()) {
        watch_from = *revision + 1;
        backoff = kFirstBackoff;
        if (!connected_.exchange(true, std::memory_order_acq_rel)) {
          log::Info("cluster {}: etcd is back at {}; {} members", cluster_, client_->Describe(),
                    Members().size());
        }
        break;
      }
      if (!SleepUnlessStopped(backoff)) return;
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }
}

}  // namespace kvport::cluster
