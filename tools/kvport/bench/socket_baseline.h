// SPDX-License-Identifier: Apache-2.0
// The limits kvport is compared with, measured in the same run: the raw loopback socket (for
// the TCP transport) and memcpy (for the shared-memory transport).
//
// The raw loopback socket baseline: how fast plain TCP over 127.0.0.1 moves bytes here, with
// nothing but send() and recv() of large buffers. That is the limit for a node on the same
// path; kvport's throughput is reported as a fraction of it.
//
// Every mode sends `bytes` in total over `streams` TCP connections (each stream its share),
// from a buffer of `write_bytes` per call into a buffer of the same size, and stops early at
// `max_seconds`. The modes:
//   blocking        one writer and one reader thread per stream, blocking calls;
//   busy-poll       the same threads, non-blocking sockets, spinning on EAGAIN;
//   busy-poll-1t    one thread per stream driving both ends, non-blocking: on a machine with
//                   few cores it avoids the context switches and the spinning of the others.
// MeasureSocketLimit runs each mode and reports all of them; the fastest is the limit.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "bench/bench_data.h"
#include "bench/bench_options.h"
#include "bench/phase_result.h"
#include "kvport/status.h"

namespace kvport::bench {

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }

 private:
  void Reset();
  int fd_ = -1;
};

struct StreamPair {
  Fd writer;
  Fd reader;
};

// A connected TCP pair over 127.0.0.1, both ends with TCP_NODELAY like kvport's sockets.
Result<StreamPair> ConnectLoopbackPair(bool non_blocking);

enum class SocketMode { kBlocking, kBusyPoll, kBusyPollOneThread };

std::string_view SocketModeName(SocketMode mode);

struct SocketBaselineOptions {
  uint64_t bytes = uint64_t{1} << 30;
  int streams = 2;
  uint64_t write_bytes = uint64_t{8} << 20;
  double max_seconds = 10;
};

// One mode. The result's system is "socket", variant the mode's name, op kPut; calls counts
// send() calls. IoError when a socket cannot be set up.
Result<PhaseResult> RunSocketBaseline(SocketMode mode, const SocketBaselineOptions& options);

// Every mode, in the order above.
Result<std::vector<PhaseResult>> MeasureSocketLimit(const SocketBaselineOptions& options);

// Destination buffers of the memcpy baseline: kBytes, every byte written once when first
// needed (so no timed copy takes a page fault), reused by every later baseline of the run.
class CopyPool {
 public:
  // More than the CPU caches hold, as the node's arena is: a copy into the pool, like one
  // into the arena, goes to memory, not to a cache line written by the previous call.
  static constexpr uint64_t kBytes = uint64_t{256} << 20;
  // The pool's memory, allocated and written on the first call.
  uint8_t* data();

 private:
  std::vector<uint8_t> bytes_;
};

// The memcpy baseline, the limit for the shared-memory transport (a put there is one copy from
// the caller's buffers into the node's arena, a get one copy out of it). Each of data.threads()
// threads copies its whole batch of values (batch x value size bytes, already written, so warm)
// with one memcpy per call, options.count calls in all, at most options.max_seconds, two ways:
//   buffers   into the thread's read buffers, the same ones every call (written before, so
//             warm): what a copy of the same bytes costs with the same working set as the
//             kvport phases, so as much of it in cache as theirs;
//   pool      into the next of the thread's slots in `pool` (256 MiB, written before): each
//             copy goes to memory not touched since long ago, as a node's arena larger than
//             the caches is. Run only when the slots are smaller than the pool (otherwise the
//             read buffers are themselves larger than the caches, and the same).
// Results: system "memcpy", variant "buffers" / "pool", op kPut, with per-call latency. The
// pool copy is the limit when it ran: "buffers" keeps a small batch in cache from one call to
// the next (61-206 GB/s for 64 KiB-4 MiB here), which no copy into a node's arena can.
std::vector<PhaseResult> RunMemcpyBaseline(const BenchOptions& options, BenchData& data,
                                           CopyPool& pool);

}  // namespace kvport::bench
