// SPDX-License-Identifier: Apache-2.0
#include "client/shm_transport.h"

#include <cstring>
#include <utility>

#include "kvport/log.h"

namespace kvport::client {

namespace {

using ReserveHandler = DecodingHandler<protocol::ShmReserveRequest, protocol::ShmReserveResponse>;
using CommitHandler = DecodingHandler<protocol::ShmCommitRequest, protocol::ShmCommitResponse>;
using GetHandler = DecodingHandler<protocol::ShmGetRequest, protocol::ShmGetResponse>;
using ReleaseHandler = DecodingHandler<protocol::ShmReleaseRequest, protocol::ShmReleaseResponse>;

// Leases of one get, released (SHM_RELEASE, not waited for) when the set is destroyed. Each
// lease lives on the session that granted it, so each goes back on its own connection.
class LeaseSet {
 public:
  void Add(std::shared_ptr<Connection> conn, uint64_t lease_id) {
    held_.emplace_back(std::move(conn), lease_id);
  }
  ~LeaseSet() {
    for (auto& [conn, id] : held_) {
      if (!conn->alive()) continue;  // the session ended: its leases went with it
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
      if (!s.ok()) log::Debug("SHM_RELEASE of lease {} on {}: {}", id, conn->peer(), s.ToString());
    }
  }

 private:
  std::vector<std::pair<std::shared_ptr<Connection>, uint64_t>> held_;
};

}  // namespace

ShmTransport::ShmTransport(std::unique_ptr<ArenaMapper> mapper,
                           std::unique_ptr<ConnectionPool> pool)
    : mapper_(std::move(mapper)), stream_(std::move(pool), "shared memory") {}

std::vector<FrameResult> ShmTransport::Put(const PutBatch& batch, Deadline deadline) {
  auto reserves =
      RunFrames<ReserveHandler>(batch.slices, batch.first, pool(), deadline,
                                EncodeWith<ReserveHandler>([&](FrameCall<ReserveHandler>& call) {
                                  FillPutRequest(batch, call.slice, &call.handler.request);
                                }));

  std::vector<FrameResult> results;
  results.reserve(reserves.size());
  // Copy every reserved value in, then commit each frame on the session that reserved it.
  std::vector<std::unique_ptr<CommitHandler>> commits(reserves.size());
  std::vector<Connection::Ticket> tickets(reserves.size());
  protocol::EncodedFrame frame;
  for (size_t f = 0; f < reserves.size(); ++f) {
    FrameCall<ReserveHandler>& call = *reserves[f];
    FrameResult& r = results.emplace_back(StartResult(call));
    if (!r.status.ok()) continue;
    const protocol::ShmReserveResponse& reserved = call.handler.response;
    for (const protocol::ShmReservation& item : reserved.items)
      r.codes.push_back(item.status);
    if (reserved.reservation_id == 0) continue;  // nothing reserved: the codes say why

    auto commit = std::make_unique<CommitHandler>();
    commit->request.reservation_id = reserved.reservation_id;
    commit->request.commit.assign(reserved.items.size(), 0);
    {
      std::shared_lock writing = call.conn->BeginArenaWrite();
      const std::shared_ptr<ArenaMapping>& arena = call.conn->arena();
      for (size_t k = 0; k < reserved.items.size(); ++k) {
        if (reserved.items[k].status != StatusCode::kOk) continue;
        const protocol::MsetItem& item = batch.items[call.slice.begin + k];
        Result<uint8_t*> to = arena->WriteRange(reserved.items[k].offset, item.value_length);
        if (!to.ok()) {
          r.status = to.status();  // the node broke the protocol: fail the frame
          break;
        }
        if (item.value_length > 0) std::memcpy(*to, item.value, item.value_length);
        commit->request.commit[k] = 1;
      }
    }
    if (!r.status.ok()) {
      call.conn->Close(r.status);  // after the write guard is gone: Close waits for writers
      continue;
    }
    commit->limits = call.conn->limits();
    const uint64_t id = call.conn->NextRequestId();
    Status encoded = protocol::EncodeRequest(id, commit->request, call.conn->limits(), &frame,
                                             call.conn->version());
    Result<Connection::Ticket> ticket = encoded.ok()
                                            ? call.conn->Send(id, frame, commit.get(), deadline)
                                            : Result<Connection::Ticket>(encoded);
    if (!ticket.ok()) {
      r.status = ticket.status();
      continue;
    }
    tickets[f] = std::move(ticket).value();
    commits[f] = std::move(commit);
  }
  for (size_t f = 0; f < reserves.size(); ++f) {
    if (tickets[f] == nullptr) continue;
    Status waited = reserves[f]->conn->Wait(tickets[f], deadline);
    if (!waited.ok()) {
      results[f].status = waited;
    } else {
      results[f].codes = std::move(commits[f]->response.statuses);
    }
  }
  return results;
}

std::vector<FrameResult> ShmTransport::Pin(const GetBatch& batch, Deadline deadline, Loan* loan) {
  auto gets = RunFrames<GetHandler>(batch.slices, batch.first, pool(), deadline,
                                    EncodeWith<GetHandler>([&](FrameCall<GetHandler>& call) {
                                      FillGetRequest(batch, call.slice, &call.handler.request);
                                    }));
  auto held = std::make_shared<LeaseSet>();
  std::vector<FrameResult> results;
  results.reserve(gets.size());
  for (auto& call : gets) {
    FrameResult& r = results.emplace_back(StartResult(*call));
    if (!r.status.ok()) continue;
    const protocol::ShmGetResponse& got = call->handler.response;
    if (got.lease_id != 0) {
      held->Add(call->conn, got.lease_id);
      if (loan != nullptr) loan->sessions.push_back(call->conn);
    }
    const std::shared_ptr<ArenaMapping>& arena = call->conn->arena();
    for (size_t k = 0; k < got.results.size(); ++k) {
      const protocol::ShmGetResult& item = got.results[k];
      r.codes.push_back(item.status);
      r.value_lengths.push_back(item.value_length);
      r.metas.emplace_back(item.meta);
      if (item.status != StatusCode::kOk) continue;
      Result<const uint8_t*> from = arena->ReadRange(item.offset, item.value_length);
      if (!from.ok()) {
        r.status = from.status();  // the node broke the protocol
        call->conn->Close(from.status());
        break;
      }
      const size_t i = call->slice.begin + k;
      if (loan == nullptr) {
        if (item.value_length > 0) std::memcpy(batch.destinations[i], *from, item.value_length);
      } else {
        loan->views[i] = *from;
      }
    }
  }
  if (loan != nullptr) loan->lease = std::move(held);  // otherwise released here
  return results;
}

std::vector<FrameResult> ShmTransport::Get(const GetBatch& batch, Deadline deadline) {
  if (batch.meta_only) return stream_.Get(batch, deadline);  // no value moves
  return Pin(batch, deadline, nullptr);
}

Result<Transport::Loan> ShmTransport::Lend(const GetBatch& batch, Deadline deadline) {
  Loan loan;
  loan.views.assign(batch.keys.size(), nullptr);
  loan.frames = Pin(batch, deadline, &loan);
  return loan;
}

}  // namespace kvport::client
