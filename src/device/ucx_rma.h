// SPDX-License-Identifier: Apache-2.0
// One-sided transfers over UCX: what the UCX transport's two ends are built from, with no UCX
// type in sight (UCX is found at run time: kvport/ucx.h).
//
// A node registers its arena once (Worker::Register) and hands a client the region's packed
// remote key, base address and length, and its worker's address; the client connects to that
// worker (Worker::Connect), attaches the region (Peer::Attach) and reads from it or writes into
// it (Peer::Get, Peer::Put) without the node's code taking part. Over a transport with no
// hardware RMA (UCX's tcp, its shared memory), UCX emulates it with messages the target's
// worker handles: the target must keep calling Progress() (the node does so on its event loop).
//
// Every one-sided operation is checked against the attached region's bounds first, here, so a
// wrong offset (a forged reply, a bug) is InvalidArgument and never reaches UCX, whatever UCX's
// own key checks would do.
//
// Thread safety: a Worker serializes every UCX call on it (its worker is single-threaded in
// UCX's sense), so its objects may be used from any thread; a call that waits (Get, Put, a
// peer's close) holds the worker while it progresses it. Lifetimes: each object keeps what it
// was made from alive (a region its worker, a remote region its endpoint), so any destruction
// order is safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/monotonic_clock.h"
#include "kvport/status.h"
#include "kvport/ucx.h"

namespace kvport::ucx {

class LocalRegion;
class Peer;
class RemoteRegion;
struct WorkerState;    // the context and worker (ucx_rma.cc)
struct EndpointState;  // one endpoint (ucx_rma.cc)

class Worker {
 public:
  // A UCP context (one-sided RMA and active messages) and one worker, with this process's UCX_*
  // configuration, limited to `net_devices` when it names any (UCX_NET_DEVICES' syntax: a
  // comma-separated list, "mlx5_0:1", "lo"). NotSupported (naming why) when `runtime` is not
  // usable; Unavailable when UCX refuses (its status string in the message).
  static Result<std::unique_ptr<Worker>> Open(const UcxRuntime& runtime,
                                              std::string_view net_devices = "");
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // This worker's address, opaque bytes a peer passes to its Connect.
  const std::string& address() const;

  // Registers host memory [base, base + bytes) for remote reads and writes until the region is
  // destroyed. InvalidArgument for a null or empty range.
  Result<std::unique_ptr<LocalRegion>> Register(void* base, size_t bytes);

  // An endpoint to the worker whose address() is `remote`. Destroying the peer closes it.
  Result<std::unique_ptr<Peer>> Connect(std::string_view remote);

  // Progresses every operation of this worker once; the number of events it handled.
  unsigned Progress();

  // Sleeping until there is progress to make, as an event loop does: wait for event_fd() to be
  // readable only after Arm() returned true; when it returns false, events came in meanwhile:
  // Progress() until it returns 0 and Arm() again. The fd is the worker's (valid while it is).
  int event_fd() const;
  bool Arm();

 private:
  explicit Worker(std::shared_ptr<WorkerState> state) : state_(std::move(state)) {}
  std::shared_ptr<WorkerState> state_;
};

// Memory of this process that peers may read and write.
class LocalRegion {
 public:
  ~LocalRegion();
  uint64_t base() const { return base_; }
  size_t bytes() const { return bytes_; }
  // The remote key a peer's Attach takes.
  const std::string& packed_key() const { return packed_key_; }

 private:
  friend class Worker;
  LocalRegion(std::shared_ptr<WorkerState> worker, void* memh, uint64_t base, size_t bytes,
              std::string packed_key);
  std::shared_ptr<WorkerState> worker_;
  void* memh_;
  uint64_t base_;
  size_t bytes_;
  std::string packed_key_;
};

// A peer's registered region, attached through one endpoint.
class RemoteRegion {
 public:
  ~RemoteRegion();
  uint64_t base() const { return base_; }
  size_t bytes() const { return bytes_; }

 private:
  friend class Peer;
  RemoteRegion(std::shared_ptr<EndpointState> endpoint, void* rkey, uint64_t base, size_t bytes)
      : endpoint_(std::move(endpoint)), rkey_(rkey), base_(base), bytes_(bytes) {}
  std::shared_ptr<EndpointState> endpoint_;
  void* rkey_;
  uint64_t base_;
  size_t bytes_;
};

// An endpoint to another worker.
class Peer {
 public:
  ~Peer();
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  // The peer's region [base, base + bytes) under `packed_key` (its LocalRegion's). The key is
  // UCX's own format, which UCX unpacks without a length: it must come from the peer it names
  // (the node this client attached to, trusted for it as for its answers), never from a third
  // party. InvalidArgument for an empty key or an empty or wrapping range.
  Result<std::unique_ptr<RemoteRegion>> Attach(std::string_view packed_key, uint64_t base,
                                               size_t bytes);

  // Copies `bytes` from `region` at `offset` into `local` (host memory), or from `local` into
  // it; returns once the bytes are in place (a put: in the peer's memory, flushed). A range
  // outside the region is InvalidArgument, before anything moves. Past `deadline` the operation
  // is cancelled: Timeout. A failed transfer (the peer gone) is Unavailable with UCX's
  // status; the endpoint is then no longer usable.
  Status Get(void* local, size_t bytes, const RemoteRegion& region, uint64_t offset,
             MonotonicClock::time_point deadline);
  Status Put(const void* local, size_t bytes, const RemoteRegion& region, uint64_t offset,
             MonotonicClock::time_point deadline);

  // Many transfers with `region` at once, all posted before any is waited for (a put's flush is
  // one for all of them), so their round trips overlap; each one's outcome in its `status`, with
  // Get's and Put's meanings (a range outside the region fails that one alone, before anything
  // moves). Returns once every one is complete.
  struct Transfer {
    void* local = nullptr;  // a put's source (only read), a get's destination
    size_t bytes = 0;
    uint64_t offset = 0;
    Status status;
  };
  void GetAll(std::span<Transfer> transfers, const RemoteRegion& region,
              MonotonicClock::time_point deadline);
  void PutAll(std::span<Transfer> transfers, const RemoteRegion& region,
              MonotonicClock::time_point deadline);

 private:
  friend class Worker;
  explicit Peer(std::shared_ptr<EndpointState> endpoint) : endpoint_(std::move(endpoint)) {}
  void Move(std::span<Transfer> transfers, const RemoteRegion& region,
            MonotonicClock::time_point deadline, bool put);
  std::shared_ptr<EndpointState> endpoint_;  // closed with its last region
};

}  // namespace kvport::ucx
