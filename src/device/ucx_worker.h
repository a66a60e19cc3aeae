// SPDX-License-Identifier: Apache-2.0
// A UCX worker with its endpoints and active messages: what the UCX transport's two ends are
// built from, with no UCX type in sight (UCX is found at run time: kvport/ucx.h).
//
// A node listens (Listen) where its TCP port listens; a client connects an endpoint to that
// listener (Connect). Everything then moves as active messages: a header of a few bytes and
// optional data, handed to the receiver's handler for its id (SetHandler), which decides what
// to do with the data: data of up to kEagerBytes arrives with the message; larger data is still at
// the sender and comes only when the handler asks for it into memory of its choosing (Receive),
// after it has checked the request. No memory of this process is registered for peers to reach on
// their own: over UCX's software transports (tcp, shared memory) nothing would check a remote key's
// range, and this way the only bytes a peer can read or write are those its receiver's handler
// chose.
//
// Locking: every UCX call on a worker is made with the worker held (UCX's worker is
// single-threaded in UCX's sense). A thread holds it with a Worker::Guard; handlers and
// completion callbacks run inside Progress, with the worker held by whoever progresses it, and
// are handed that Guard: they may call any method but must not make a Guard of their own.
//
// Lifetimes: an operation's completion callback runs exactly once, from Progress (or before the
// call that started it returns). Destroying the worker closes every endpoint by force and
// progresses until every operation has completed, so no callback outlives it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/monotonic_clock.h"
#include "kvport/status.h"
#include "kvport/ucx.h"

namespace kvport::ucx {

struct WorkerState;  // the context, the worker, its endpoints (ucx_worker.cc)

// An endpoint of a worker, by number; 0 is none. Numbers are never reused by a worker.
using EndpointId = uint64_t;

class Worker {
 public:
  // The worker held by this thread: made from the worker (locks it), or handed to a handler.
  class Guard {
   public:
    explicit Guard(Worker& worker);
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    friend struct WorkerState;
    explicit Guard(WorkerState* state) : state_(state), owns_(false) {}
    WorkerState* state_;
    bool owns_;
  };

  // A UCP context (active messages, an event fd) and one worker, with this process's UCX_*
  // configuration, limited to `net_devices` when it names any (UCX_NET_DEVICES' syntax: a
  // comma-separated list, "mlx5_0:1", "lo"). NotSupported (naming why) when `runtime` is not
  // usable; Unavailable when UCX refuses.
  static Result<std::unique_ptr<Worker>> Open(const UcxRuntime& runtime,
                                              std::string_view net_devices = "");
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Accepts peers' Connect on `host`:`port` (a numeric IPv4 or IPv6 address; port 0 picks a
  // free one); returns the port. At most `max_endpoints` accepted endpoints are open at once:
  // a peer over that is rejected. One listener per worker. Unavailable when UCX refuses.
  Result<uint16_t> Listen(Guard& held, const std::string& host, uint16_t port,
                          size_t max_endpoints);

  // An endpoint to the worker listening on `host`:`port` (numeric). Connecting goes on in the
  // background: messages sent meanwhile wait for it, and fail if it fails. InvalidArgument for
  // an address that is not numeric.
  Result<EndpointId> Connect(Guard& held, const std::string& host, uint16_t port);

  // Closes the endpoint by force: its operations complete (with an error). No-op for one that
  // is closed already (by this call, or by UCX when its peer failed).
  void Close(Guard& held, EndpointId endpoint);
  bool IsOpen(Guard& held, EndpointId endpoint) const;
  size_t open_endpoints(Guard& held) const;

  // A message that arrived; valid only during its handler's call.
  struct Message {
    unsigned id = 0;
    std::string_view header;
    size_t bytes = 0;            // the data's length
    const void* data = nullptr;  // the data, when it came with the message; null when it is
                                 // still at the sender (Receive it, or it is dropped)
    EndpointId from = 0;         // the endpoint it came through (0: unknown, no reply possible)
    void* descriptor = nullptr;  // for Receive
  };
  using Handler = std::function<void(Guard& held, const Message& message)>;
  // Messages of `id` go to `handler` from now on (before any can arrive: set handlers before
  // Listen or Connect). Unavailable when UCX refuses.
  Status SetHandler(Guard& held, unsigned id, Handler handler);

  // Data of at most this many bytes travels with its message; larger data is left at the
  // sender (UCX's rendezvous) until the receiver's handler Receives it where it chose.
  static constexpr size_t kEagerBytes = size_t{64} << 10;

  // Runs once when an operation is complete: Ok, or why it failed.
  using Done = std::function<void(Guard& held, Status outcome)>;
  // Sends `header` and [data, data + bytes) to `to` as a message of `id`; `done` runs once the
  // data may be reused (not necessarily received). A closed or unknown endpoint fails it.
  void Send(Guard& held, EndpointId to, unsigned id, std::string_view header, const void* data,
            size_t bytes, Done done);
  // From a handler, for a message whose data is still at the sender: receives the data into
  // [to, to + message.bytes); `done` runs once it is there, or failed.
  void Receive(Guard& held, const Message& message, void* to, Done done);

  // Progresses every operation of this worker once; the number of events it handled.
  unsigned Progress(Guard& held);
  // Progresses until `finished()` or `deadline`; whether `finished()` became true.
  bool ProgressUntil(Guard& held, const std::function<bool()>& finished,
                     MonotonicClock::time_point deadline);
  // Operations started and not complete yet.
  size_t operations_in_flight(Guard& held) const;

  // Sleeping until there is progress to make, as an event loop does: wait for event_fd() to be
  // readable only after Arm() returned true; when it returns false, events came in meanwhile:
  // Progress() until it returns 0 and Arm() again. The fd is the worker's (valid while it is).
  int event_fd() const;
  bool Arm(Guard& held);

 private:
  explicit Worker(std::shared_ptr<WorkerState> state) : state_(std::move(state)) {}
  std::shared_ptr<WorkerState> state_;
};

}  // namespace kvport::ucx
