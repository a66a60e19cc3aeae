// SPDX-License-Identifier: Apache-2.0
#include "bench/socket_baseline.h"

#include "bench/phase_driver.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace kvport::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Per-stream progress, shared between the ends of one stream.
struct StreamState {
  uint64_t target = 0;  // bytes this stream sends
  uint64_t sent = 0;
  uint64_t received = 0;
  uint64_t send_calls = 0;
  std::string error;
};

bool Expired(Clock::time_point deadline, uint64_t* check) {
  // Reading the clock every call costs little next to a syscall, but spinning loops call this
  // millions of times: look only every 64 iterations.
  return (++*check & 63) == 0 && Clock::now() >= deadline;
}

// One stream's writer with blocking or non-blocking (spinning) calls. Stops at the target or
// the deadline; then shuts its end down so the reader sees the end of the stream.
void WriteStream(int fd, StreamState* s, std::vector<char>* buf, Clock::time_point deadline) {
  uint64_t checks = 0;
  while (s->sent < s->target) {
    if (Clock::now() >= deadline) break;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf->size(), s->target - s->sent));
    const ssize_t w = ::send(fd, buf->data(), n, MSG_NOSIGNAL);
    if (w > 0) {
      s->sent += static_cast<uint64_t>(w);
      ++s->send_calls;
    } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (Expired(deadline, &checks)) break;
    } else {
      s->error = "send: " + std::string(strerror(errno));
      break;
    }
  }
  ::shutdown(fd, SHUT_WR);
}

void ReadStream(int fd, StreamState* s, std::vector<char>* buf) {
  for (;;) {
    const ssize_t r = ::recv(fd, buf->data(), buf->size(), 0);
    if (r > 0) {
      s->received += static_cast<uint64_t>(r);
    } else if (r == 0) {
      return;  // the writer shut down: every byte it sent has arrived
    } else if (errno != EAGAIN && errno != EINTR) {
      s->error = "recv: " + std::string(strerror(errno));
      return;
    }
  }
}

// Both ends of one stream on one thread: send what the socket takes, then drain what arrived.
void PumpStream(int wfd, int rfd, StreamState* s, std::vector<char>* wbuf, std::vector<char>* rbuf,
                Clock::time_point deadline) {
  uint64_t checks = 0;
  bool writing = true;
  while (true) {
    if (writing) {
      if (s->sent >= s->target || Expired(deadline, &checks)) {
        ::shutdown(wfd, SHUT_WR);
        writing = false;
      } else {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(wbuf->size(), s->target - s->sent));
        const ssize_t w = ::send(wfd, wbuf->data(), n, MSG_NOSIGNAL);
        if (w > 0) {
          s->sent += static_cast<uint64_t>(w);
          ++s->send_calls;
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
          s->error = "send: " + std::string(strerror(errno));
          ::shutdown(wfd, SHUT_WR);
          writing = false;
        }
      }
    }
    const ssize_t r = ::recv(rfd, rbuf->data(), rbuf->size(), 0);
    if (r > 0) {
      s->received += static_cast<uint64_t>(r);
    } else if (r == 0) {
      return;
    } else if (errno != EAGAIN && errno != EINTR) {
      s->error = "recv: " + std::string(strerror(errno));
      return;
    }
  }
}

}  // namespace

void Fd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<StreamPair> ConnectLoopbackPair(bool non_blocking) {
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.get() < 0) return Status::FromErrno("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
    return Status::FromErrno("bind 127.0.0.1:0", errno);
  }
  if (::listen(listener.get(), 1) < 0) return Status::FromErrno("listen", errno);
  socklen_t len = sizeof(addr);
  if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) < 0) {
    return Status::FromErrno("getsockname", errno);
  }
  StreamPair pair;
  pair.writer = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (pair.writer.get() < 0) return Status::FromErrno("socket", errno);
  if (::connect(pair.writer.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
    return Status::FromErrno("connect to the loopback listener", errno);
  }
  pair.reader = Fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (pair.reader.get() < 0) return Status::FromErrno("accept", errno);
  const int one = 1;
  for (int fd : {pair.writer.get(), pair.reader.get()}) {
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (non_blocking && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
      return Status::FromErrno("fcntl(O_NONBLOCK)", errno);
    }
  }
  return pair;
}

std::string_view SocketModeName(SocketMode mode) {
  switch (mode) {
    case SocketMode::kBlocking:
      return "blocking";
    case SocketMode::kBusyPoll:
      return "busy-poll";
    case SocketMode::kBusyPollOneThread:
      return "busy-poll-1t";
  }
  return "?";
}

Result<PhaseResult> RunSocketBaseline(SocketMode mode, const SocketBaselineOptions& options) {
  const int streams = std::max(1, options.streams);
  const size_t write_bytes = static_cast<size_t>(std::max<uint64_t>(options.write_bytes, 4096));
  std::vector<StreamPair> pairs;
  for (int i = 0; i < streams; ++i) {
    KVPORT_ASSIGN_OR_RETURN(StreamPair p, ConnectLoopbackPair(mode != SocketMode::kBlocking));
    pairs.push_back(std::move(p));
  }
  std::vector<StreamState> state(streams);
  for (int i = 0; i < streams; ++i) {
    state[i].target = options.bytes / streams + (i < static_cast<int>(options.bytes % streams));
  }
  // Buffers are touched before the clock starts, so page faults are not timed.
  std::vector<std::vector<char>> wbufs(streams, std::vector<char>(write_bytes, 'x'));
  std::vector<std::vector<char>> rbufs(streams, std::vector<char>(write_bytes, 0));

  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(options.max_seconds));
  std::vector<std::thread> threads;
  for (int i = 0; i < streams; ++i) {
    const int wfd = pairs[i].writer.get();
    const int rfd = pairs[i].reader.get();
    if (mode == SocketMode::kBusyPollOneThread) {
      threads.emplace_back(PumpStream, wfd, rfd, &state[i], &wbufs[i], &rbufs[i], deadline);
    } else {
      threads.emplace_back(WriteStream, wfd, &state[i], &wbufs[i], deadline);
      threads.emplace_back(ReadStream, rfd, &state[i], &rbufs[i]);
    }
  }
  for (std::thread& t : threads)
    t.join();

  PhaseResult result;
  result.system = "socket";
  result.variant = std::string(SocketModeName(mode));
  result.op = Op::kPut;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const StreamState& s : state) {
    result.bytes += s.received;
    result.calls += s.send_calls;
    if (!s.error.empty() && result.error.empty()) result.error = s.error;
  }
  if (!result.error.empty()) return Status::IoError("socket baseline: " + result.error);
  return result;
}

uint8_t* CopyPool::data() {
  if (bytes_.empty()) bytes_.assign(kBytes, 0x5a);
  return bytes_.data();
}

std::vector<PhaseResult> RunMemcpyBaseline(const BenchOptions& options, BenchData& data,
                                           CopyPool& pool) {
  const uint64_t call_bytes = data.keys_per_thread() * data.value_bytes();
  const int threads = data.threads();
  const uint64_t slots = call_bytes == 0 ? 0 : CopyPool::kBytes / (threads * call_bytes);
  std::vector<PhaseResult> results;
  for (const bool into_pool : {false, true}) {
    if (into_pool && slots < 2) break;
    uint8_t* base = into_pool ? pool.data() : nullptr;
    PhaseResult result;
    result.system = "memcpy";
    result.variant = into_pool ? "pool" : "buffers";
    result.op = Op::kPut;
    PhaseLimits limits;
    limits.threads = threads;
    limits.calls = options.count;
    limits.max_time = std::chrono::duration<double>(options.max_seconds);
    RunTimedPhase(
        limits,
        [&](int thread, uint64_t call) -> Result<CallOutcome> {
          const std::span<const uint8_t> from = data.values_of(thread);
          uint8_t* to = base != nullptr ? base + (thread * slots + call % slots) * call_bytes
                                        : data.reads_of(thread).data();
          std::memcpy(to, from.data(), from.size());
          // Keeps the copy from being optimised away.
          asm volatile("" : : "r"(to) : "memory");
          return CallOutcome{
              .keys = data.keys_per_thread(), .bytes = from.size(), .failed_keys = 0};
        },
        &result);
    results.push_back(std::move(result));
  }
  return results;
}

Result<std::vector<PhaseResult>> MeasureSocketLimit(const SocketBaselineOptions& options) {
  std::vector<PhaseResult> results;
  for (SocketMode mode :
       {SocketMode::kBlocking, SocketMode::kBusyPoll, SocketMode::kBusyPollOneThread}) {
    KVPORT_ASSIGN_OR_RETURN(PhaseResult r, RunSocketBaseline(mode, options));
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace kvport::bench
