// SPDX-License-Identifier: Apache-2.0
#include "client/cluster_client.h"

#include <fmt/core.h>

#include <algorithm>
#include <random>
#include <thread>
#include <utility>

#include "kvport/log.h"
#include "net/host_port.h"

namespace kvport::client {
namespace {

constexpr std::chrono::milliseconds kDownMin{100};
constexpr std::chrono::milliseconds kDownMax{5'000};
constexpr std::chrono::milliseconds kReopenBackoff{200};
constexpr size_t kControlThreads = 8;
constexpr size_t kListCursors = 64;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             MonotonicClock::now().time_since_epoch())
      .count();
}

std::string NodeName(const cluster::Member& member) {
  return member.id == member.address ? member.address
                                     : fmt::format("{} ({})", member.id, member.address);
}

// Whether a node's answer for a key means the node itself failed (not the key).
bool NodeFailed(KeyCode code) {
  return code == KeyCode::kUnavailable;
}
bool NodeFailed(const Status& call) {
  return !call.ok() && NodeFailed(KeyCodeFromCallFailure(call));
}

// The milliseconds left before `deadline`, at least 1 (0 would mean "the default timeout").
std::chrono::milliseconds Left(Deadline deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - MonotonicClock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

template <typename T>
std::vector<T> Pick(std::span<const T> all, std::span<const uint32_t> indexes) {
  std::vector<T> picked;
  picked.reserve(indexes.size());
  for (uint32_t i : indexes)
    picked.push_back(all[i]);
  return picked;
}

IOBuffers PickBuffers(const IOBuffers& all, std::span<const uint32_t> indexes) {
  IOBuffers picked;
  picked.reserve(indexes.size());
  for (uint32_t i : indexes)
    picked.Append(all[i].data, all[i].size, all[i].registered);
  return picked;
}

// The per-key parts a read merges: codes, and for gets the sizes and metas.
void TakeKey(BatchResult& from, size_t k, BatchResult& to, size_t i) {
  to.codes[i] = from.codes[k];
}
void TakeKey(GetResult& from, size_t k, GetResult& to, size_t i) {
  to.codes[i] = from.codes[k];
  to.value_sizes[i] = from.value_sizes[k];
  to.metas[i] = std::move(from.metas[k]);
}
void Resize(BatchResult& result, size_t n, KeyCode code) {
  result.codes.assign(n, code);
}
void Resize(GetResult& result, size_t n, KeyCode code) {
  result.codes.assign(n, code);
  result.value_sizes.assign(n, 0);
  result.metas.assign(n, std::string());
}

// Sets the overall code and the first failing key's reason: reasons[i], or `fallback` (with
// the key named) when none was recorded for it (a plain miss).
void SetOverall(BatchResult& result, std::span<const std::string> keys,
                const std::vector<Status>& reasons, std::string_view fallback) {
  result.status = OverallCode(result.codes);
  result.error = Status::Ok();
  for (size_t i = 0; i < result.codes.size(); ++i) {
    if (result.codes[i] == KeyCode::kSuccess) continue;
    result.error = !reasons[i].ok()
                       ? reasons[i]
                       : Status::NotFound(fmt::format("{} key '{}': {}", fallback, keys[i],
                                                      KeyCodeName(result.codes[i])));
    break;
  }
}

}  // namespace

ClusterClient::ClusterClient(std::string instance_id,
                             std::unique_ptr<cluster::Membership> membership,
                             const InitOptions& init_options, TransportChoice choice,
                             NodeCredentials credentials, DeviceStaging* devices,
                             ValueChecksums* checksums, Options options)
    : instance_id_(std::move(instance_id)),
      membership_(std::move(membership)),
      init_options_(init_options),
      choice_(std::move(choice)),
      credentials_(std::move(credentials)),
      devices_(devices),
      checksums_(checksums),
      options_(options) {
  MutexLock lock(list_mu_);
  list_cursor_seed_ = std::random_device{}();
}

ClusterClient::~ClusterClient() {
  CloseAll();
}

void ClusterClient::CloseAll() {
  const std::shared_ptr<const View> view = view_.load(std::memory_order_acquire);
  if (view == nullptr) return;
  for (const auto& slot : view->slots) {
    MutexLock lock(slot->mu);
    if (slot->node != nullptr) slot->node->CloseAll();
  }
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

ClusterClient::Routing ClusterClient::Route(std::span<const std::string> keys) {
  Routing routing;
  routing.view = CurrentView();
  const auto& slots = routing.view->slots;
  routing.stride = slots.size();
  const int64_t now = NowNs();
  routing.is_live.resize(slots.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    routing.is_live[s] = slots[s]->down_until_ns.load(std::memory_order_relaxed) <= now ? 1 : 0;
    routing.live += routing.is_live[s];
  }
  if (routing.live == 0) {  // everyone is down: try them all rather than none
    routing.is_live.assign(slots.size(), 1);
    routing.live = slots.size();
  }
  // The replicas and one node more for a failover: all a call without failures looks at.
  routing.depth = std::min<size_t>(routing.live, options_.replicas + 1);
  routing.key_hashes.resize(keys.size());
  routing.candidates.resize(keys.size() * routing.depth);
  for (size_t i = 0; i < keys.size(); ++i) {
    routing.key_hashes[i] = cluster::Placement::KeyHash(keys[i]);
    routing.view->placement.RankFirst(
        routing.key_hashes[i], routing.is_live,
        std::span<uint32_t>(routing.candidates.data() + i * routing.depth, routing.depth));
  }
  return routing;
}

uint32_t ClusterClient::Routing::RankInFull(size_t key, size_t rank) const {
  std::vector<uint32_t> order(stride);
  view->placement.RankHashed(key_hashes[key], order);
  // Live ones first, each part in rendezvous order.
  std::stable_partition(order.begin(), order.end(), [&](uint32_t s) { return is_live[s] != 0; });
  return order[rank];
}

void ClusterClient::Routing::FirstReplicas(size_t replicas, std::vector<uint32_t>* keys,
                                           std::vector<uint32_t>* slots) const {
  const size_t n = key_hashes.size();
  for (size_t i = 0; i < n; ++i) {
    for (size_t r = 0; r < replicas; ++r) {
      keys->push_back(static_cast<uint32_t>(i));
      slots->push_back(candidate(i, r));
    }
  }
}

std::vector<ClusterClient::Group> ClusterClient::GroupBy(std::span<const uint32_t> keys,
                                                         std::span<const uint32_t> slot_of_key) {
  // Slot indexes are small (one per member), so groups are found by index, in slot order.
  uint32_t slots = 0;
  for (uint32_t slot : slot_of_key)
    slots = std::max(slots, slot + 1);
  std::vector<size_t> sizes(slots);
  for (uint32_t slot : slot_of_key)
    ++sizes[slot];
  std::vector<Group> groups;
  std::vector<size_t> group_of(slots);
  for (uint32_t slot = 0; slot < slots; ++slot) {
    if (sizes[slot] == 0) continue;
    group_of[slot] = groups.size();
    groups.push_back(Group{slot, {}});
    groups.back().keys.reserve(sizes[slot]);
  }
  for (size_t k = 0; k < keys.size(); ++k)
    groups[group_of[slot_of_key[k]]].keys.push_back(keys[k]);
  // Ascending, so a group of all n keys is the call's own order (what the callers rely on to
  // pass the call's arrays as they are).
  for (Group& group : groups) {
    if (!std::is_sorted(group.keys.begin(), group.keys.end()))
      std::sort(group.keys.begin(), group.keys.end());
  }
  return groups;
}

void ClusterClient::RunGroups(size_t groups, const std::function<void(size_t)>& part) {
  // Control calls only (Connect, Ping, Stats): rare, and each may wait for a node's connect
  // timeout, so they run on threads of their own, at most kControlThreads at once.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t g = next.fetch_add(1); g < groups; g = next.fetch_add(1))
      part(g);
  };
  std::vector<std::thread> threads;
  const size_t extra = std::min(groups, kControlThreads) - (groups > 0 ? 1 : 0);
  threads.reserve(extra);
  for (size_t t = 0; t < extra; ++t)
    threads.emplace_back(work);
  work();
  for (std::thread& thread : threads)
    thread.join();
}

Status ClusterClient::Connect() {
  std::shared_ptr<const View> view = CurrentView();
  const size_t n = view->slots.size();
  std::vector<Status> opened(n);
  RunGroups(n, [&](size_t s) { opened[s] = Open(*view->slots[s]).status(); });
  size_t answered = 0;
  for (size_t s = 0; s < n; ++s) {
    if (!opened[s].ok()) {
      log::Warn("client {}: {}: {}", instance_id_, membership_->Describe(), opened[s].ToString());
      continue;
    }
    if (answered++ == 0) {
      MutexLock lock(view->slots[s]->mu);
      transport_ = std::string(view->slots[s]->node->transport());
      default_namespace_ = view->slots[s]->node->default_namespace();
    }
  }
  if (n > 0 && answered == 0) {
    return Status::Unavailable(fmt::format("{}: no node answers; first: {}",
                                           membership_->Describe(), opened[0].ToString()));
  }
  if (transport_.empty()) transport_ = "TCP";
  transport_reason_ = fmt::format(
      "{}: {} of {} nodes answer at start; each node is reached over "
      "the best data path it offers",
      membership_->Describe(), answered, n);
  log::Info("client {}: {}", instance_id_, transport_reason_);
  return Status::Ok();
}

template <typename R>
struct ClusterClient::Part {
  Group group;
  // What the node's call reads, when the part is not the whole call: kept until it finishes.
  std::vector<std::string> keys;
  std::vector<std::string> metas;
  IOBuffers buffers;
  InPlaceLoans loans;  // MGetInPlace: what this node lent
  PendingCallPtr<R> call;

  // The keys its node call reads: the call's own when the part holds them all.
  std::span<const std::string> KeysOf(std::span<const std::string> all) const {
    return keys.empty() ? all : std::span<const std::string>(keys);
  }
};

template <typename R, typename Start>
std::vector<std::unique_ptr<ClusterClient::Part<R>>> ClusterClient::StartParts(
    const Routing& routing, std::vector<Group> groups, Start start) {
  std::vector<std::unique_ptr<Part<R>>> parts;
  parts.reserve(groups.size());
  for (Group& group : groups) {
    auto part = std::make_unique<Part<R>>();
    part->group = std::move(group);
    Result<std::shared_ptr<NodeClient>> node = Open(*routing.view->slots[part->group.slot]);
    part->call = node.ok() ? start(**node, *part) : Decided<R>(node.status());
    parts.push_back(std::move(part));
  }
  return parts;
}

template <typename R>
bool ClusterClient::PartsReady(const std::vector<std::unique_ptr<Part<R>>>& parts) {
  for (const auto& part : parts) {
    if (part->call != nullptr && !part->call->Ready()) return false;
  }
  return true;
}

// An MSET over the cluster: round 0 sends every key to its first `replicas` nodes; later rounds
// replace the nodes that failed by each key's next live node.
class ClusterClient::WriteCall final : public PendingCall<BatchResult> {
 public:
  WriteCall(ClusterClient* cluster, std::span<const std::string> keys, const IOBuffers& values,
            const SetOptions& options, std::span<const std::string> metas, Routing routing,
            Deadline deadline)
      : cluster_(cluster),
        keys_(keys),
        values_(values),
        options_(options),
        metas_(metas),
        routing_(std::move(routing)),
        deadline_(deadline),
        replicas_(std::min<size_t>(cluster->options_.replicas, routing_.live)),
        quorum_(std::min<size_t>(cluster->options_.write_quorum, replicas_)),
        stored_(keys.size(), 0),
        next_rank_(keys.size(), static_cast<uint32_t>(replicas_)),
        reasons_(keys.size()),
        failure_(keys.size(), KeyCode::kSuccess) {
    routing_.FirstReplicas(replicas_, &send_keys_, &send_slots_);
    StartRound();
  }

  bool Ready() override { return PartsReady(parts_); }

  Result<BatchResult> Finish() override {
    while (true) {
      MergeRound();
      if (send_keys_.empty()) break;
      StartRound();
    }
    if (!answered_) return reasons_[0].WithContext("MSet: " + cluster_->membership_->Describe());
    BatchResult result;
    result.codes.resize(keys_.size());
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (stored_[i] >= quorum_) {
        result.codes[i] = KeyCode::kSuccess;
        continue;
      }
      result.codes[i] = failure_[i] != KeyCode::kSuccess ? failure_[i] : KeyCode::kUnavailable;
      if (stored_[i] > 0) {
        reasons_[i] = reasons_[i].WithContext(
            fmt::format("MSet: key '{}' stored on {} of the {} nodes the write quorum needs",
                        keys_[i], stored_[i], quorum_));
      }
    }
    SetOverall(result, keys_, reasons_, "MSet");
    return result;
  }

 private:
  void StartRound() {
    SetOptions part_options = options_;
    part_options.timeout = Left(deadline_);
    const size_t n = keys_.size();
    parts_ = cluster_->StartParts<BatchResult>(
        routing_, GroupBy(send_keys_, send_slots_), [&](NodeClient& node, Part<BatchResult>& part) {
          if (part.group.keys.size() == n) {  // every key: the call's own arrays
            return node.StartMSet(keys_, values_, part_options, metas_);
          }
          part.keys = Pick<std::string>(keys_, part.group.keys);
          if (!metas_.empty()) part.metas = Pick<std::string>(metas_, part.group.keys);
          part.buffers = PickBuffers(values_, part.group.keys);
          return node.StartMSet(part.keys, part.buffers, part_options, part.metas);
        });
    send_keys_.clear();
    send_slots_.clear();
  }

  void MergeRound() {
    for (auto& part : parts_) {
      const Result<BatchResult> got = part->call->Finish();
      part->call.reset();
      const bool time_left = MonotonicClock::now() < deadline_;
      Slot& slot = *routing_.view->slots[part->group.slot];
      const bool whole_failed = !got.ok();
      bool lost_keys = false;  // the node answered, but lost some keys' answers
      for (size_t k = 0; k < part->group.keys.size(); ++k) {
        const uint32_t i = part->group.keys[k];
        const KeyCode code = whole_failed ? KeyCodeFromCallFailure(got.status()) : got->codes[k];
        if (code == KeyCode::kSuccess) {
          ++stored_[i];
          answered_ = true;
          continue;
        }
        auto why = [&] { return whole_failed ? got.status() : got->error; };
        if (!whole_failed) answered_ = true;
        if (NodeFailed(code)) {
          lost_keys = lost_keys || !whole_failed;
          if (reasons_[i].ok()) reasons_[i] = why();
          // The key's next live node takes this replica, if any is left and time is.
          if (time_left && next_rank_[i] < routing_.live) {
            send_keys_.push_back(i);
            send_slots_.push_back(routing_.candidate(i, next_rank_[i]++));
          }
        } else if (failure_[i] == KeyCode::kSuccess) {
          failure_[i] = code;
          reasons_[i] = why();
        }
      }
      cluster_->Observe(slot, got.status(), lost_keys);
    }
    parts_.clear();
  }

  ClusterClient* const cluster_;
  const std::span<const std::string> keys_;
  const IOBuffers& values_;
  const SetOptions options_;
  const std::span<const std::string> metas_;
  const Routing routing_;
  const Deadline deadline_;
  const size_t replicas_;
  const size_t quorum_;
  std::vector<uint32_t> stored_;
  std::vector<uint32_t> next_rank_;
  std::vector<Status> reasons_;
  std::vector<KeyCode> failure_;  // the first non-node failure, if any
  bool answered_ = false;
  std::vector<uint32_t> send_keys_;
  std::vector<uint32_t> send_slots_;
  std::vector<std::unique_ptr<Part<BatchResult>>> parts_;
};

PendingCallPtr<BatchResult> ClusterClient::StartMSet(std::span<const std::string> keys,
                                                     const IOBuffers& values,
                                                     const SetOptions& options,
                                                     std::span<const std::string> metas) {
  if (keys.empty()) return Decided<BatchResult>(BatchResult());
  const Deadline deadline = MonotonicClock::now() +
                            (options.timeout.count() > 0 ? options.timeout : init_options_.timeout);
  Routing routing = Route(keys);
  if (routing.stride == 0) {
    return Decided<BatchResult>(
        Status::Unavailable("MSet: " + membership_->Describe() + " has no live nodes"));
  }
  return PendingCallPtr<BatchResult>(
      new WriteCall(this, keys, values, options, metas, std::move(routing), deadline));
}

// The reads (MGet and its forms, MExist): each key is asked of its first live node and, with
// replicas, of the next ones while it is missing. `start(node, part, time_left)` starts the
// node call for a part's keys.
template <typename R>
class ClusterClient::ReadCall final : public PendingCall<R> {
 public:
  using Start = std::function<PendingCallPtr<R>(NodeClient&, Part<R>&, std::chrono::milliseconds)>;
  ReadCall(ClusterClient* cluster, std::span<const std::string> keys, const char* op,
           Routing routing, Deadline deadline, InPlaceLoans* loans, Start start)
      : cluster_(cluster),
        keys_(keys),
        op_(op),
        routing_(std::move(routing)),
        deadline_(deadline),
        loans_(loans),
        start_(std::move(start)),
        replicas_(std::min<size_t>(cluster->options_.replicas, routing_.live)),
        reasons_(keys.size()),
        rank_(keys.size(), 0),
        pending_(keys.size()) {
    Resize(result_, keys.size(), KeyCode::kKeyNotExist);
    if (loans_ != nullptr) loans_->views.assign(keys.size(), nullptr);
    for (size_t i = 0; i < keys.size(); ++i)
      pending_[i] = static_cast<uint32_t>(i);
    StartRound();
  }

  bool Ready() override { return PartsReady(parts_); }

  Result<R> Finish() override {
    while (true) {
      MergeRound();
      if (pending_.empty()) break;
      StartRound();
    }
    // Refused by every node it reached (NotSupported, InvalidArgument): the call's own error,
    // as one node would return it.
    if (!any_answered_ && !call_error_.ok()) return call_error_;
    SetOverall(result_, keys_, reasons_, op_);
    return std::move(result_);
  }

 private:
  void StartRound() {
    std::vector<uint32_t> slot_of(pending_.size());
    for (size_t k = 0; k < pending_.size(); ++k)
      slot_of[k] = routing_.candidate(pending_[k], rank_[pending_[k]]);
    const std::chrono::milliseconds left = Left(deadline_);
    parts_ = cluster_->StartParts<R>(routing_, GroupBy(pending_, slot_of),
                                     [&](NodeClient& node, Part<R>& part) {
                                       if (part.group.keys.size() != keys_.size()) {
                                         part.keys = Pick<std::string>(keys_, part.group.keys);
                                       }
                                       return start_(node, part, left);
                                     });
    pending_.clear();
  }

  void MergeRound() {
    for (auto& part : parts_) {
      Result<R> got = part->call->Finish();
      part->call.reset();
      Slot& slot = *routing_.view->slots[part->group.slot];
      const bool whole_failed = !got.ok();
      bool lost_keys = false;  // the node answered, but lost some keys' answers
      if (whole_failed && !NodeFailed(got.status()) && call_error_.ok()) {
        call_error_ = got.status();
      }
      any_answered_ = any_answered_ || !whole_failed;
      // The reason of a key that did not succeed (a Status copy: made only when needed).
      auto why = [&] { return whole_failed ? got.status() : got->error; };
      for (size_t k = 0; k < part->group.keys.size(); ++k) {
        const uint32_t i = part->group.keys[k];
        const KeyCode code = whole_failed ? KeyCodeFromCallFailure(got.status()) : got->codes[k];
        if (code == KeyCode::kKeyNotExist || NodeFailed(code) || code == KeyCode::kTimeout) {
          // A miss, or the node failed: a miss (its reason kept), unless another replica may
          // have the key.
          if (code != KeyCode::kKeyNotExist) {
            reasons_[i] = why();
            lost_keys = lost_keys || (!whole_failed && NodeFailed(code));
          }
          if (++rank_[i] < replicas_ && MonotonicClock::now() < deadline_) pending_.push_back(i);
          continue;
        }
        if (code != KeyCode::kSuccess) reasons_[i] = why();
        if (whole_failed) {
          result_.codes[i] = code;
          continue;
        }
        TakeKey(*got, k, result_, i);
        if (loans_ != nullptr && code == KeyCode::kSuccess && k < part->loans.views.size()) {
          loans_->views[i] = part->loans.views[k];
        }
      }
      if (loans_ != nullptr) {
        for (auto& loan : part->loans.loans)
          loans_->loans.push_back(std::move(loan));
      }
      cluster_->Observe(slot, got.status(), lost_keys);
    }
    parts_.clear();
    std::sort(pending_.begin(), pending_.end());
  }

  ClusterClient* const cluster_;
  const std::span<const std::string> keys_;
  const char* const op_;
  const Routing routing_;
  const Deadline deadline_;
  InPlaceLoans* const loans_;
  const Start start_;
  const size_t replicas_;
  R result_;
  std::vector<Status> reasons_;  // OK: a plain miss (no allocation per key)
  std::vector<uint32_t> rank_;
  bool any_answered_ = false;
  Status call_error_;              // a node refused the call itself (not a node failure)
  std::vector<uint32_t> pending_;  // keys to ask (again) in the next round
  std::vector<std::unique_ptr<Part<R>>> parts_;
};

template <typename R, typename Start>
PendingCallPtr<R> ClusterClient::StartRead(std::span<const std::string> keys, const char* op,
                                           std::chrono::milliseconds timeout, InPlaceLoans* loans,
                                           Start start) {
  if (keys.empty()) return Decided<R>(R());
  const Deadline deadline =
      MonotonicClock::now() + (timeout.count() > 0 ? timeout : init_options_.timeout);
  Routing routing = Route(keys);
  if (routing.stride == 0) {
    return Decided<R>(Status::Unavailable(std::string(op) + ": " + membership_->Describe() +
                                          " has no live nodes"));
  }
  return PendingCallPtr<R>(new ReadCall<R>(this, keys, op, std::move(routing), deadline, loans,
                                           typename ReadCall<R>::Start(std::move(start))));
}

PendingCallPtr<GetResult> ClusterClient::StartMGet(std::span<const std::string> keys,
                                                   const GetOptions& options,
                                                   const IOBuffers* buffers, InPlaceLoans* loans) {
  const char* op = loans != nullptr ? "MGetInPlace" : buffers == nullptr ? "MGetMeta" : "MGet";
  GetOptions part_options = options;
  return StartRead<GetResult>(
      keys, op, options.timeout, loans,
      [keys, buffers, loans, part_options](NodeClient& node, Part<GetResult>& part,
                                           std::chrono::milliseconds left) mutable {
        part_options.timeout = left;
        const std::span<const std::string> part_keys = part.KeysOf(keys);
        if (loans != nullptr) return node.StartMGet(part_keys, part_options, nullptr, &part.loans);
        if (buffers == nullptr || part.keys.empty()) {
          return node.StartMGet(part_keys, part_options, buffers, nullptr);
        }
        part.buffers = PickBuffers(*buffers, part.group.keys);
        return node.StartMGet(part_keys, part_options, &part.buffers, nullptr);
      });
}

PendingCallPtr<BatchResult> ClusterClient::StartMExist(std::span<const std::string> keys,
                                                       const ExistOptions& options) {
  ExistOptions part_options = options;
  return StartRead<BatchResult>(keys, "MExist", options.timeout, nullptr,
                                [keys, part_options](NodeClient& node, Part<BatchResult>& part,
                                                     std::chrono::milliseconds left) mutable {
                                  part_options.timeout = left;
                                  return node.StartMExist(part.KeysOf(keys), part_options);
                                });
}

// An MDEL over the cluster: every key to each of its first `replicas` live nodes, at once.
class ClusterClient::DelCall final : public PendingCall<BatchResult> {
 public:
  DelCall(ClusterClient* cluster, std::span<const std::string> keys, const DelOptions& options,
          Routing routing)
      : cluster_(cluster), keys_(keys), routing_(std::move(routing)) {
    std::vector<uint32_t> send_keys;
    std::vector<uint32_t> send_slots;
    routing_.FirstReplicas(std::min<size_t>(cluster->options_.replicas, routing_.live), &send_keys,
                           &send_slots);
    parts_ = cluster_->StartParts<BatchResult>(
        routing_, GroupBy(send_keys, send_slots), [&](NodeClient& node, Part<BatchResult>& part) {
          if (part.group.keys.size() != keys.size()) {
            part.keys = Pick<std::string>(keys, part.group.keys);
          }
          return node.StartMDel(part.KeysOf(keys), options);
        });
  }

  bool Ready() override { return PartsReady(parts_); }

  Result<BatchResult> Finish() override {
    // A key is deleted when every replica answered and one had it: a replica that could not be
    // reached may still hold a copy, so that key is UNAVAILABLE (delete it again later).
    const size_t n = keys_.size();
    std::vector<bool> deleted(n, false);
    std::vector<Status> unreached(n);
    std::vector<Status> reasons(n);
    bool answered = false;
    for (auto& part : parts_) {
      const Result<BatchResult> got = part->call->Finish();
      Slot& slot = *routing_.view->slots[part->group.slot];
      bool lost_keys = false;
      for (size_t k = 0; k < part->group.keys.size(); ++k) {
        const uint32_t i = part->group.keys[k];
        const KeyCode code = got.ok() ? got->codes[k] : KeyCodeFromCallFailure(got.status());
        if (code == KeyCode::kSuccess) {
          deleted[i] = true;
        } else if (code != KeyCode::kKeyNotExist && unreached[i].ok()) {
          unreached[i] = got.ok() ? got->error : got.status();
          lost_keys = lost_keys || (got.ok() && NodeFailed(code));
        }
        answered = answered || got.ok();
      }
      cluster_->Observe(slot, got.status(), lost_keys);
    }
    parts_.clear();
    if (!answered) return unreached[0].WithContext("MDel: no node answered");
    BatchResult result;
    result.codes.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (!unreached[i].ok()) {
        result.codes[i] = KeyCode::kUnavailable;
        reasons[i] = unreached[i];
      } else {
        result.codes[i] = deleted[i] ? KeyCode::kSuccess : KeyCode::kKeyNotExist;
      }
    }
    SetOverall(result, keys_, reasons, "MDel");
    return result;
  }

 private:
  ClusterClient* const cluster_;
  const std::span<const std::string> keys_;
  const Routing routing_;
  std::vector<std::unique_ptr<Part<BatchResult>>> parts_;
};

PendingCallPtr<BatchResult> ClusterClient::StartMDel(std::span<const std::string> keys,
                                                     const DelOptions& options) {
  if (keys.empty()) return Decided<BatchResult>(BatchResult());
  Routing routing = Route(keys);
  if (routing.stride == 0) {
    return Decided<BatchResult>(
        Status::Unavailable("MDel: " + membership_->Describe() + " has no live nodes"));
  }
  return PendingCallPtr<BatchResult>(new DelCall(this, keys, options, std::move(routing)));
}

Status ClusterClient::Ping() {
  std::shared_ptr<const View> view = CurrentView();
  if (view->slots.empty()) return Status::Unavailable(membership_->Describe() + " has no nodes");
  std::vector<Status> answers(view->slots.size());
  RunGroups(view->slots.size(), [&](size_t s) {
    Result<std::shared_ptr<NodeClient>> node = Open(*view->slots[s]);
    answers[s] = node.ok() ? (*node)->Ping().WithContext("node " + NodeName(view->slots[s]->member))
                           : node.status();
  });
  std::string failed;
  for (const Status& answer : answers) {
    if (!answer.ok()) failed += (failed.empty() ? "" : "; ") + answer.ToString();
  }
  if (failed.empty()) return Status::Ok();
  return Status::Unavailable(membership_->Describe() + ": " + failed);
}

std::vector<NodeReport> ClusterClient::StatsPerNode() {
  std::shared_ptr<const View> view = CurrentView();
  std::vector<NodeReport> reports(view->slots.size());
  RunGroups(view->slots.size(), [&](size_t s) {
    const cluster::Member& member = view->slots[s]->member;
    NodeReport& report = reports[s];
    report.id = member.id;
    report.address = member.address;
    report.epoch = member.epoch;
    Result<std::shared_ptr<NodeClient>> node = Open(*view->slots[s]);
    Result<NodeStats> stats = node.ok() ? (*node)->Stats() : Result<NodeStats>(node.status());
    if (stats.ok()) {
      report.stats = std::move(stats).value();
    } else {
      report.status = stats.status();
    }
  });
  return reports;
}

Result<NodeStats> ClusterClient::Stats() {
  const std::vector<NodeReport> reports = StatsPerNode();
  for (const NodeReport& report : reports) {
    if (!report.status.ok()) {
      log::Warn("client {}: Stats: node {} left out: {}", instance_id_, report.address,
                report.status.ToString());
    }
  }
  return SumNodeStats(reports);
}

Result<KeyPage> ClusterClient::List(std::string_view ns, uint64_t cursor, uint32_t max_keys) {
  ListPosition at;
  if (cursor != 0) {
    MutexLock lock(list_mu_);
    auto it = list_cursors_.find(cursor);
    if (it == list_cursors_.end()) {
      return Status::InvalidArgument(fmt::format(
          "List: cursor {} is unknown to this client (this client remembers its last {})", cursor,
          kListCursors));
    }
    at = it->second;
  }
  std::shared_ptr<const View> view = CurrentView();
  // The first member at or after `at`'s (ids ascending); the listing resumes there.
  auto member_at = [&](std::string_view id, bool after) {
    size_t s = 0;
    while (s < view->slots.size() &&
           (after ? view->slots[s]->member.id <= id : view->slots[s]->member.id < id))
      ++s;
    return s;
  };
  KeyPage page;
  size_t s = member_at(at.member_id, /*after=*/false);
  uint64_t node_cursor =
      view->slots.size() > s && view->slots[s]->member.id == at.member_id ? at.node_cursor : 0;
  for (; s < view->slots.size(); ++s, node_cursor = 0) {
    Slot& slot = *view->slots[s];
    Result<std::shared_ptr<NodeClient>> node = Open(slot);
    Result<KeyPage> part =
        node.ok() ? (*node)->List(ns, node_cursor, max_keys) : Result<KeyPage>(node.status());
    if (!part.ok()) {
      log::Warn("client {}: List: node {} skipped: {}", instance_id_, NodeName(slot.member),
                part.status().ToString());
      continue;
    }
    page.keys = std::move(part->keys);
    if (part->next_cursor != 0) {
      at = ListPosition{slot.member.id, part->next_cursor};
    } else if (s + 1 < view->slots.size()) {
      at = ListPosition{view->slots[s + 1]->member.id, 0};
    } else {
      return page;  // the last member is done
    }
    if (!page.keys.empty()) break;
  }
  if (s >= view->slots.size()) return page;
  MutexLock lock(list_mu_);
  // A fresh value per page from a random start: a cursor of another client (or an older one of
  // this client's) is refused as unknown rather than resuming someone else's listing.
  list_cursor_seed_ = list_cursor_seed_ * 6364136223846793005ULL + 1442695040888963407ULL;
  page.next_cursor = list_cursor_seed_ | 1;
  list_cursors_[page.next_cursor] = at;
  list_cursor_order_.push_back(page.next_cursor);
  if (list_cursor_order_.size() > kListCursors) {
    list_cursors_.erase(list_cursor_order_.front());
    list_cursor_order_.pop_front();
  }
  return page;
}

}  // namespace kvport::client
