// SPDX-License-Identifier: Apache-2.0
#include "client/ucx_arena.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "client/batch_call.h"
#include "kvport/log.h"
#include "protocol/messages.h"

namespace kvport::client {

namespace {

using protocol::UcxMessage;
using ucx::Worker;

// How long a call whose deadline passed waits, after closing its endpoint by force, for UCX to
// give back the caller's buffers (it does at once; this only bounds a UCX that would not).
constexpr std::chrono::seconds kReleaseWait{30};

}  // namespace

// One transfer waiting for the node's answer; touched only with its lane's worker held.
struct UcxArena::Pending {
  void* local = nullptr;
  uint64_t bytes = 0;
  bool put = false;
  bool sent = false;       // the request's send is complete: its buffer is the caller's again
  bool answered = false;   // the node answered (or the request failed: no answer will come)
  bool receiving = false;  // a get's bytes are arriving into `local`
  Status status;

  bool done() const { return sent && answered && !receiving; }
  void Fail(Status why) {
    if (!answered) {
      answered = true;
      status = std::move(why);
    }
  }
};

// One lane: its worker, and the transfers waiting on it by token. `pending` is declared first so
// that it outlives the worker, whose destruction may still run handlers.
struct UcxArena::Lane {
  std::unordered_map<uint64_t, Pending*> pending;  // with the worker held
  uint64_t next_token = 1;                         // with the worker held
  std::shared_ptr<Worker> worker;

  // A PUT_DONE or GET_DONE from the node.
  void OnAnswer(Worker::Guard& held, const Worker::Message& message) {
    protocol::UcxDone answer;
    if (!protocol::DecodeUcxDone(message.header, &answer).ok()) return;
    auto it = pending.find(answer.token);
    if (it == pending.end()) return;  // a call that gave up on it: its bytes are dropped
    Pending& p = *it->second;
    if (p.answered) return;
    p.answered = true;
    const bool get_answer = message.id == static_cast<unsigned>(UcxMessage::kGetDone);
    if (answer.status != StatusCode::kOk) {
      p.status = Status(answer.status, fmt::format("the node refused the UCX {} of {} bytes",
                                                   p.put ? "write" : "read", p.bytes));
      return;
    }
    if (get_answer == p.put || (get_answer && message.bytes != p.bytes)) {
      p.status = Status::Corruption(fmt::format(
          "the node answered a UCX {} of {} bytes with {} of {} bytes", p.put ? "write" : "read",
          p.bytes, get_answer ? "data" : "a write's answer", message.bytes));
      return;
    }
    if (!get_answer || message.bytes == 0) return;
    if (message.data != nullptr) {
      std::memcpy(p.local, message.data, message.bytes);
      return;
    }
    p.receiving = true;
    Pending* waiting = &p;
    worker->Receive(held, message, p.local, [waiting](Worker::Guard&, Status outcome) {
      waiting->receiving = false;
      if (!outcome.ok()) waiting->status = std::move(outcome);
    });
  }
};

// What UCX_ATTACH gave one connection's session, and its endpoint on each lane (0: none yet, or
// closed after a failure; each touched only with its lane's worker held).
struct UcxArena::Session final : Connection::ArenaSession {
  struct LaneEndpoint {
    std::shared_ptr<Lane> lane;
    ucx::EndpointId endpoint = 0;
  };
  std::string key;
  uint64_t arena_bytes = 0;
  std::string host;
  uint16_t port = 0;
  std::vector<LaneEndpoint> endpoints;

  ~Session() override {
    for (LaneEndpoint& e : endpoints) {
      if (e.endpoint == 0) continue;
      Worker::Guard held(*e.lane->worker);
      e.lane->worker->Close(held, e.endpoint);
    }
  }
};

// One lane's share of a call: transfers[i] is moves[move[i]], or a stripe of it.
struct UcxArena::LaneShare {
  struct Transfer {
    void* local = nullptr;
    uint64_t bytes = 0;
    uint64_t offset = 0;
    Status status;
  };
  std::vector<Transfer> transfers;
  std::vector<size_t> move;
};

UcxArena::UcxArena(std::vector<std::shared_ptr<Lane>> lanes)
    : lanes_(std::move(lanes)), lane_bytes_(lanes_.size(), 0) {}

UcxArena::~UcxArena() = default;

Result<std::unique_ptr<UcxArena>> UcxArena::Open(const UcxRuntime& runtime,
                                                 const std::vector<std::string>& devices) {
  std::vector<std::shared_ptr<Lane>> lanes;
  for (size_t index = 0; index < std::max<size_t>(devices.size(), 1); ++index) {
    const std::string lane_devices = devices.empty() ? std::string() : devices[index];
    Result<std::unique_ptr<Worker>> worker = Worker::Open(runtime, lane_devices);
    if (!worker.ok()) {
      return devices.empty() ? worker.status()
                             : worker.status().WithContext(fmt::format(
                                   "UCX lane {} (ucx_devices '{}')", index, lane_devices));
    }
    auto lane = std::make_shared<Lane>();
    lane->worker = std::move(worker).value();
    Worker::Guard held(*lane->worker);
    for (UcxMessage answer : {UcxMessage::kPutDone, UcxMessage::kGetDone}) {
      Lane* raw = lane.get();  // the lane outlives its worker's handlers
      KVPORT_RETURN_IF_ERROR(lane->worker->SetHandler(
          held, static_cast<unsigned>(answer),
          [raw](Worker::Guard& h, const Worker::Message& m) { raw->OnAnswer(h, m); }));
    }
    lanes.push_back(std::move(lane));
  }
  return std::unique_ptr<UcxArena>(new UcxArena(std::move(lanes)));
}

Status UcxArena::Attach(Connection& conn, Deadline deadline) {
  if (conn.version() < protocol::kUcxVersion) {
    return Status::NotSupported(
        fmt::format("UCX needs protocol version {}; the node at {} speaks version {}",
                    protocol::kUcxVersion, conn.peer(), conn.version()));
  }
  DecodingHandler<protocol::UcxAttachRequest, protocol::UcxAttachResponse> handler;
  KVPORT_RETURN_IF_ERROR(RoundTripOn(conn, &handler, deadline));
  const protocol::UcxAttachResponse& granted = handler.response;
  if (granted.status != StatusCode::kOk) {
    return Status(granted.status,
                  "the node at " + conn.peer() + " declined UCX: " + std::string(granted.reason));
  }
  auto session = std::make_unique<Session>();
  session->key = std::string(granted.session_key);
  session->arena_bytes = granted.arena_bytes;
  session->host = conn.PeerIp();
  session->port = granted.ucx_port;
  if (session->host.empty())
    return Status::Unavailable("the connection to " + conn.peer() + " is gone");
  for (const std::shared_ptr<Lane>& lane : lanes_)
    session->endpoints.push_back({lane, 0});
  // One message answered on every lane: a read of nothing, which the node answers once it knows
  // the key. A node that gave a port where no UCX listens fails here, not at the first value.
  for (size_t lane = 0; lane < lanes_.size(); ++lane) {
    LaneShare probe;
    probe.transfers.push_back({});
    MoveOnLane(*session, lane, probe, deadline, /*put=*/false);
    const Status& reached = probe.transfers[0].status;
    if (!reached.ok()) {
      return Status(
          reached.code() == StatusCode::kCorruption ? StatusCode::kCorruption
                                                    : StatusCode::kUnavailable,
          fmt::format("UCX to the node at {} (its UCX listener {}:{}, lane {}): {}", conn.peer(),
                      session->host, session->port, lane, reached.message()));
    }
  }
  conn.SetArenaSession(std::move(session));
  return Status::Ok();
}

void UcxArena::MoveOnLane(Session& session, size_t index, LaneShare& share, Deadline deadline,
                          bool put) {
  Lane& lane = *lanes_[index];
  Worker& worker = *lane.worker;
  Worker::Guard held(worker);
  ucx::EndpointId& endpoint = session.endpoints[index].endpoint;
  if (endpoint == 0 || !worker.IsOpen(held, endpoint)) {
    Result<ucx::EndpointId> connected = worker.Connect(held, session.host, session.port);
    if (!connected.ok()) {
      for (LaneShare::Transfer& t : share.transfers)
        t.status = connected.status();
      return;
    }
    endpoint = *connected;
    MutexLock lock(mu_);
    ++endpoints_connected_;
  }
  std::vector<Pending> pending(share.transfers.size());
  std::vector<uint64_t> tokens;
  tokens.reserve(pending.size());
  for (size_t i = 0; i < pending.size(); ++i) {
    const LaneShare::Transfer& t = share.transfers[i];
    Pending& p = pending[i];
    p.local = t.local;
    p.bytes = t.bytes;
    p.put = put;
    const uint64_t token = lane.next_token++;
    lane.pending.emplace(token, &p);
    tokens.push_back(token);
    Pending* waiting = &p;
    auto sent = [waiting](Worker::Guard&, Status outcome) {
      waiting->sent = true;
      if (!outcome.ok()) waiting->Fail(std::move(outcome));  // no answer will come
    };
    if (put) {
      worker.Send(held, endpoint, static_cast<unsigned>(UcxMessage::kPut),
                  protocol::EncodeUcxPut({session.key, t.offset, token}), t.local, t.bytes, sent);
    } else {
      worker.Send(held, endpoint, static_cast<unsigned>(UcxMessage::kGet),
                  protocol::EncodeUcxGet({session.key, t.offset, t.bytes, token}), nullptr, 0,
                  sent);
    }
  }
  const auto all_done = [&pending] {
    return std::all_of(pending.begin(), pending.end(), [](const Pending& p) { return p.done(); });
  };
  if (!worker.ProgressUntil(held, all_done, deadline)) {
    // Closing the endpoint by force completes every operation on it; the caller's buffers are
    // not left to UCX after this returns.
    worker.Close(held, endpoint);
    endpoint = 0;
    const auto released = [&pending] {
      return std::all_of(pending.begin(), pending.end(),
                         [](const Pending& p) { return p.sent && !p.receiving; });
    };
    if (!worker.ProgressUntil(held, released, MonotonicClock::now() + kReleaseWait)) {
      log::Error("UCX: transfers still held the caller's buffers {} s after their endpoint closed",
                 kReleaseWait.count());
    }
    for (Pending& p : pending)
      p.Fail(Status::Timeout(
          fmt::format("the UCX {} did not complete before its deadline", put ? "write" : "read")));
  }
  for (uint64_t token : tokens)
    lane.pending.erase(token);
  uint64_t moved = 0;
  for (size_t i = 0; i < pending.size(); ++i) {
    share.transfers[i].status = std::move(pending[i].status);
    if (share.transfers[i].status.ok()) moved += share.transfers[i].bytes;
    // A failed transfer may have left the endpoint unusable: the next one connects afresh.
    if (!share.transfers[i].status.ok() && endpoint != 0 && !worker.IsOpen(held, endpoint))
      endpoint = 0;
  }
  MutexLock lock(mu_);
  lane_bytes_[index] += moved;
}

void UcxArena::Move(Connection& conn, std::span<ArenaMove> moves, Deadline deadline, bool put) {
  auto* session = dynamic_cast<Session*>(conn.arena_session());
  if (session == nullptr) {
    for (ArenaMove& move : moves)
      move.status = Status::Unavailable("this connection was not attached to the node's UCX");
    return;
  }
  // Each lane's share, in order: with one lane, a transfer is a whole value.
  const size_t lanes = lanes_.size();
  std::vector<LaneShare> shares(lanes);
  size_t next = 0;
  for (size_t m = 0; m < moves.size(); ++m) {
    ArenaMove& move = moves[m];
    move.status = Status::Ok();
    if (move.offset > session->arena_bytes || move.bytes > session->arena_bytes - move.offset) {
      move.status = Status::Corruption(
          fmt::format("the node named {} bytes at offset {}, outside its arena of {} bytes",
                      move.bytes, move.offset, session->arena_bytes));
      continue;
    }
    uint64_t done = 0;
    do {
      const uint64_t bytes = lanes == 1 ? move.bytes : std::min(kStripeBytes, move.bytes - done);
      LaneShare& share = shares[next++ % lanes];
      share.transfers.push_back(
          {static_cast<char*>(move.local) + done, bytes, move.offset + done, Status::Ok()});
      share.move.push_back(m);
      done += bytes;
    } while (done < move.bytes);
  }
  std::vector<std::thread> helpers;
  for (size_t lane = 1; lane < lanes; ++lane) {
    if (shares[lane].transfers.empty()) continue;
    helpers.emplace_back([this, session, lane, &shares, deadline, put] {
      MoveOnLane(*session, lane, shares[lane], deadline, put);
    });
  }
  if (!shares[0].transfers.empty()) MoveOnLane(*session, 0, shares[0], deadline, put);
  for (std::thread& helper : helpers)
    helper.join();
  for (const LaneShare& share : shares) {
    for (size_t i = 0; i < share.transfers.size(); ++i) {
      const Status& piece = share.transfers[i].status;
      Status& status = moves[share.move[i]].status;
      // A value fails with its first failed stripe; the node's fault (Corruption) wins.
      if (!piece.ok() && (status.ok() || piece.code() == StatusCode::kCorruption)) {
        status = piece;
      }
    }
  }
}

void UcxArena::Write(Connection& conn, std::span<ArenaMove> moves, Deadline deadline) {
  Move(conn, moves, deadline, /*put=*/true);
}

void UcxArena::Read(Connection& conn, std::span<ArenaMove> moves, Deadline deadline) {
  Move(conn, moves, deadline, /*put=*/false);
}

Result<const uint8_t*> UcxArena::Lend(Connection&, uint64_t, uint64_t) {
  return Status::NotSupported("values cannot be lent in place over UCX: the arena is not mapped");
}

Result<bool> UcxArena::LeasesHeld(Connection&, Deadline) {
  // The node copied each value out of its lease, under a pin of its own: a read that succeeded
  // read the leased bytes.
  return true;
}

std::vector<uint64_t> UcxArena::lane_bytes() const {
  MutexLock lock(mu_);
  return lane_bytes_;
}

uint64_t UcxArena::endpoints_connected() const {
  MutexLock lock(mu_);
  return endpoints_connected_;
}

}  // namespace kvport::client
