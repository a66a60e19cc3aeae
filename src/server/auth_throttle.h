// SPDX-License-Identifier: Apache-2.0
// AuthThrottle: a budget of failed authentications per peer, so that a node with tokens cannot
// be asked to check guessed secrets at the speed of the network (one RESP connection pipelining
// AUTH reached ~219,000 guesses a second), and an address that keeps opening connections that
// never authenticate is slowed as well.
//
// The rule (docs/security.md, "Failed authentications"):
//   - Every secret the node refuses (HELLO, AUTH) and every connection closed for not
//     authenticating within hello_timeout is a failure charged to its peer: an IPv4 address, an
//     IPv6 /64 (one host can hold a whole /64, so its addresses are one peer), or, for a RESP
//     connection that has already authenticated, the token it holds. A token that was not
//     presented at all guesses nothing and is not charged.
//   - A peer's budget is `budget` (10) failures. The failure that spends it, and each one after
//     it, backs the peer off: for first_backoff (1 s), doubling with each further failure up to
//     max_backoff (60 s). While backed off, its new connections are refused at accept and
//     its HELLO and AUTH are refused without their secret being looked at (Unavailable, saying
//     when to retry). A refusal is not a failure: a client retrying is not charged for it.
//   - A peer with no failure for forget_after (10 min) starts again with its whole budget. A
//     success does not reset the budget: a holder of one token must not buy more guesses at
//     another token by authenticating in between.
//   - Unix socket peers are not throttled: the socket is mode 0600, so they run as the node's
//     user or root, who can read the token file anyway.
// The table holds at most max_peers (16384) peers, the one seen least recently forgotten first,
// so peers from many addresses cost bounded memory. Thread-safe: the acceptor and the sessions
// of every I/O thread share one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/monotonic_clock.h"
#include "common/thread_annotations.h"
#include "kvport/status.h"

namespace kvport::server {

// What AuthThrottle's rule is made of. Fixed: a node has one obvious rule, not a knob per taste.
struct AuthThrottleOptions {
  uint32_t budget = 10;
  std::chrono::milliseconds first_backoff = std::chrono::seconds(1);
  std::chrono::milliseconds max_backoff = std::chrono::seconds(60);
  std::chrono::milliseconds forget_after = std::chrono::minutes(10);
  size_t max_peers = 16384;
};

class AuthThrottle {
 public:
  using Options = AuthThrottleOptions;
  using Clock = std::function<MonotonicClock::time_point()>;

  // `clock` tells the time (tests drive one by hand).
  explicit AuthThrottle(Options options = Options(), Clock clock = &MonotonicClock::now);

  // The peer failures of a connection from `address` (net::PeerAddress: "192.0.2.7", "::1",
  // "unix:uid=U") are charged to: the IPv4 address ("192.0.2.7", also for an IPv4-mapped IPv6
  // address), an IPv6 address's /64 ("2001:db8:1:2::/64"), any other text as it is (TokenPeer);
  // nullopt for a peer that is never throttled (a Unix socket's, or an unknown one).
  static std::optional<std::string> PeerOf(std::string_view address);
  // The peer a RESP connection that has already authenticated is charged as: its token.
  static std::string TokenPeer(std::string_view token_name);

  // Before a secret presented by `address` is checked, or a connection from it is admitted: OK,
  // or Unavailable saying how many failures the peer made and when to retry while it is backed
  // off.
  Status Admit(std::string_view address) EXCLUDES(mu_);
  // A failure of `address`'s peer (see above). True when the peer is backed off from now on: the
  // caller closes the connection that failed.
  bool Charge(std::string_view address) EXCLUDES(mu_);

  // Peers tracked now (at most max_peers).
  size_t tracked() const EXCLUDES(mu_);
  const Options& options() const { return options_; }

 private:
  struct Peer {
    std::string key;
    uint32_t failures = 0;
    MonotonicClock::time_point last_failure;
    MonotonicClock::time_point backed_off_until;  // refused before this
  };
  using Lru = std::list<Peer>;  // most recently touched first

  // The peer's entry, moved to the front; forgotten failures cleared. Null when absent and not
  // `create`.
  Peer* Touch(const std::string& key, MonotonicClock::time_point now, bool create) REQUIRES(mu_);
  std::chrono::milliseconds BackoffAfter(uint32_t failures) const;

  const Options options_;
  const Clock clock_;
  mutable Mutex mu_;
  Lru lru_ GUARDED_BY(mu_);
  std::unordered_map<std::string_view, Lru::iterator> by_key_ GUARDED_BY(mu_);
};

}  // namespace kvport::server
