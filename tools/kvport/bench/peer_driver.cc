// SPDX-License-Identifier: Apache-2.0
#include "bench/peer_driver.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <nlohmann/json.hpp>
#include <string_view>

extern char** environ;

namespace kvport::bench {

namespace {

bool IsFile(const std::string& path, int mode) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), mode) == 0;
}

// build/peers as seen from this executable: BIN/../peers.
std::string DefaultPeersDir() {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "build/peers";
  std::string dir(self, static_cast<size_t>(n));
  dir.resize(dir.rfind('/'));                       // .../build/bin
  return dir.substr(0, dir.rfind('/')) + "/peers";  // .../build/peers
}

// Runs `args` in a process group of its own with stdout into a pipe (returned whole) and stderr
// discarded (the peers log there); the exit status into *status. A driver that has not finished
// by `deadline` is killed with everything it started (its group: the peer's server processes).
Result<std::string> RunCapturingStdout(const std::vector<std::string>& args,
                                       std::chrono::seconds deadline, int* status) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    return Status::FromErrno("start " + args[0], rc);
  }
  std::string text;
  char buf[65536];
  const auto give_up = std::chrono::steady_clock::now() + deadline;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        give_up - std::chrono::steady_clock::now());
    pollfd p{out[0], POLLIN, 0};
    const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = true;
      break;
    }
    const ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(out[0]);
  // The group goes in any case: a driver killed before its own clean-up leaves its servers.
  ::kill(-pid, SIGKILL);
  while (::waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Status::Timeout(
        fmt::format("{} did not finish within {} s; it was killed", args[1], deadline.count()));
  }
  return text;
}

// One phase's name as a driver reports it.
Result<Op> OpFromName(std::string_view name) {
  Result<std::vector<Op>> ops = ParseOps(name);
  if (!ops.ok() || ops->size() != 1) {
    return Status::Corruption(fmt::format("a peer driver reported an unknown phase '{}'", name));
  }
  return ops->front();
}

}  // namespace

Result<PeerDriver> FindPeerDriver(std::string_view system, const std::string& peers_dir) {
  const std::string dir = peers_dir.empty() ? DefaultPeersDir() : peers_dir;
  PeerDriver peer;
  peer.system = std::string(system);
  std::string make;
  if (system == "mooncake") {
    peer.python = dir + "/venv/bin/python";
    peer.driver = dir + "/mooncake_bench.py";
    make = "`make peers` installs the pinned Mooncake release";
  } else if (system == "lmcache-server") {
    peer.python = dir + "/../engines/venv/bin/python";
    peer.driver = dir + "/lmcache_server_bench.py";
    make = "`make engines peers` installs the pinned LMCache release and the driver";
  } else {
    return Status::InvalidArgument(fmt::format("'{}' is not a peer driven from Python", system));
  }
  if (!IsFile(peer.python, X_OK) || !IsFile(peer.driver, R_OK)) {
    return Status::NotFound(fmt::format("{} is not installed ({} or {} is missing; {})", system,
                                        peer.python, peer.driver, make));
  }
  return peer;
}

Result<std::vector<PhaseResult>> RunPeerDriver(const PeerDriver& peer, const BenchOptions& options,
                                               uint64_t segment_bytes,
                                               std::chrono::seconds start_allowance) {
  const std::vector<std::string> args = {
      peer.python,
      peer.driver,
      fmt::format("--value-bytes={}", options.value_bytes),
      fmt::format("--batch={}", options.batch),
      fmt::format("--threads={}", options.worker_threads()),
      fmt::format("--count={}", options.count),
      fmt::format("--seconds={}", options.max_seconds),
      fmt::format("--ops={}", OpList(options.ops)),
      fmt::format("--exists-batch={}", options.exists_batch),
      fmt::format("--exists-count={}", options.exists_count),
      fmt::format("--warmup-bytes={}", options.warmup ? options.warmup_bytes : 0),
      fmt::format("--segment-bytes={}", segment_bytes)};
  // Starting the peer, and each phase bounded by max_seconds (with room for a slow machine).
  const auto deadline =
      start_allowance + std::chrono::seconds(static_cast<int64_t>(
                            3 * options.max_seconds * static_cast<double>(options.ops.size())));
  int status = 0;
  KVPORT_ASSIGN_OR_RETURN(std::string text, RunCapturingStdout(args, deadline, &status));
  const nlohmann::json out = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!out.is_object()) {
    return Status::Unavailable(fmt::format("the {} driver printed no result (exit status {})",
                                           peer.system,
                                           WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  std::vector<PhaseResult> phases;
  try {
    if (out.contains("error")) {
      return Status::Unavailable(peer.system + ": " + out["error"].get<std::string>());
    }
    const std::string version = out.value("version", "");
    for (const nlohmann::json& p : out.at("phases")) {
      PhaseResult r;
      r.system = peer.system;
      r.variant = version;
      KVPORT_ASSIGN_OR_RETURN(r.op, OpFromName(p.at("op").get<std::string>()));
      r.calls = p.at("calls").get<uint64_t>();
      r.keys = p.at("keys").get<uint64_t>();
      r.bytes = p.at("bytes").get<uint64_t>();
      r.failed_keys = p.at("failed_keys").get<uint64_t>();
      r.seconds = p.at("seconds").get<double>();
      for (const nlohmann::json& ns : p.at("latency_ns"))
        r.latency.Record(ns.get<uint64_t>());
      phases.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(
        fmt::format("the {} driver's result is malformed: {}", peer.system, e.what()));
  }
  return phases;
}

}  // namespace kvport::bench
