// SPDX-License-Identifier: Apache-2.0
#include "bench/peer_driver.h"

#include "bench/child_process.h"

#include <fmt/core.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <nlohmann/json.hpp>
#include <string_view>

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
