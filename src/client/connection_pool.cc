#include "client/connection_pool.h"

#include <algorithm>
#include <utility>

#include "kvport/log.h"

namespace kvport::client {

ConnectionPool::ConnectionPool(net::HostPort address, PoolOptions options)
    : address_(std::move(address)), where_(address_.ToString()), options_(std::move(options)) {
  const int n = std::max(1, options_.connections);
  slots_.reserve(n);
  for (int i = 0; i < n; ++i)
    slots_.push_back(std::make_unique<Slot>());
}

ConnectionPool::~ConnectionPool() {
  CloseAll();
}

Status ConnectionPool::ConnectFirst(Deadline deadline) {
  Slot& slot = *slots_[0];
  std::lock_guard lock(slot.mu);
  if (slot.conn != nullptr && slot.conn->alive()) return Status::Ok();
  Result<std::shared_ptr<Connection>> conn = Reconnect(slot, deadline);
  return conn.status();
}

Result<std::shared_ptr<Connection>> ConnectionPool::Acquire(Deadline deadline) {
  const size_t n = slots_.size();
  const size_t first = next_slot_.fetch_add(1, std::memory_order_relaxed) % n;
  Status why;
  {
    Slot& slot = *slots_[first];
    std::lock_guard lock(slot.mu);
    if (slot.conn != nullptr && slot.conn->alive()) return slot.conn;
    Result<std::shared_ptr<Connection>> conn = Reconnect(slot, deadline);
    if (conn.ok()) return conn;
    why = conn.status();
  }
  // This slot cannot be reconnected right now; any other live connection will do.
  for (size_t k = 1; k < n; ++k) {
    Slot& slot = *slots_[(first + k) % n];
    std::lock_guard lock(slot.mu);
    if (slot.conn != nullptr && slot.conn->alive()) return slot.conn;
  }
  return why;
}

Result<std::shared_ptr<Connection>> ConnectionPool::Reconnect(Slot& slot, Deadline deadline) {
  const auto now = Clock::now();
  {
    std::lock_guard lock(backoff_mu_);
    if (now < retry_at_) {
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(retry_at_ - now);
      return Status::Unavailable("node " + where_ + " is unavailable (" + last_error_.message() +
                                 "); next connect attempt in " + std::to_string(wait.count()) +
                                 " ms");
    }
  }
  if (slot.conn != nullptr) {
    log::Debug("reconnecting to {}: {}", where_, slot.conn->close_reason().message());
    slot.conn.reset();
  }
  const Deadline connect_deadline = std::min(deadline, now + options_.connect_timeout);
  Result<std::shared_ptr<Connection>> conn =
      Connection::Open(address_, options_.client_name, connect_deadline);
  std::lock_guard lock(backoff_mu_);
  if (conn.ok()) {
    if (backoff_.count() > 0) log::Info("reconnected to node {}", where_);
    backoff_ = std::chrono::milliseconds(0);
    retry_at_ = {};
    connects_.fetch_add(1, std::memory_order_relaxed);
    slot.conn = *conn;
    return conn;
  }
  // A deadline of the call is not the node's fault: only real connect failures back off.
  if (conn.status().code() == StatusCode::kTimeout && deadline < now + options_.connect_timeout) {
    return conn.status();
  }
  backoff_ =
      backoff_.count() == 0 ? options_.backoff_min : std::min(backoff_ * 2, options_.backoff_max);
  retry_at_ = Clock::now() + backoff_;
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
