// SPDX-License-Identifier: Apache-2.0
// UnauthenticatedConnections: the node's connections that have not completed HELLO yet.
//
// A connection costs the node a descriptor and a session before its peer has proved anything,
// so these are the ones a hostile peer can open by the thousand and leave silent. The node
// keeps them apart from authenticated sessions, in accept order:
//   - per peer address (an IP address; a Unix socket peer's uid) at most `max_per_address` at
//     once: one more from that address is refused when it is accepted;
//   - when the node is at max_connections, the oldest of them is closed to let a new
//     connection in (Acceptor), so silent connections cannot lock out token holders: a real
//     client completes HELLO within a round trip and leaves this table;
//   - each must complete HELLO within hello_timeout (the worker's sweep closes it otherwise);
//   - on a node with tokens, the table carries the node's budget of failed authentications
//     (server/auth_throttle.h): a connection from a peer that is backed off is refused when it
//     is accepted, and one closed for missing its HELLO deadline is a failure of its peer, so
//     an address that keeps renewing silent connections is slowed like one that guesses.
// Thread-safe: the acceptor adds and evicts, sessions on every I/O thread remove themselves.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/thread_annotations.h"
#include "server/auth_throttle.h"

namespace kvport::server {

class UnauthenticatedConnections {
 public:
  struct Entry {
    uint64_t id = 0;      // the session id (CacheService::NewSessionId)
    size_t worker = 0;    // index of the worker serving it
    std::string address;  // what max_per_address counts by
  };

  // `throttle`: the budget of failed authentications, or null (an open node has no secret to
  // guess, and throttles nothing).
  explicit UnauthenticatedConnections(uint32_t max_per_address,
                                      std::unique_ptr<AuthThrottle> throttle = nullptr)
      : max_per_address_(max_per_address), throttle_(std::move(throttle)) {}

  // Registers connection `id`; false (nothing registered) when `address` already has
  // max_per_address connections here.
  bool Add(uint64_t id, size_t worker, const std::string& address) EXCLUDES(mu_);
  // The connection completed HELLO, or closed: forgets it and returns true. False when it is not
  // here (the acceptor took it to close, or it authenticated already).
  bool Remove(uint64_t id) EXCLUDES(mu_);
  // Removes and returns the oldest connection still here, to be closed; nullopt when none.
  std::optional<Entry> TakeOldest() EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);
  uint32_t max_per_address() const { return max_per_address_; }

  // The address connection `id` was accepted from, while it is here (not yet authenticated).
  std::optional<std::string> AddressOf(uint64_t id) const EXCLUDES(mu_);
  // Connection `id` is closed for not authenticating within hello_timeout: a failure of its peer
  // (nothing when it is not here or the node throttles nothing).
  void ChargeHelloTimeout(uint64_t id) EXCLUDES(mu_);
  // The node's budget of failed authentications; null on a node without tokens.
  AuthThrottle* throttle() const { return throttle_.get(); }

 private:
  void ForgetLocked(std::map<uint64_t, Entry>::iterator it) REQUIRES(mu_);

  const uint32_t max_per_address_;
  const std::unique_ptr<AuthThrottle> throttle_;
  mutable Mutex mu_;
  // Session ids grow with accept order, so the first entry is the oldest.
  std::map<uint64_t, Entry> by_id_ GUARDED_BY(mu_);
  std::unordered_map<std::string, uint32_t> per_address_ GUARDED_BY(mu_);
};

}  // namespace kvport::server
