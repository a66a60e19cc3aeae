// SPDX-License-Identifier: Apache-2.0
#include "bench/bench_peers.h"

#include <fmt/core.h>

#include <memory>
#include <utility>
#include <vector>

#include "bench/bench_node.h"
#include "bench/redis_phases.h"
#include "bench/redis_server.h"
#include "kvport/size.h"

namespace kvport::bench {

void RunRedis(const BenchOptions& options, BenchData& data, BenchReport* report,
              const BenchLog& log) {
  Result<std::string> exe = RedisServer::FindExecutable(options.redis_server);
  if (!exe.ok()) {
    report->redis_skipped = exe.status().message();
    return;
  }
  Note(log, fmt::format("redis: starting {} on an ephemeral loopback port", *exe));
  Result<std::unique_ptr<RedisServer>> server = RedisServer::Start(*exe);
  if (!server.ok()) {
    report->redis_skipped = server.status().message();
    return;
  }
  Result<std::vector<PhaseResult>> r = RunRedisPhases(options, (*server)->port(), data);
  (*server)->Stop();
  if (r.ok()) {
    report->redis = std::move(*r);
  } else {
    report->redis_skipped = r.status().message();
  }
}

void RunPythonPeer(const std::string& system, const BenchOptions& options, BenchReport* report,
                   const BenchLog& log) {
  BenchReport::Peer& peer = report->peers.emplace_back();
  peer.system = system;
  Result<PeerDriver> driver = FindPeerDriver(system, options.peers_dir);
  if (!driver.ok()) {
    peer.skipped = driver.status().message();
    return;
  }
  // A store gets the memory an embedded kvport node would (twice the working set and more).
  Note(log, fmt::format("{}: {}, store of {} on loopback", system, driver->driver,
                        FormatSize(EmbeddedCapacity(options))));
  Result<std::vector<PhaseResult>> r = RunPeerDriver(*driver, options, EmbeddedCapacity(options));
  if (r.ok()) {
    peer.phases = std::move(*r);
  } else {
    peer.skipped = r.status().message();
  }
}

MatrixRow::Peer RunPeerAtShape(const PeerDriver& driver, const BenchOptions& o,
                               uint64_t store_bytes, const BenchLog& log) {
  BenchOptions peer = o;
  peer.warmup = true;
  peer.warmup_bytes = store_bytes;
  Note(log, fmt::format("matrix: {} x{} x{} conn, {}", FormatSize(o.value_bytes), o.batch,
                        o.connections, driver.system));
  MatrixRow::Peer theirs;
  theirs.system = driver.system;
  Result<std::vector<PhaseResult>> peer_phases = RunPeerDriver(driver, peer, store_bytes);
  if (peer_phases.ok()) {
    for (PhaseResult& p : *peer_phases)
      (p.op == Op::kPut ? theirs.put : theirs.get) = std::move(p);
  } else {
    for (PhaseResult* p : {&theirs.put, &theirs.get}) {
      p->system = driver.system;
      p->error = peer_phases.status().message();
    }
    theirs.get.op = Op::kGet;
  }
  return theirs;
}

}  // namespace kvport::bench
