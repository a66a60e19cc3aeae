// SPDX-License-Identifier: Apache-2.0
#include "client/connection_pool.h"

#include <fmt/core.h>

#include <algorithm>
#include <utility>

#include "kvport/log.h"

namespace kvport::client {

ConnectionPool::ConnectionPool(NodeAddress address, PoolOptions options)
    : address_(std::move(address)), where_(address_.ToString()), options_(std::move(options)) {
  const int n = std::max(1, options_.connections);
  slots_.reserve(n);
  for (int i = 0; i < n; ++i)
    slots_.push_back(std::make_unique<Slot>());
}

ConnectionPool::~ConnectionPool() {
  CloseAll();
}

Result<std::shared_ptr<Connection>> ConnectionPool::ConnectFirst(Deadline deadline) {
  return UseSlot(0, deadline, /*use_others=*/false);
}

Result<std::shared_ptr<Connection>> ConnectionPool::Acquire(Deadline deadline) {
  const size_t first = next_slot_.fetch_add(1, std::memory_order_relaxed) % slots_.size();
  return UseSlot(first, deadline, /*use_others=*/true);
}

Result<std::shared_ptr<Connection>> ConnectionPool::UseSlot(size_t index, Deadline deadline,
                                                            bool use_others) {
  Slot& slot = *slots_[index];
  std::shared_ptr<Connection> old;
  {
    std::unique_lock lock(slot.mu);
    if (slot.conn != nullptr && slot.conn->alive()) return slot.conn;
    if (slot.connecting) {
      // Another call is connecting this slot. Any other live connection will do meanwhile;
      // otherwise wait for that attempt (it may take up to connect_timeout), but not past this
      // call's deadline.
      if (use_others) {
        lock.unlock();
        if (std::shared_ptr<Connection> other = AnyOtherLive(index)) return other;
        lock.lock();
      }
      if (!slot.connect_done.wait_until(lock, deadline, [&] { return !slot.connecting; })) {
        return Status::Timeout(
            fmt::format("deadline passed while another call was connecting to node {} "
                        "(connect_timeout {} ms)",
                        where_, options_.connect_timeout.count()));
      }
      if (slot.conn != nullptr && slot.conn->alive()) return slot.conn;
      // That attempt failed: this call tries too (at once Unavailable inside the backoff).
    }
    slot.connecting = true;
    old = std::move(slot.conn);
  }
  Result<std::shared_ptr<Connection>> conn = Connect(old, deadline);
  {
    std::lock_guard lock(slot.mu);
    slot.connecting = false;
    if (conn.ok()) slot.conn = *conn;
  }
  slot.connect_done.notify_all();
  if (conn.ok() || !use_others) return conn;
  // This slot cannot be reconnected right now; any other live connection will do.
  if (std::shared_ptr<Connection> other = AnyOtherLive(index)) return other;
  return conn.status();
}

std::shared_ptr<Connection> ConnectionPool::AnyOtherLive(size_t skip) {
  const size_t n = slots_.size();
  for (size_t k = 1; k < n; ++k) {
    Slot& slot = *slots_[(skip + k) % n];
    std::lock_guard lock(slot.mu);
    if (slot.conn != nullptr && slot.conn->alive()) return slot.conn;
  }
  return nullptr;
}

Result<std::shared_ptr<Connection>> ConnectionPool::Connect(const std::shared_ptr<Connection>& old,
                                                            Deadline deadline) {
  const auto now = MonotonicClock::now();
  {
    std::lock_guard lock(backoff_mu_);
    if (now < retry_at_) {
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(retry_at_ - now);
      return Status::Unavailable("node " + where_ + " is unavailable (" + last_error_.message() +
                                 "); next connect attempt in " + std::to_string(wait.count()) +
                                 " ms");
    }
  }
  if (old != nullptr) {
    log::Debug("reconnecting to {}: {}", where_, old->close_reason().message());
  }
  const Deadline connect_deadline = std::min(deadline, now + options_.connect_timeout);
  Result<std::shared_ptr<Connection>> conn = Connection::Open(
      address_, options_.client_name, connect_deadline, options_.connection, options_.arena_mapper);
  if (conn.ok() && options_.attach) {
    Status attached = options_.attach(**conn, connect_deadline);
    if (!attached.ok()) {
      (*conn)->Close(attached);
      conn = attached;
    }
  }
  std::lock_guard lock(backoff_mu_);
  if (conn.ok()) {
    if (backoff_.count() > 0) log::Info("reconnected to node {}", where_);
    backoff_ = std::chrono::milliseconds(0);
    retry_at_ = {};
    connects_.fetch_add(1, std::memory_order_relaxed);
    return conn;
  }
  // A deadline of the call is not the node's fault: only real connect failures back off.
  if (conn.status().code() == StatusCode::kTimeout && deadline < now + options_.connect_timeout) {
    return conn.status();
  }
  backoff_ =
      backoff_.count() == 0 ? options_.backoff_min : std::min(backoff_ * 2, options_.backoff_max);
  retry_at_ = MonotonicClock::now() + backoff_;
  last_error_ = conn.status();
  if (conn.status().code() == StatusCode::kUnavailable ||
      conn.status().code() == StatusCode::kTimeout) {
    return Status::Unavailable("node " + where_ + " is unavailable: " + conn.status().message());
  }
  return conn.status();  // NotSupported, Corruption: not a transient condition; say so as is
}

void ConnectionPool::CloseAll() {
  for (auto& slot : slots_) {
    std::shared_ptr<Connection> conn;
    {
      std::lock_guard lock(slot->mu);
      conn = std::move(slot->conn);
    }
    if (conn != nullptr) conn->Close(Status::Aborted("the client is shutting down"));
  }
}

}  // namespace kvport::client
