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

#include "bench/phase_result.h"
#include "kvport/status.h"

namespace kvport::bench {

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

}  // namespace kvport::bench
