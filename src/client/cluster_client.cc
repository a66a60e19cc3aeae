// SPDX-License-Identifier: Apache-2.0
// ClusterClient's control calls, over every member at once (Connect, Ping, Stats, List), and
// its lifetime.
#include "client/cluster_client.h"

#include <fmt/core.h>

#include <algorithm>
#include <random>
#include <thread>
#include <utility>

#include "kvport/log.h"

namespace kvport::client {
namespace {

constexpr size_t kControlThreads = 8;
constexpr size_t kListCursors = 64;

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
