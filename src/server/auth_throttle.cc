// SPDX-License-Identifier: Apache-2.0
#include "server/auth_throttle.h"

#include <arpa/inet.h>
#include <fmt/core.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace kvport::server {

AuthThrottle::AuthThrottle(Options options, Clock clock)
    : options_(options), clock_(std::move(clock)) {}

std::optional<std::string> AuthThrottle::PeerOf(std::string_view address) {
  if (address.empty() || address == "?" || address.substr(0, 5) == "unix:") return std::nullopt;
  const std::string text(address);
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) return text;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    char out[INET6_ADDRSTRLEN] = {};
    if (IN6_IS_ADDR_V4MAPPED(&v6)) {
      std::memcpy(&v4, &v6.s6_addr[12], sizeof(v4));
      if (::inet_ntop(AF_INET, &v4, out, sizeof(out)) != nullptr) return std::string(out);
      return text;
    }
    std::memset(&v6.s6_addr[8], 0, 8);
    if (::inet_ntop(AF_INET6, &v6, out, sizeof(out)) != nullptr) return std::string(out) + "/64";
    return text;
  }
  return text;
}

std::string AuthThrottle::TokenPeer(std::string_view token_name) {
  return "token:" + std::string(token_name);
}

Status AuthThrottle::Admit(std::string_view address) {
  std::optional<std::string> key = PeerOf(address);
  if (!key) return Status::Ok();
  const MonotonicClock::time_point now = clock_();
  MutexLock lock(mu_);
  if (by_key_.empty()) return Status::Ok();
  Peer* peer = Touch(*key, now, /*create=*/false);
  if (peer == nullptr || now >= peer->backed_off_until) return Status::Ok();
  const auto left = std::chrono::ceil<std::chrono::seconds>(peer->backed_off_until - now).count();
  return Status::Unavailable(fmt::format(
      "too many failed authentications from {} ({}; the budget is {}): its connections and "
      "tokens are refused unchecked for {} s more; retry then",
      peer->key, peer->failures, options_.budget, left));
}

bool AuthThrottle::Charge(std::string_view address) {
  std::optional<std::string> key = PeerOf(address);
  if (!key) return false;
  const MonotonicClock::time_point now = clock_();
  MutexLock lock(mu_);
  Peer* peer = Touch(*key, now, /*create=*/true);
  if (peer->failures < UINT32_MAX) ++peer->failures;
  peer->last_failure = now;
  if (peer->failures < options_.budget) return false;
  peer->backed_off_until = now + BackoffAfter(peer->failures);
  return true;
}

size_t AuthThrottle::tracked() const {
  MutexLock lock(mu_);
  return lru_.size();
}

AuthThrottle::Peer* AuthThrottle::Touch(const std::string& key, MonotonicClock::time_point now,
                                        bool create) {
  auto found = by_key_.find(key);
  if (found != by_key_.end()) {
    lru_.splice(lru_.begin(), lru_, found->second);
    Peer& peer = lru_.front();
    if (now - peer.last_failure >= options_.forget_after && now >= peer.backed_off_until)
      peer.failures = 0;
    return &peer;
  }
  if (!create) return nullptr;
  if (lru_.size() >= std::max<size_t>(options_.max_peers, 1)) {
    by_key_.erase(lru_.back().key);
    lru_.pop_back();
  }
  lru_.push_front(Peer{key, 0, now, now});
  by_key_.emplace(lru_.front().key, lru_.begin());
  return &lru_.front();
}

std::chrono::milliseconds AuthThrottle::BackoffAfter(uint32_t failures) const {
  // The failure that spends the budget backs off first_backoff; each one after it doubles that.
  const uint32_t doublings = std::min<uint32_t>(failures - options_.budget, 30);
  const auto backoff = options_.first_backoff * (int64_t{1} << doublings);
  return std::min(backoff, options_.max_backoff);
}

}  // namespace kvport::server
