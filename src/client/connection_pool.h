// SPDX-License-Identifier: Apache-2.0
// ConnectionPool: a fixed number of connections to one node, reconnected with backoff.
//
// Calls are spread over the pool's connections round robin; each connection pipelines the calls
// given to it. A connection that is lost (the node restarted, the network failed) is replaced
// by the next call that lands on its slot. While the node cannot be reached, connect attempts
// are spaced by an exponential backoff (min doubling up to max, reset by a success): a call in
// the backoff window fails at once with Unavailable and the last connect error, rather than
// waiting for a connect timeout, so an engine's threads are not stalled by a dead node. The
// first call after the window tries again, so a restarted node is picked up without a new
// client. A call never waits past its own deadline for another call's connect attempt: it
// uses another live connection meanwhile, or returns Timeout. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/connection.h"
#include "client/endpoint.h"
#include "client/socket_io.h"
#include "kvport/status.h"

namespace kvport::client {

struct PoolOptions {
  int connections = 2;
  std::chrono::milliseconds connect_timeout{3'000};
  std::chrono::milliseconds backoff_min{20};
  std::chrono::milliseconds backoff_max{2'000};
  std::string client_name;  // sent in HELLO, for the node's logs
  ConnectionOptions connection;
  // Shared-memory pools (a node's Unix socket): every connection attaches the arena through
  // this mapper (owned by the transport, outliving the pool). Null: plain connections.
  ArenaMapper* arena_mapper = nullptr;
  // Run on every new connection before any call uses it (UCX pools: UCX_ATTACH, by the
  // transport's UcxArena, which outlives the pool); an error fails the connect with it.
  std::function<Status(Connection&, Deadline)> attach;
};

class ConnectionPool {
 public:
  ConnectionPool(NodeAddress address, PoolOptions options);
  ~ConnectionPool();

  // A live connection for one call: the next slot's connection, reconnected if it was lost
  // (subject to the backoff), or another slot's live connection when that one cannot be
  // reconnected right now or another call is connecting it. Unavailable ("node HOST:PORT is
  // unavailable: <why>"), or Timeout when `deadline` passes first, including while another
  // call's connect attempt on the slot is still running (it is not waited for past it).
  Result<std::shared_ptr<Connection>> Acquire(Deadline deadline);

  // Connects slot 0 now, or gives its live connection (Client::Init uses it to check the node
  // answers and to read what its HELLO said).
  Result<std::shared_ptr<Connection>> ConnectFirst(Deadline deadline);

  // Closes every connection; calls in flight fail with Unavailable.
  void CloseAll();

  const NodeAddress& address() const { return address_; }
  // Successful connects so far, the first one included (tests check reconnects happened).
  uint64_t connects() const { return connects_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    std::mutex mu;  // guards conn and connecting; never held across a connect
    std::condition_variable connect_done;  // a connect attempt on this slot ended
    std::shared_ptr<Connection> conn;
    bool connecting = false;  // a call is connecting this slot (without holding mu)
  };

  // The connection of slot `index`: its live one, or one this call connects (subject to the
  // backoff), waiting for another call's attempt on the slot no longer than `deadline`; with
  // `use_others`, another slot's live connection when this one cannot give one right now.
  Result<std::shared_ptr<Connection>> UseSlot(size_t index, Deadline deadline, bool use_others);
  // Opens a new connection unless the backoff window is open; records the outcome in the
  // backoff state. `old` is the connection being replaced (for the log), or null.
  Result<std::shared_ptr<Connection>> Connect(const std::shared_ptr<Connection>& old,
                                              Deadline deadline);
  // A live connection of any slot but `skip`; null if none.
  std::shared_ptr<Connection> AnyOtherLive(size_t skip);

  const NodeAddress address_;
  const std::string where_;
  const PoolOptions options_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<uint64_t> next_slot_{0};
  std::atomic<uint64_t> connects_{0};

  std::mutex backoff_mu_;
  MonotonicClock::time_point retry_at_{};  // no connect attempt before this
  std::chrono::milliseconds backoff_{0};   // 0: the last attempt succeeded (or none yet)
  Status last_error_;
};

}  // namespace kvport::client
