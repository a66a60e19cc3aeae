// SPDX-License-Identifier: Apache-2.0
// ClusterClient's view of the members: rebuilt when the membership moves on, each member's
// NodeClient opened on first use, and a node that fails left out of placement for a backoff.
#include <fmt/core.h>

#include <algorithm>
#include <utility>

#include "client/cluster_client.h"
#include "kvport/log.h"
#include "net/host_port.h"

namespace kvport::client {
namespace {

constexpr std::chrono::milliseconds kDownMin{100};
constexpr std::chrono::milliseconds kDownMax{5'000};
constexpr std::chrono::milliseconds kReopenBackoff{200};

}  // namespace

int64_t ClusterClient::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             MonotonicClock::now().time_since_epoch())
      .count();
}

std::string ClusterClient::NodeName(const cluster::Member& member) {
  return member.id == member.address ? member.address
                                     : fmt::format("{} ({})", member.id, member.address);
}

bool ClusterClient::NodeFailed(KeyCode code) {
  return code == KeyCode::kUnavailable;
}
bool ClusterClient::NodeFailed(const Status& call) {
  return !call.ok() && NodeFailed(KeyCodeFromCallFailure(call));
}

std::shared_ptr<const ClusterClient::View> ClusterClient::CurrentView() {
  const uint64_t generation = membership_->generation();
  std::shared_ptr<const View> current = view_.load(std::memory_order_acquire);
  if (current != nullptr && current->generation == generation) return current;
  // Rebuilt under the lock: membership changes are rare, and one rebuild serves every caller.
  MutexLock lock(view_mu_);
  current = view_.load(std::memory_order_acquire);
  if (current != nullptr && current->generation == generation) return current;
  const std::shared_ptr<const View> before = std::move(current);
  std::vector<cluster::Member> members = membership_->Members();
  auto view = std::make_shared<View>();
  view->generation = generation;
  for (const cluster::Member& member : members) {
    std::shared_ptr<Slot> reused;
    if (before != nullptr) {
      for (const auto& old : before->slots) {
        if (old->member.id != member.id) continue;
        if (old->member.address == member.address && old->member.epoch == member.epoch) {
          reused = old;
        } else {
          log::Info("client {}: {}: node {} restarted or moved (epoch {}, now {} at {})",
                    instance_id_, membership_->Describe(), NodeName(old->member), old->member.epoch,
                    member.epoch, member.address);
        }
      }
      if (reused == nullptr &&
          std::none_of(before->slots.begin(), before->slots.end(),
                       [&](const auto& s) { return s->member.id == member.id; })) {
        log::Info("client {}: {}: node {} joined", instance_id_, membership_->Describe(),
                  NodeName(member));
      }
    }
    if (reused == nullptr) {
      reused = std::make_shared<Slot>();
      reused->member = member;
    }
    view->slots.push_back(std::move(reused));
  }
  if (before != nullptr) {
    for (const auto& old : before->slots) {
      if (std::none_of(members.begin(), members.end(),
                       [&](const cluster::Member& m) { return m.id == old->member.id; })) {
        log::Info("client {}: {}: node {} left", instance_id_, membership_->Describe(),
                  NodeName(old->member));
      }
    }
  }
  view->placement = cluster::Placement(members);
  view_.store(view, std::memory_order_release);
  return view;
}

Result<std::shared_ptr<NodeClient>> ClusterClient::Open(Slot& slot) {
  {
    MutexLock lock(slot.mu);
    if (slot.node != nullptr) return slot.node;
    if (MonotonicClock::now() < slot.retry_open_at) return slot.open_error;
    if (slot.opening) {
      // Another call is connecting (up to connect_timeout): this one does not wait for it.
      return Status::Unavailable("node " + NodeName(slot.member) +
                                 ": another call is connecting to it");
    }
    slot.opening = true;
  }
  Result<net::HostPort> tcp = net::ParseHostPort(slot.member.address);
  Result<std::unique_ptr<NodeClient>> opened =
      tcp.ok() ? NodeClient::Open(instance_id_, NodeAddress{*tcp, {}}, init_options_, choice_,
                                  credentials_, devices_, checksums_)
               : Result<std::unique_ptr<NodeClient>>(tcp.status());
  MutexLock lock(slot.mu);
  slot.opening = false;
  const auto now = MonotonicClock::now();
  if (!opened.ok()) {
    slot.open_error = opened.status().WithContext("node " + NodeName(slot.member));
    slot.retry_open_at = now + kReopenBackoff;
    return slot.open_error;
  }
  slot.node = std::move(opened).value();
  return slot.node;
}

void ClusterClient::MarkDown(Slot& slot, const Status& why) {
  int64_t backoff = slot.backoff_ms.load(std::memory_order_relaxed);
  const int64_t next = std::clamp<int64_t>(backoff * 2, kDownMin.count(), kDownMax.count());
  slot.backoff_ms.store(next, std::memory_order_relaxed);
  slot.down_until_ns.store(NowNs() + next * 1'000'000, std::memory_order_relaxed);
  if (backoff == 0) {
    log::Warn(
        "client {}: {}: node {} failed ({}); its keys are misses and its writes go to the "
        "next nodes until it answers again",
        instance_id_, membership_->Describe(), NodeName(slot.member), why.ToString());
  }
}

void ClusterClient::Observe(Slot& slot, const Status& call, bool lost_keys) {
  if (NodeFailed(call) || lost_keys) {
    MarkDown(slot, call.ok() ? Status::Unavailable("connection lost") : call);
  } else if (call.ok()) {
    MarkUp(slot);
  }
}

void ClusterClient::MarkUp(Slot& slot) {
  if (slot.backoff_ms.load(std::memory_order_relaxed) == 0) return;
  slot.backoff_ms.store(0, std::memory_order_relaxed);
  slot.down_until_ns.store(0, std::memory_order_relaxed);
  log::Info("client {}: {}: node {} answers again", instance_id_, membership_->Describe(),
            NodeName(slot.member));
}

}  // namespace kvport::client
