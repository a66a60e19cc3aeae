// SPDX-License-Identifier: Apache-2.0
// ClusterClient's batched calls: the write, read and delete state machines that send each
// node its part, fail over to the next nodes and merge the answers in the caller's order.
#include <fmt/core.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "client/cluster_client.h"

namespace kvport::client {
namespace {

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

}  // namespace kvport::client
