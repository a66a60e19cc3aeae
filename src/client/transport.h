// SPDX-License-Identifier: Apache-2.0
// Transport: how the values of a batched put or get move between a caller's host buffers and a
// node, in the style of NIXL's backends: a narrow interface, capabilities a caller can ask, and
// one implementation per data path.
//
//   StreamTransport values travel in the frames' payload sections (writev from the caller's
//                  buffers, readv into them): TCP to any node, or a Unix socket.
//   ArenaTransport values move straight into an extent of the node's arena the node reserved
//                  (ARENA_RESERVE, ARENA_COMMIT) and out of the pinned object (ARENA_GET,
//                  ARENA_RELEASE); the socket carries only control frames. The arena is mapped here
//                  (a node on this host: shared memory, one memcpy or a loan in place) or reached
//                  through the node's UCX service (node-checked messages; RDMA where the host has
//                  it).
//   (later)        GPUDirect over UCX: needs_registration, device memory it moves itself.
//
// Everything else of a call is the Client's and the same for every transport: checking keys
// and sizes, staging the device buffers of every kind of memory the transport does not move
// itself (TransportCapabilities::memory_kinds) through pinned host memory, cutting the batch
// into frames that fit the node's limits, turning per-key answers into KeyCodes. Control requests
// (MEXIST, MDEL, LIST, STATS, PING) use the transport's pool directly: they carry no values.
//
// Thread-safe: any number of calls at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/batch_call.h"
#include "client/connection.h"
#include "client/connection_pool.h"
#include "client/frame_planner.h"
#include "kvport/device.h"
#include "kvport/io_buffers.h"
#include "kvport/status.h"
#include "protocol/messages.h"

namespace kvport::client {

// A set of memory kinds (RuntimeKind), one bit each.
constexpr uint32_t MemoryKindBit(RuntimeKind kind) {
  return 1u << static_cast<unsigned>(kind);
}

// What bounds the bytes a transport's peer can reach in the node (docs/transports.md, "Memory
// protection, per path"): a node-checked path is served by the node, which copies only inside
// what the session holds; a trusted peer has the arena mapped and is bounded by who may attach
// (the node's uid and a token granting every namespace), not per value. No path hands out a
// remote key to node memory.
enum class MemoryProtection { kNodeChecked, kTrustedPeer };

struct TransportCapabilities {
  bool zero_copy_reads = false;     // values can be lent in place (Client::MGetInPlace)
  bool needs_registration = false;  // buffers must be registered with the transport first
  // The memory the transport moves itself (MemoryKindBit of each): host always, a device kind
  // only where the backend reaches that memory directly (UCX with CUDA support: GPUDirect RDMA).
  // Every other kind is staged by the client, so the transport sees host memory in its place.
  uint32_t memory_kinds = MemoryKindBit(RuntimeKind::kHost);
  MemoryProtection memory_protection = MemoryProtection::kNodeChecked;
  bool Moves(RuntimeKind kind) const { return (memory_kinds & MemoryKindBit(kind)) != 0; }
};

// One batched put, after the client's checks: items[k] (its value's address in the memory
// memory[k] says, a kind the transport moves) in the frames `slices` cut; the first frame goes
// on `first`.
struct PutBatch {
  std::string_view ns;
  uint32_t ttl_seconds = 0;
  std::span<const protocol::MsetItem> items;
  std::span<const MemoryInfo> memory;
  std::span<const FrameSlice> slices;
  std::shared_ptr<Connection> first;
  // The values' checksums go with them (client/value_checksums.h), computed by the transport
  // where it can fuse them with a copy it makes anyway (items' own checksum fields are 0).
  bool hash_values = false;
};

// One batched get: keys[k] (with the capacity of their buffer) into destinations[k] (in the
// memory memory[k] says, a kind the transport moves) in the frames `slices` cut; meta_only asks
// for metas and lengths alone (no destinations then).
struct GetBatch {
  std::string_view ns;
  bool any_namespace = false;
  bool meta_only = false;
  std::span<const protocol::MgetKey> keys;
  std::span<char* const> destinations;
  std::span<const MemoryInfo> memory;
  std::span<const FrameSlice> slices;
  std::shared_ptr<Connection> first;
  // Hash each value as it arrives, where the transport can (FrameResult::received_checksums).
  bool hash_values = false;
};

// The request for one frame of a put: an MSET, or an ARENA_RESERVE (the same fields).
template <typename PutRequest>
void FillPutRequest(const PutBatch& batch, const FrameSlice& slice, PutRequest* request) {
  request->ns = batch.ns;
  request->ttl_seconds = batch.ttl_seconds;
  request->items.assign(batch.items.begin() + slice.begin, batch.items.begin() + slice.end);
}

// The request for one frame of a get: an MGET, or an ARENA_GET (no meta_only field).
template <typename GetRequest>
void FillGetRequest(const GetBatch& batch, const FrameSlice& slice, GetRequest* request) {
  request->ns = batch.ns;
  request->any_namespace = batch.any_namespace;
  if constexpr (requires { request->meta_only; }) request->meta_only = batch.meta_only;
  request->keys.assign(batch.keys.begin() + slice.begin, batch.keys.begin() + slice.end);
}

// SendFrames' encoder for a handler whose request Fill(call.slice, &request) sets up.
template <typename Handler, typename Fill>
auto EncodeWith(Fill fill) {
  return [fill](FrameCall<Handler>& call, uint64_t id, const protocol::Limits& limits,
                protocol::EncodedFrame* frame) {
    fill(call);
    call.handler.limits = limits;
    return protocol::EncodeRequest(id, call.handler.request, limits, frame, call.conn->version());
  };
}

// The answer to one frame of a batch: `status` OK when the node answered it (then one entry per
// item of the slice in `codes`, and for gets `value_lengths`/`metas` for kOk and kTooLarge),
// otherwise why the whole frame failed.
struct FrameResult {
  FrameSlice slice;
  Status status;
  std::string peer;
  std::vector<StatusCode> codes;
  std::vector<uint64_t> value_lengths;
  std::vector<std::string> metas;
  std::vector<uint64_t> checksums;  // gets: each value's as the node answered it (0: none)
  // Gets whose transport hashed the values as they arrived (GetBatch::hash_values): each
  // value's checksum as received; empty otherwise (the caller hashes what landed).
  std::vector<uint64_t> received_checksums;
};

// Starts *r over as the result of `call`'s frame (its slice, status and node), before its
// per-item answers; the lists keep their capacity.
template <typename Handler>
void BeginFrameResult(const FrameCall<Handler>& call, FrameResult* r) {
  r->slice = call.slice;
  r->status = call.status;
  if (call.conn != nullptr) {
    r->peer.assign(call.conn->peer());
  } else {
    r->peer.clear();
  }
  r->codes.clear();
  r->value_lengths.clear();
  r->metas.clear();
  r->checksums.clear();
  r->received_checksums.clear();
}

// Values lent in place (zero_copy_reads): `views[k]` points at item k's value (for kOk items;
// null otherwise) until `lease` is destroyed, which tells the node it may reuse the bytes.
struct Loan {
  std::vector<const uint8_t*> views;
  std::shared_ptr<void> lease;
  std::vector<std::shared_ptr<Connection>> sessions;  // those holding its leases
};

// A batch a transport has started (the post of post/check): its first frames are sent, and
// Finish completes it. Ready() says, without waiting for the node, whether Finish would return
// at once; it reads what has arrived and takes the next step of a data path with several
// (shared memory's commit after its reservations), so polling it makes progress. Destroying an
// unfinished call gives it up: no byte is moved into or out of the caller's buffers after.
class TransportCall {
 public:
  virtual ~TransportCall() = default;
  virtual bool Ready() = 0;
  // One FrameResult per slice, in slice order, kept by the call until it is started again or
  // destroyed. A put's values are visible (each key atomically) when its frame's code says kOk;
  // a get has written a kOk key's value into its destination (or, lending, set the loan's
  // view). Called once per start.
  virtual std::span<FrameResult> Finish(Deadline deadline) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // "TCP", "shared memory", "Unix socket" (bytes through a Unix socket: shared memory declined).
  virtual std::string_view name() const = 0;
  virtual TransportCapabilities capabilities() const = 0;
  // The connections to the node. Control requests use it directly.
  virtual ConnectionPool& pool() = 0;

  // Starts a put or a get as *call. A finished call this transport made before, left in *call,
  // is started again in its own storage (so a warm call allocates nothing); anything else there
  // is replaced. The batch's spans (and the buffers they point at) must stay valid until the
  // call is finished or destroyed. `loan` (zero_copy_reads only; NotSupported otherwise, as
  // every frame's status) lends the values in place instead of copying them into the
  // destinations; it must outlive the call.
  virtual void StartPut(const PutBatch& batch, Deadline deadline,
                        std::unique_ptr<TransportCall>* call) = 0;
  virtual void StartGet(const GetBatch& batch, Deadline deadline, Loan* loan,
                        std::unique_ptr<TransportCall>* call) = 0;
};

// The call of type T in *call to start again, or a new one put there.
template <typename T>
T* ReusableCall(std::unique_ptr<TransportCall>* call) {
  if (T* again = dynamic_cast<T*>(call->get())) return again;
  auto made = std::make_unique<T>();
  T* started = made.get();
  *call = std::move(made);
  return started;
}

// A TransportCall over SendFrames' calls: Ready when every response is in; Finish waits for
// them and turns each into its FrameResult with Collect{}(call, &result) (for calls whose
// response was accepted). Started again (calls(), frame() for SendFrames), it reuses all of it.
template <typename Handler, typename Collect>
class FramesCall final : public TransportCall {
 public:
  std::vector<std::unique_ptr<FrameCall<Handler>>>* calls() { return &calls_; }
  protocol::EncodedFrame* frame() { return &frame_; }

  bool Ready() override { return FramesReady(calls_); }
  std::span<FrameResult> Finish(Deadline deadline) override {
    WaitFrames(calls_, deadline);
    results_.resize(calls_.size());
    for (size_t f = 0; f < calls_.size(); ++f) {
      FrameCall<Handler>& call = *calls_[f];
      BeginFrameResult(call, &results_[f]);
      if (results_[f].status.ok()) Collect{}(call, &results_[f]);
    }
    ReleaseConnections(calls_);
    return results_;
  }

 private:
  std::vector<std::unique_ptr<FrameCall<Handler>>> calls_;
  protocol::EncodedFrame frame_;
  std::vector<FrameResult> results_;
};

// Puts in *call a TransportCall decided before anything was sent: every slice fails with
// `status`.
void FailedCall(std::span<const FrameSlice> slices, Status status,
                std::unique_ptr<TransportCall>* call);

}  // namespace kvport::client
