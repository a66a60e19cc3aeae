// SPDX-License-Identifier: Apache-2.0
#include "client/arena_transport.h"

#include <cstring>
#include <utility>

#include "common/xxh3.h"
#include "kvport/log.h"

namespace kvport::client {

namespace {

using ReserveHandler =
    DecodingHandler<protocol::ArenaReserveRequest, protocol::ArenaReserveResponse>;
using CommitHandler = DecodingHandler<protocol::ArenaCommitRequest, protocol::ArenaCommitResponse>;
using GetHandler = DecodingHandler<protocol::ArenaGetRequest, protocol::ArenaGetResponse>;
using ReleaseHandler =
    DecodingHandler<protocol::ArenaReleaseRequest, protocol::ArenaReleaseResponse>;

// Leases of one get, released when the set is destroyed. Each lease lives on the session that
// granted it, so each goes back on its own connection: from protocol version 7 with that
// connection's next request (Connection::ReleaseLease), before it in a message of its own whose
// answer nobody waits for (ARENA_RELEASE, Connection::Post).
class LeaseSet {
 public:
  void Add(std::shared_ptr<Connection> conn, uint64_t lease_id) {
    held_.emplace_back(std::move(conn), lease_id);
  }
  ~LeaseSet() {
    for (auto& [conn, id] : held_) {
      if (!conn->alive()) continue;  // the session ended: its leases went with it
      if (conn->version() >= protocol::kUnansweredReleaseVersion) {
        conn->ReleaseLease(id);
        continue;
      }
      auto handler = std::make_unique<ReleaseHandler>();
      handler->request.lease_ids.push_back(id);
      handler->limits = conn->limits();
      protocol::EncodedFrame frame;
      const uint64_t request_id = conn->NextRequestId();
      Status s = protocol::EncodeRequest(request_id, handler->request, conn->limits(), &frame,
                                         conn->version());
      if (s.ok()) {
        s = conn->Post(request_id, frame, std::move(handler),
                       MonotonicClock::now() + std::chrono::seconds(5));
      }
      // Not fatal: a lease the node never hears about ends with the session.
      if (!s.ok())
        log::Debug("ARENA_RELEASE of lease {} on {}: {}", id, conn->peer(), s.ToString());
    }
  }

 private:
  std::vector<std::pair<std::shared_ptr<Connection>, uint64_t>> held_;
};

// A put: the reservations are sent at start; once they are answered, every reserved value is
// copied in and each frame committed on the session that reserved it.
class PutCall final : public TransportCall {
 public:
  PutCall(ArenaAccess* access, const PutBatch& batch, Deadline deadline,
          std::vector<std::unique_ptr<FrameCall<ReserveHandler>>> reserves)
      : access_(access), batch_(batch), deadline_(deadline), reserves_(std::move(reserves)) {
    batch_.first = nullptr;  // sent: a finished call keeps no connection alive
  }

  bool Ready() override {
    if (!committing_) {
      if (!FramesReady(reserves_)) return false;
      Commit();
    }
    return FramesReady(commits_);
  }

  std::span<FrameResult> Finish(Deadline deadline) override {
    // Polled to its commit, the reservations' answers are in but their tickets still held:
    // waiting for them returns at once and lets them go.
    WaitFrames(reserves_, deadline);
    if (!committing_) Commit();
    WaitFrames(commits_, deadline);
    for (size_t f = 0; f < commits_.size(); ++f) {
      FrameCall<CommitHandler>& commit = *commits_[f];
      if (commit.conn == nullptr) continue;  // nothing was committed for this frame
      if (!commit.status.ok()) {
        results_[f].status = commit.status;
        continue;
      }
      // A reserved value whose write failed was aborted: its code (set by Commit) says why it
      // failed rather than "Aborted".
      const std::vector<protocol::ArenaReservation>& reserved =
          reserves_[f]->handler.response.items;
      std::vector<StatusCode>& codes = results_[f].codes;
      for (size_t k = 0; k < codes.size(); ++k) {
        const bool write_failed =
            reserved[k].status == StatusCode::kOk && commit.handler.request.commit[k] == 0;
        if (!write_failed) codes[k] = commit.handler.response.statuses[k];
      }
    }
    ReleaseConnections(reserves_);
    ReleaseConnections(commits_);
    return results_;
  }

 private:
  // Copies every reserved value into the arena and sends each frame's ARENA_COMMIT.
  void Commit() {
    committing_ = true;
    results_.reserve(reserves_.size());
    protocol::EncodedFrame frame;
    for (auto& reserve : reserves_) {
      FrameCall<ReserveHandler>& call = *reserve;
      FrameResult& r = results_.emplace_back();
      BeginFrameResult(call, &r);
      auto& commit = commits_.emplace_back(std::make_unique<FrameCall<CommitHandler>>());
      commit->slice = call.slice;
      if (!r.status.ok()) continue;
      const protocol::ArenaReserveResponse& reserved = call.handler.response;
      for (const protocol::ArenaReservation& item : reserved.items)
        r.codes.push_back(item.status);
      if (reserved.reservation_id == 0) continue;  // nothing reserved: the codes say why

      protocol::ArenaCommitRequest& request = commit->handler.request;
      request.reservation_id = reserved.reservation_id;
      request.commit.assign(reserved.items.size(), 0);
      // The values' checksums ride with the commit (from protocol version 10 on): the bytes are
      // in the arena by then.
      request.checksums.clear();
      const bool checksums = call.conn->version() >= protocol::kChecksumVersion;
      if (checksums) request.checksums.assign(reserved.items.size(), 0);
      moves_.clear();
      for (size_t k = 0; k < reserved.items.size(); ++k) {
        if (reserved.items[k].status != StatusCode::kOk) continue;
        const protocol::MsetItem& item = batch_.items[call.slice.begin + k];
        ArenaMove& move = moves_.emplace_back();
        move.offset = reserved.items[k].offset;
        move.bytes = item.value_length;
        move.local = const_cast<void*>(item.value);  // only read
        move.item = k;
        move.hash = checksums && batch_.hash_values && item.value_length > 0;
      }
      {
        std::shared_lock writing = call.conn->BeginArenaWrite();
        access_->Write(*call.conn, moves_, deadline_);
      }
      for (const ArenaMove& move : moves_) {
        if (!move.hash || !move.status.ok()) continue;
        // An access that could not hash as it copied: the source's bytes, hashed here.
        request.checksums[move.item] = move.hashed ? move.checksum : Xxh3(move.local, move.bytes);
      }
      for (const ArenaMove& move : moves_) {
        if (move.status.code() == StatusCode::kCorruption) {
          r.status = move.status;  // the node broke the protocol: fail the frame
          break;
        }
        if (move.status.ok()) {
          request.commit[move.item] = 1;
        } else {
          r.codes[move.item] = move.status.code();  // this value alone: aborted below
        }
      }
      if (!r.status.ok()) {
        call.conn->Close(r.status);  // after the write guard is gone: Close waits for writers
        continue;
      }
      commit->conn = call.conn;
      commit->handler.limits = call.conn->limits();
      const uint64_t id = call.conn->NextRequestId();
      Status encoded =
          protocol::EncodeRequest(id, request, call.conn->limits(), &frame, call.conn->version());
      Result<Connection::Ticket> ticket =
          encoded.ok() ? call.conn->Send(id, frame, &commit->handler, deadline_)
                       : Result<Connection::Ticket>(encoded);
      if (ticket.ok()) {
        commit->ticket = std::move(ticket).value();
      } else {
        commit->status = ticket.status();
      }
    }
  }

  ArenaAccess* const access_;
  PutBatch batch_;
  const Deadline deadline_;
  std::vector<std::unique_ptr<FrameCall<ReserveHandler>>> reserves_;
  bool committing_ = false;
  std::vector<FrameResult> results_;                                // per frame, from Commit
  std::vector<std::unique_ptr<FrameCall<CommitHandler>>> commits_;  // per frame; conn null: none
  std::vector<ArenaMove> moves_;                                    // one frame's values at a time
};

// A get: the pins are sent at start; Finish copies the hits out (or lends them) and lets the
// leases go (or hands them to the loan).
class GetCall final : public TransportCall {
 public:
  GetCall(ArenaAccess* access, const GetBatch& batch, Deadline deadline, Loan* loan,
          std::vector<std::unique_ptr<FrameCall<GetHandler>>> gets)
      : access_(access), batch_(batch), deadline_(deadline), loan_(loan), gets_(std::move(gets)) {
    batch_.first = nullptr;  // sent: a finished call keeps no connection alive
  }

  bool Ready() override { return FramesReady(gets_); }

  std::span<FrameResult> Finish(Deadline deadline) override {
    WaitFrames(gets_, deadline);
    auto held = std::make_shared<LeaseSet>();
    std::vector<FrameResult>& results = results_;
    results.reserve(gets_.size());
    for (auto& call : gets_) {
      FrameResult& r = results.emplace_back();
      BeginFrameResult(*call, &r);
      if (!r.status.ok()) continue;
      const protocol::ArenaGetResponse& got = call->handler.response;
      if (got.lease_id != 0) {
        held->Add(call->conn, got.lease_id);
        if (loan_ != nullptr) loan_->sessions.push_back(call->conn);
      }
      moves_.clear();
      for (size_t k = 0; k < got.results.size(); ++k) {
        const protocol::ArenaGetResult& item = got.results[k];
        r.codes.push_back(item.status);
        r.value_lengths.push_back(item.value_length);
        r.metas.emplace_back(item.meta);
        r.checksums.push_back(item.checksum);
        if (item.status != StatusCode::kOk) continue;
        const size_t i = call->slice.begin + k;
        if (loan_ == nullptr) {
          ArenaMove& move = moves_.emplace_back();
          move.offset = item.offset;
          move.bytes = item.value_length;
          move.local = batch_.destinations[i];
          move.item = k;
          move.hash = batch_.hash_values && item.checksum != 0;
          continue;
        }
        Result<const uint8_t*> view = access_->Lend(*call->conn, item.offset, item.value_length);
        if (view.ok()) {
          loan_->views[i] = *view;
        } else {
          moves_.push_back({item.offset, item.value_length, nullptr, k, view.status()});
        }
      }
      const bool read_any = loan_ == nullptr && !moves_.empty();
      if (read_any) access_->Read(*call->conn, moves_, deadline_);
      for (const ArenaMove& move : moves_) {
        if (move.status.code() == StatusCode::kCorruption) {
          r.status = move.status;  // the node broke the protocol
          call->conn->Close(move.status);
          break;
        }
        if (!move.status.ok()) r.codes[move.item] = move.status.code();  // this value alone
      }
      if (batch_.hash_values && loan_ == nullptr) {
        // Each value's checksum as received (0 where there is nothing to check), hashed by the
        // access as it copied, or here when it could not.
        r.received_checksums.assign(got.results.size(), 0);
        for (const ArenaMove& move : moves_) {
          if (!move.hash || !move.status.ok()) continue;
          r.received_checksums[move.item] =
              move.hashed ? move.checksum : Xxh3(move.local, move.bytes);
        }
      }
      // Read under the lease: trusted only if the node had not ended it (the session closed
      // meanwhile, and the bytes may have been reused) by the time the reads were done.
      if (read_any && r.status.ok()) {
        Result<bool> still_held = access_->LeasesHeld(*call->conn, deadline_);
        if (!still_held.ok()) {
          r.status = still_held.status();
        } else if (!*still_held) {
          r.status = Status::Unavailable("the node at " + call->conn->peer() +
                                         " ended the session while its values were being read");
        }
      }
    }
    if (loan_ != nullptr) loan_->lease = std::move(held);  // otherwise released here
    ReleaseConnections(gets_);                             // the leases keep what they need
    return results;
  }

 private:
  ArenaAccess* const access_;
  GetBatch batch_;
  const Deadline deadline_;
  Loan* const loan_;
  std::vector<std::unique_ptr<FrameCall<GetHandler>>> gets_;
  std::vector<FrameResult> results_;
  std::vector<ArenaMove> moves_;  // one frame's values at a time
};

}  // namespace

void MappedArena::Write(Connection& conn, std::span<ArenaMove> moves, Deadline) {
  for (ArenaMove& move : moves) {
    Result<uint8_t*> to = conn.arena()->WriteRange(move.offset, move.bytes);
    move.status = to.status();
    if (!to.ok() || move.bytes == 0) continue;
    // The caller's bytes are hashed, as they are read for the copy.
    move.checksum = CopyHashing(*to, move.local, move.bytes, move.hash, /*hash_destination=*/false);
    move.hashed = move.hash;
  }
}

void MappedArena::Read(Connection& conn, std::span<ArenaMove> moves, Deadline) {
  for (ArenaMove& move : moves) {
    Result<const uint8_t*> from = conn.arena()->ReadRange(move.offset, move.bytes);
    move.status = from.status();
    if (!from.ok() || move.bytes == 0) continue;
    // What the caller gets is hashed, as it is written.
    move.checksum =
        CopyHashing(move.local, *from, move.bytes, move.hash, /*hash_destination=*/true);
    move.hashed = move.hash;
  }
}

Result<const uint8_t*> MappedArena::Lend(Connection& conn, uint64_t offset, uint64_t bytes) {
  return conn.arena()->ReadRange(offset, bytes);
}

Result<bool> MappedArena::LeasesHeld(Connection& conn, Deadline) {
  return conn.leases_held();
}

ArenaTransport::ArenaTransport(std::unique_ptr<ArenaAccess> access,
                               std::unique_ptr<ConnectionPool> pool)
    : access_(std::move(access)), stream_(std::move(pool), std::string(access_->name())) {}

// The arena calls are made afresh for every call (their values move through the arena, and a
// get's leases go back through Connection::ReleaseLease): the transport whose warm calls
// allocate nothing is the stream one.
void ArenaTransport::StartPut(const PutBatch& batch, Deadline deadline,
                              std::unique_ptr<TransportCall>* call) {
  uint64_t value_bytes = 0;
  for (const protocol::MsetItem& item : batch.items)
    value_bytes += item.value_length;
  if (value_bytes <= kMaxInlinePutBytes) {
    stream_.StartPut(batch, deadline, call);  // one exchange, the values in the request
    return;
  }
  std::vector<std::unique_ptr<FrameCall<ReserveHandler>>> reserves;
  protocol::EncodedFrame frame;
  SendFrames<ReserveHandler>(batch.slices, batch.first, pool(), deadline,
                             EncodeWith<ReserveHandler>([&](FrameCall<ReserveHandler>& reserve) {
                               FillPutRequest(batch, reserve.slice, &reserve.handler.request);
                             }),
                             &reserves, &frame);
  *call = std::make_unique<PutCall>(access_.get(), batch, deadline, std::move(reserves));
}

void ArenaTransport::StartGet(const GetBatch& batch, Deadline deadline, Loan* loan,
                              std::unique_ptr<TransportCall>* call) {
  if (batch.meta_only && loan == nullptr) {
    stream_.StartGet(batch, deadline, nullptr, call);  // no value moves
    return;
  }
  if (loan != nullptr) loan->views.assign(batch.keys.size(), nullptr);
  std::vector<std::unique_ptr<FrameCall<GetHandler>>> gets;
  protocol::EncodedFrame frame;
  SendFrames<GetHandler>(batch.slices, batch.first, pool(), deadline,
                         EncodeWith<GetHandler>([&](FrameCall<GetHandler>& get) {
                           FillGetRequest(batch, get.slice, &get.handler.request);
                         }),
                         &gets, &frame);
  *call = std::make_unique<GetCall>(access_.get(), batch, deadline, loan, std::move(gets));
}

}  // namespace kvport::client
