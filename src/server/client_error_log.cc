// SPDX-License-Identifier: Apache-2.0
#include "server/client_error_log.h"

#include <fmt/core.h>

#include "kvport/log.h"

namespace kvport::server {

std::string_view PeerHost(std::string_view peer) {
  if (!peer.empty() && peer.front() == '[') {
    const size_t close = peer.find(']');
    if (close != std::string_view::npos) return peer.substr(1, close - 1);
    return peer;
  }
  const size_t colon = peer.rfind(':');
  if (colon != std::string_view::npos && peer.find(':') == colon) return peer.substr(0, colon);
  return peer;
}

std::optional<std::string> ClientErrorLog::Admit(std::string_view peer, std::string_view kind,
                                                 std::string_view message,
                                                 MonotonicClock::time_point now) {
  const std::string_view host = PeerHost(peer);
  std::string key;
  key.reserve(host.size() + 1 + kind.size());
  key.append(host).push_back('\n');
  key.append(kind);
  uint64_t suppressed = 0;
  {
    MutexLock lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      if (now - it->second.logged_at < interval_) {
        ++it->second.suppressed;
        ++suppressed_total_;
        return std::nullopt;
      }
      suppressed = it->second.suppressed;
      it->second = Entry{now, 0};
    } else {
      if (entries_.size() >= max_tracked_) {
        // Forget the peers whose window has passed; if every one is recent (a flood from more
        // peers than are tracked), start over: a few more lines, never an unbounded table.
        std::erase_if(entries_,
                      [&](const auto& e) { return now - e.second.logged_at >= interval_; });
        if (entries_.size() >= max_tracked_) entries_.clear();
      }
      entries_.emplace(std::move(key), Entry{now, 0});
    }
  }
  std::string line = fmt::format("client {}: {}", peer, message);
  if (suppressed > 0) {
    line += fmt::format(" ({} more like it from {} in the last {} s not logged)", suppressed, host,
                        std::chrono::duration_cast<std::chrono::seconds>(interval_).count());
  }
  return line;
}

void ClientErrorLog::Warn(std::string_view peer, std::string_view kind, std::string_view message,
                          MonotonicClock::time_point now) {
  if (log::GetLevel() > log::Level::kWarn) return;
  std::optional<std::string> line = Admit(peer, kind, message, now);
  if (line) log::Warn("{}", *line);
}

uint64_t ClientErrorLog::suppressed() const {
  MutexLock lock(mu_);
  return suppressed_total_;
}

}  // namespace kvport::server
