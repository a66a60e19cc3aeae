// SPDX-License-Identifier: Apache-2.0
#include "bench/round_trip_baseline.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench/phase_driver.h"
#include "bench/socket_baseline.h"

namespace kvport::bench {
namespace {

// Messages larger than this are sent and received in pieces of it from one buffer: a row of
// 16 x 32 MiB values needs no 512 MiB buffers, and the bytes' content plays no part.
constexpr uint64_t kChunkBytes = uint64_t{8} << 20;

Result<StreamPair> ConnectUnixPair(bool non_blocking) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return Status::FromErrno("socketpair(AF_UNIX)", errno);
  }
  StreamPair pair{Fd(fds[0]), Fd(fds[1])};
  if (non_blocking) {
    for (int fd : fds) {
      if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        return Status::FromErrno("fcntl(O_NONBLOCK)", errno);
      }
    }
  }
  return pair;
}

// Sends `n` bytes (from `chunk`, repeated); a non-blocking socket spins on EAGAIN.
Status SendAll(int fd, const std::vector<char>& chunk, uint64_t n) {
  while (n > 0) {
    const size_t piece = static_cast<size_t>(std::min<uint64_t>(n, chunk.size()));
    const ssize_t w = ::send(fd, chunk.data(), piece, MSG_NOSIGNAL);
    if (w > 0) {
      n -= static_cast<uint64_t>(w);
    } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
      return Status::FromErrno("send", errno);
    }
  }
  return Status::Ok();
}

// Receives `n` bytes (into `chunk`, overwritten); Unavailable when the peer closes first.
Status ReceiveAll(int fd, std::vector<char>* chunk, uint64_t n) {
  while (n > 0) {
    const size_t piece = static_cast<size_t>(std::min<uint64_t>(n, chunk->size()));
    const ssize_t r = ::recv(fd, chunk->data(), piece, 0);
    if (r > 0) {
      n -= static_cast<uint64_t>(r);
    } else if (r == 0) {
      return Status::Unavailable("the peer closed");
    } else if (errno != EAGAIN && errno != EINTR) {
      return Status::FromErrno("recv", errno);
    }
  }
  return Status::Ok();
}

std::vector<char> Chunk(uint64_t message_bytes) {
  return std::vector<char>(static_cast<size_t>(std::clamp<uint64_t>(message_bytes, 1, kChunkBytes)),
                           'r');
}

}  // namespace

std::string_view RoundTripModeName(RoundTripMode mode) {
  return mode == RoundTripMode::kBlocking ? "blocking" : "busy-poll";
}

Result<PhaseResult> RunRoundTrip(RoundTripMode mode, const RoundTripOptions& options) {
  const int connections = std::max(1, options.connections);
  const bool non_blocking = mode == RoundTripMode::kBusyPoll;
  std::vector<StreamPair> pairs;
  for (int i = 0; i < connections; ++i) {
    KVPORT_ASSIGN_OR_RETURN(StreamPair pair, options.socket == RoundTripSocket::kTcp
                                                 ? ConnectLoopbackPair(non_blocking)
                                                 : ConnectUnixPair(non_blocking));
    pairs.push_back(std::move(pair));
  }
  // The server ends: read a request, answer it, until the client end closes.
  std::vector<std::string> server_errors(connections);
  std::vector<std::thread> servers;
  for (int i = 0; i < connections; ++i) {
    servers.emplace_back([&, i] {
      std::vector<char> in = Chunk(options.request_bytes);
      const std::vector<char> out = Chunk(options.response_bytes);
      const int fd = pairs[i].reader.get();
      while (true) {
        Status got = ReceiveAll(fd, &in, options.request_bytes);
        if (got.code() == StatusCode::kUnavailable) return;  // the client is done
        Status answered = got.ok() ? SendAll(fd, out, options.response_bytes) : got;
        if (!answered.ok()) {
          server_errors[i] = answered.ToString();
          return;
        }
      }
    });
  }
  // Each client thread's buffers, touched before the clock starts.
  std::vector<std::vector<char>> requests(connections, Chunk(options.request_bytes));
  std::vector<std::vector<char>> responses(connections, Chunk(options.response_bytes));
  PhaseResult result;
  result.system = "round trip";
  result.variant = std::string(RoundTripModeName(mode));
  result.op = Op::kPut;
  PhaseLimits limits;
  limits.threads = connections;
  limits.calls = std::max<uint64_t>(options.calls, 1);
  limits.max_time = std::chrono::duration<double>(options.max_seconds);
  RunTimedPhase(
      limits,
      [&](int thread, uint64_t) -> Result<CallOutcome> {
        const int fd = pairs[thread].writer.get();
        KVPORT_RETURN_IF_ERROR(SendAll(fd, requests[thread], options.request_bytes));
        KVPORT_RETURN_IF_ERROR(ReceiveAll(fd, &responses[thread], options.response_bytes));
        return CallOutcome{.keys = 1, .bytes = options.value_bytes, .failed_keys = 0};
      },
      &result);
  for (StreamPair& pair : pairs)
    ::shutdown(pair.writer.get(), SHUT_RDWR);
  for (std::thread& server : servers)
    server.join();
  for (const std::string& error : server_errors) {
    if (!error.empty() && result.error.empty()) result.error = "server end: " + error;
  }
  if (!result.error.empty()) return Status::IoError("round-trip baseline: " + result.error);
  return result;
}

Result<std::vector<PhaseResult>> MeasureRoundTripLimit(const RoundTripOptions& options) {
  std::vector<PhaseResult> results;
  for (RoundTripMode mode : {RoundTripMode::kBlocking, RoundTripMode::kBusyPoll}) {
    KVPORT_ASSIGN_OR_RETURN(PhaseResult r, RunRoundTrip(mode, options));
    results.push_back(std::move(r));
  }
  auto rate = [](const PhaseResult& p) { return p.seconds > 0 ? p.calls / p.seconds : 0.0; };
  if (rate(results[1]) > rate(results[0])) std::swap(results[0], results[1]);
  return results;
}

PhaseResult ShmCallLimit(const PhaseResult& control, const PhaseResult& copy, uint64_t value_bytes,
                         int connections) {
  PhaseResult limit;
  limit.system = "round trip";
  limit.variant = fmt::format("unix {} + memcpy {}", control.variant, copy.variant);
  limit.op = Op::kPut;
  if (control.calls == 0 || control.seconds <= 0 || copy.gb_per_second() <= 0) {
    limit.error = "no control round trip or copy measured";
    return limit;
  }
  // One connection's call: its share of the control round trips' time (they ran on every
  // connection at once), then its copy at its share of the copy rate (one thread each).
  const int n = std::max(1, connections);
  const double round_trip_seconds = control.seconds * n / control.calls;
  const double copy_seconds = static_cast<double>(value_bytes) * n / (copy.gb_per_second() * 1e9);
  limit.calls = static_cast<uint64_t>(n);
  limit.keys = limit.calls;
  limit.bytes = value_bytes * limit.calls;
  limit.seconds = round_trip_seconds + copy_seconds;
  return limit;
}

}  // namespace kvport::bench
