// SPDX-License-Identifier: Apache-2.0
#include "client/cluster_client.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <random>
#include <utility>

#include "kvport/log.h"
#include "net/host_port.h"

namespace kvport::client {
namespace {

constexpr std::chrono::milliseconds kDownMin{100};
constexpr std::chrono::milliseconds kDownMax{5'000};
constexpr std::chrono::milliseconds kReopenBackoff{200};
constexpr size_t kFanOutWorkers = 8;
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

// The counters a sum would make meaningless: quantiles, a largest size, 0/1 flags.
bool Additive(std::string_view name) {
  return !name.starts_with("latency_") && name != "largest_free_bytes" && name != "auth_required" &&
         name != "insecure";
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
void Finish(BatchResult& result, std::span<const std::string> keys,
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
                             std::string token, DeviceStaging* devices, Options options)
    : instance_id_(std::move(instance_id)),
      membership_(std::move(membership)),
      init_options_(init_options),
      choice_(std::move(choice)),
      token_(std::move(token)),
      devices_(devices),
      options_(options),
      fan_out_(kFanOutWorkers) {
  MutexLock lock(list_mu_);
  list_cursor_seed_ = std::random_device{}();
}

ClusterClient::~ClusterClient() {
  CloseAll();
}

void ClusterClient::CloseAll() {
  std::shared_ptr<const View> view;
  {
    MutexLock lock(view_mu_);
    view = view_;
  }
  if (view == nullptr) return;
  for (const auto& slot : view->slots) {
    MutexLock lock(slot->mu);
    if (slot->node != nullptr) slot->node->CloseAll();
  }
}

std::shared_ptr<const ClusterClient::View> ClusterClient::CurrentView() {
  const uint64_t generation = membership_->generation();
  MutexLock lock(view_mu_);
  if (view_ != nullptr && view_->generation == generation) return view_;
  // Rebuilt under the lock: membership changes are rare, and one rebuild serves every caller.
  std::vector<cluster::Member> members = membership_->Members();
  auto view = std::make_shared<View>();
  view->generation = generation;
  for (const cluster::Member& member : members) {
    std::shared_ptr<Slot> reused;
    if (view_ != nullptr) {
      for (const auto& old : view_->slots) {
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
          std::none_of(view_->slots.begin(), view_->slots.end(),
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
  if (view_ != nullptr) {
    for (const auto& old : view_->slots) {
      if (std::none_of(members.begin(), members.end(),
                       [&](const cluster::Member& m) { return m.id == old->member.id; })) {
        log::Info("client {}: {}: node {} left", instance_id_, membership_->Describe(),
                  NodeName(old->member));
      }
    }
  }
  view->placement = cluster::Placement(members);
  view_ = std::move(view);
  return view_;
}

Result<std::shared_ptr<NodeClient>> ClusterClient::Open(Slot& slot) {
  MutexLock lock(slot.mu);
  if (slot.node != nullptr) return slot.node;
  const auto now = MonotonicClock::now();
  if (now < slot.retry_open_at) return slot.open_error;
  Result<net::HostPort> tcp = net::ParseHostPort(slot.member.address);
  Result<std::unique_ptr<NodeClient>> opened =
      tcp.ok() ? NodeClient::Open(instance_id_, NodeAddress{*tcp, {}}, init_options_, choice_,
                                  token_, devices_)
               : Result<std::unique_ptr<NodeClient>>(tcp.status());
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
  std::vector<bool> live(slots.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    live[s] = slots[s]->down_until_ns.load(std::memory_order_relaxed) <= now;
    routing.live += live[s] ? 1 : 0;
  }
  if (routing.live == 0) {  // everyone is down: try them all rather than none
    live.assign(slots.size(), true);
    routing.live = slots.size();
  }
  routing.candidates.resize(keys.size() * routing.stride);
  std::vector<uint32_t> order;
  for (size_t i = 0; i < keys.size(); ++i) {
    routing.view->placement.Rank(keys[i], &order);
    std::stable_partition(order.begin(), order.end(), [&](uint32_t s) { return live[s]; });
    std::copy(order.begin(), order.end(), routing.candidates.begin() + i * routing.stride);
  }
  return routing;
}

void ClusterClient::Routing::FirstReplicas(size_t replicas, std::vector<uint32_t>* keys,
                                           std::vector<uint32_t>* slots) const {
  const size_t n = stride == 0 ? 0 : candidates.size() / stride;
  for (size_t i = 0; i < n; ++i) {
    for (size_t r = 0; r < replicas; ++r) {
      keys->push_back(static_cast<uint32_t>(i));
      slots->push_back(candidate(i, r));
    }
  }
}

std::vector<ClusterClient::Group> ClusterClient::GroupBy(std::span<const uint32_t> keys,
                                                         std::span<const uint32_t> slot_of_key) {
  std::map<uint32_t, std::vector<uint32_t>> by_slot;
  for (size_t k = 0; k < keys.size(); ++k)
    by_slot[slot_of_key[k]].push_back(keys[k]);
  std::vector<Group> groups;
  groups.reserve(by_slot.size());
  for (auto& [slot, group_keys] : by_slot) {
    // Ascending, so a group of all n keys is the call's own order (what the callers rely on
    // to pass the call's arrays as they are).
    std::sort(group_keys.begin(), group_keys.end());
    groups.push_back(Group{slot, std::move(group_keys)});
  }
  return groups;
}

void ClusterClient::RunGroups(size_t groups, const std::function<void(size_t)>& part) {
  std::vector<std::function<void()>> tasks;
  tasks.reserve(groups);
  for (size_t g = 0; g < groups; ++g)
    tasks.emplace_back([&part, g] { part(g); });
  fan_out_.Run(tasks);
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

Result<BatchResult> ClusterClient::MSet(std::span<const std::string> keys, const IOBuffers& values,
                                        const SetOptions& options,
                                        std::span<const std::string> metas) {
  BatchResult result;
  if (keys.empty()) return result;
  const Deadline deadline = MonotonicClock::now() +
                            (options.timeout.count() > 0 ? options.timeout : init_options_.timeout);
  const Routing routing = Route(keys);
  if (routing.stride == 0) {
    return Status::Unavailable("MSet: " + membership_->Describe() + " has no live nodes");
  }
  const size_t n = keys.size();
  const size_t replicas = std::min<size_t>(options_.replicas, routing.live);
  const size_t quorum = std::min<size_t>(options_.write_quorum, replicas);
  std::vector<uint32_t> stored(n, 0);
  std::vector<uint32_t> next_rank(n, static_cast<uint32_t>(replicas));
  std::vector<Status> reasons(n);
  Resize(result, n, KeyCode::kUnavailable);
  std::vector<KeyCode> failure(n, KeyCode::kSuccess);  // the first non-node failure, if any
  bool answered = false;

  // Round 0 sends every key to its first `replicas` nodes; later rounds replace failed nodes.
  std::vector<uint32_t> send_keys;
  std::vector<uint32_t> send_slots;
  routing.FirstReplicas(replicas, &send_keys, &send_slots);
  while (!send_keys.empty()) {
    const std::vector<Group> groups = GroupBy(send_keys, send_slots);
    std::vector<Result<BatchResult>> parts(groups.size(), Status::Unavailable("not sent"));
    SetOptions part_options = options;
    part_options.timeout = Left(deadline);
    RunGroups(groups.size(), [&](size_t g) {
      Slot& slot = *routing.view->slots[groups[g].slot];
      Result<std::shared_ptr<NodeClient>> node = Open(slot);
      if (!node.ok()) {
        parts[g] = node.status();
      } else if (groups[g].keys.size() == n) {  // every key: the call's own arrays
        parts[g] = (*node)->MSet(keys, values, part_options, metas);
      } else {
        const std::vector<std::string> part_keys = Pick<std::string>(keys, groups[g].keys);
        const std::vector<std::string> part_metas =
            metas.empty() ? std::vector<std::string>() : Pick<std::string>(metas, groups[g].keys);
        parts[g] =
            (*node)->MSet(part_keys, PickBuffers(values, groups[g].keys), part_options, part_metas);
      }
    });
    send_keys.clear();
    send_slots.clear();
    const bool time_left = MonotonicClock::now() < deadline;
    for (size_t g = 0; g < groups.size(); ++g) {
      Slot& slot = *routing.view->slots[groups[g].slot];
      const bool whole_failed = !parts[g].ok();
      bool lost_keys = false;  // the node answered, but lost some keys' answers
      for (size_t k = 0; k < groups[g].keys.size(); ++k) {
        const uint32_t i = groups[g].keys[k];
        const KeyCode code =
            whole_failed ? KeyCodeFromCallFailure(parts[g].status()) : parts[g]->codes[k];
        if (code == KeyCode::kSuccess) {
          ++stored[i];
          answered = true;
          continue;
        }
        auto why = [&] { return whole_failed ? parts[g].status() : parts[g]->error; };
        if (!whole_failed) answered = true;
        if (NodeFailed(code)) {
          lost_keys = lost_keys || !whole_failed;
          if (reasons[i].ok()) reasons[i] = why();
          // The key's next live node takes this replica, if any is left and time is.
          if (time_left && next_rank[i] < routing.live) {
            send_keys.push_back(i);
            send_slots.push_back(routing.candidate(i, next_rank[i]++));
          }
        } else if (failure[i] == KeyCode::kSuccess) {
          failure[i] = code;
          reasons[i] = why();
        }
      }
      Observe(slot, parts[g].status(), lost_keys);
    }
  }
  if (!answered) {
    return reasons[0].WithContext("MSet: " + membership_->Describe());
  }
  for (size_t i = 0; i < n; ++i) {
    if (stored[i] >= quorum) {
      result.codes[i] = KeyCode::kSuccess;
    } else {
      result.codes[i] = failure[i] != KeyCode::kSuccess ? failure[i] : KeyCode::kUnavailable;
      if (stored[i] > 0) {
        reasons[i] = reasons[i].WithContext(
            fmt::format("MSet: key '{}' stored on {} of the {} nodes the write quorum needs",
                        keys[i], stored[i], quorum));
      }
    }
  }
  Finish(result, keys, reasons, "MSet");
  return result;
}

template <typename R, typename Ask>
Result<R> ClusterClient::Read(std::span<const std::string> keys, const char* op,
                              std::chrono::milliseconds timeout, Ask ask) {
  R result;
  if (keys.empty()) return result;
  const Deadline deadline =
      MonotonicClock::now() + (timeout.count() > 0 ? timeout : init_options_.timeout);
  const Routing routing = Route(keys);
  if (routing.stride == 0) {
    return Status::Unavailable(std::string(op) + ": " + membership_->Describe() +
                               " has no live nodes");
  }
  const size_t n = keys.size();
  const size_t replicas = std::min<size_t>(options_.replicas, routing.live);
  Resize(result, n, KeyCode::kKeyNotExist);
  std::vector<Status> reasons(n);  // OK: a plain miss (no allocation per key)
  std::vector<uint32_t> rank(n, 0);
  bool any_answered = false;
  Status call_error;  // a node refused the call itself (not a node failure)
  std::vector<uint32_t> pending(n);
  for (size_t i = 0; i < n; ++i)
    pending[i] = static_cast<uint32_t>(i);

  while (!pending.empty()) {
    std::vector<uint32_t> slot_of(pending.size());
    for (size_t k = 0; k < pending.size(); ++k)
      slot_of[k] = routing.candidate(pending[k], rank[pending[k]]);
    const std::vector<Group> groups = GroupBy(pending, slot_of);
    std::vector<Result<R>> parts(groups.size(), Status::Unavailable("not sent"));
    RunGroups(groups.size(), [&](size_t g) {
      Result<std::shared_ptr<NodeClient>> node = Open(*routing.view->slots[groups[g].slot]);
      parts[g] = node.ok() ? ask(**node, groups[g], Left(deadline)) : Result<R>(node.status());
    });
    pending.clear();
    for (size_t g = 0; g < groups.size(); ++g) {
      Slot& slot = *routing.view->slots[groups[g].slot];
      const bool whole_failed = !parts[g].ok();
      bool lost_keys = false;  // the node answered, but lost some keys' answers
      if (whole_failed && !NodeFailed(parts[g].status()) && call_error.ok()) {
        call_error = parts[g].status();
      }
      any_answered = any_answered || !whole_failed;
      // The reason of a key that did not succeed (a Status copy: made only when needed).
      auto why = [&] { return whole_failed ? parts[g].status() : parts[g]->error; };
      for (size_t k = 0; k < groups[g].keys.size(); ++k) {
        const uint32_t i = groups[g].keys[k];
        const KeyCode code =
            whole_failed ? KeyCodeFromCallFailure(parts[g].status()) : parts[g]->codes[k];
        if (code == KeyCode::kKeyNotExist || NodeFailed(code) || code == KeyCode::kTimeout) {
          // A miss, or the node failed: a miss (its reason kept), unless another replica may
          // have the key.
          if (code != KeyCode::kKeyNotExist) {
            reasons[i] = why();
            lost_keys = lost_keys || (!whole_failed && NodeFailed(code));
          }
          if (++rank[i] < replicas && MonotonicClock::now() < deadline) pending.push_back(i);
          continue;
        }
        if (code != KeyCode::kSuccess) reasons[i] = why();
        if (whole_failed) {
          result.codes[i] = code;
          continue;
        }
        TakeKey(*parts[g], k, result, i);
      }
      Observe(slot, parts[g].status(), lost_keys);
    }
    std::sort(pending.begin(), pending.end());
  }
  // Refused by every node it reached (NotSupported, InvalidArgument): the call's own error, as
  // one node would return it.
  if (!any_answered && !call_error.ok()) return call_error;
  Finish(result, keys, reasons, op);
  return result;
}

Result<GetResult> ClusterClient::MGet(std::span<const std::string> keys, const GetOptions& options,
                                      const IOBuffers* buffers) {
  auto ask = [&](NodeClient& node, const Group& group, std::chrono::milliseconds left) {
    GetOptions part_options = options;
    part_options.timeout = left;
    if (group.keys.size() == keys.size()) return node.MGet(keys, part_options, buffers);
    const std::vector<std::string> part_keys = Pick<std::string>(keys, group.keys);
    if (buffers == nullptr) return node.MGet(part_keys, part_options, nullptr);
    const IOBuffers part_buffers = PickBuffers(*buffers, group.keys);
    return node.MGet(part_keys, part_options, &part_buffers);
  };
  return Read<GetResult>(keys, buffers == nullptr ? "MGetMeta" : "MGet", options.timeout, ask);
}

Result<GetResult> ClusterClient::MGetInPlace(std::span<const std::string> keys,
                                             const GetOptions& options, InPlaceLoans* loans) {
  std::mutex loans_mu;  // the groups of a round lend at once
  loans->views.assign(keys.size(), nullptr);
  auto ask = [&](NodeClient& node, const Group& group, std::chrono::milliseconds left) {
    GetOptions part_options = options;
    part_options.timeout = left;
    InPlaceLoans part;
    Result<GetResult> got =
        group.keys.size() == keys.size()
            ? node.MGetInPlace(keys, part_options, &part)
            : node.MGetInPlace(Pick<std::string>(keys, group.keys), part_options, &part);
    if (got.ok()) {
      std::lock_guard<std::mutex> lock(loans_mu);
      for (size_t k = 0; k < group.keys.size() && k < part.views.size(); ++k) {
        if (got->codes[k] == KeyCode::kSuccess) loans->views[group.keys[k]] = part.views[k];
      }
      for (Transport::Loan& loan : part.loans)
        loans->loans.push_back(std::move(loan));
    }
    return got;
  };
  return Read<GetResult>(keys, "MGetInPlace", options.timeout, ask);
}

Result<BatchResult> ClusterClient::MExist(std::span<const std::string> keys,
                                          const ExistOptions& options) {
  auto ask = [&](NodeClient& node, const Group& group, std::chrono::milliseconds left) {
    ExistOptions part_options = options;
    part_options.timeout = left;
    if (group.keys.size() == keys.size()) return node.MExist(keys, part_options);
    return node.MExist(Pick<std::string>(keys, group.keys), part_options);
  };
  return Read<BatchResult>(keys, "MExist", options.timeout, ask);
}

Result<BatchResult> ClusterClient::MDel(std::span<const std::string> keys,
                                        const DelOptions& options) {
  BatchResult result;
  if (keys.empty()) return result;
  const Routing routing = Route(keys);
  if (routing.stride == 0) {
    return Status::Unavailable("MDel: " + membership_->Describe() + " has no live nodes");
  }
  const size_t n = keys.size();
  const size_t replicas = std::min<size_t>(options_.replicas, routing.live);
  std::vector<uint32_t> send_keys;
  std::vector<uint32_t> send_slots;
  routing.FirstReplicas(replicas, &send_keys, &send_slots);
  const std::vector<Group> groups = GroupBy(send_keys, send_slots);
  std::vector<Result<BatchResult>> parts(groups.size(), Status::Unavailable("not sent"));
  RunGroups(groups.size(), [&](size_t g) {
    Result<std::shared_ptr<NodeClient>> node = Open(*routing.view->slots[groups[g].slot]);
    parts[g] = node.ok() ? (*node)->MDel(Pick<std::string>(keys, groups[g].keys), options)
                         : Result<BatchResult>(node.status());
  });
  // A key is deleted when every replica answered and one had it: a replica that could not be
  // reached may still hold a copy, so that key is UNAVAILABLE (delete it again later).
  std::vector<bool> deleted(n, false);
  std::vector<Status> unreached(n);
  std::vector<Status> reasons(n);
  bool answered = false;
  for (size_t g = 0; g < groups.size(); ++g) {
    Slot& slot = *routing.view->slots[groups[g].slot];
    bool lost_keys = false;
    for (size_t k = 0; k < groups[g].keys.size(); ++k) {
      const uint32_t i = groups[g].keys[k];
      const KeyCode code =
          parts[g].ok() ? parts[g]->codes[k] : KeyCodeFromCallFailure(parts[g].status());
      if (code == KeyCode::kSuccess) {
        deleted[i] = true;
      } else if (code != KeyCode::kKeyNotExist && unreached[i].ok()) {
        unreached[i] = parts[g].ok() ? parts[g]->error : parts[g].status();
        lost_keys = lost_keys || (parts[g].ok() && NodeFailed(code));
      }
      answered = answered || parts[g].ok();
    }
    Observe(slot, parts[g].status(), lost_keys);
  }
  if (!answered) return unreached[0].WithContext("MDel: no node answered");
  result.codes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!unreached[i].ok()) {
      result.codes[i] = KeyCode::kUnavailable;
      reasons[i] = unreached[i];
    } else {
      result.codes[i] = deleted[i] ? KeyCode::kSuccess : KeyCode::kKeyNotExist;
    }
  }
  Finish(result, keys, reasons, "MDel");
  return result;
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
  NodeStats sum;
  std::map<std::string, size_t> counter_at;
  std::map<std::string, NodeStats::Namespace> namespaces;
  size_t answered = 0;
  Status first_failure;
  for (const NodeReport& report : reports) {
    if (!report.status.ok()) {
      log::Warn("client {}: Stats: node {} left out: {}", instance_id_, report.address,
                report.status.ToString());
      if (first_failure.ok()) first_failure = report.status;
      continue;
    }
    ++answered;
    for (const auto& [name, value] : report.stats.counters) {
      auto [it, added] = counter_at.emplace(name, sum.counters.size());
      if (added) {
        sum.counters.emplace_back(name, value);
      } else if (Additive(name)) {
        sum.counters[it->second].second += value;
      } else {
        sum.counters[it->second].second = std::max(sum.counters[it->second].second, value);
      }
    }
    for (const NodeStats::Namespace& ns : report.stats.namespaces) {
      NodeStats::Namespace& merged = namespaces[ns.name];
      merged.name = ns.name;
      merged.objects += ns.objects;
      merged.bytes += ns.bytes;
    }
  }
  if (answered == 0 && !reports.empty()) return first_failure.WithContext("Stats");
  for (auto& [name, ns] : namespaces)
    sum.namespaces.push_back(std::move(ns));
  return sum;
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
