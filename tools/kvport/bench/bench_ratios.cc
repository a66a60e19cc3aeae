// SPDX-License-Identifier: Apache-2.0
#include "bench/bench_ratios.h"

#include <optional>
#include <string_view>

#include "bench/bench_matrix.h"
#include "bench/bench_run.h"

namespace kvport::bench {
namespace {

bool Failed(const PhaseResult& p) {
  return !p.error.empty() || p.failed_keys > 0;
}

std::optional<double> Ratio(const PhaseResult* a, const PhaseResult* b) {
  if (a == nullptr || b == nullptr || Failed(*a) || Failed(*b)) return std::nullopt;
  if (b->gb_per_second() <= 0) return std::nullopt;
  return a->gb_per_second() / b->gb_per_second();
}

}  // namespace

const PhaseResult* MemcpyLimitOf(const std::vector<PhaseResult>& ways) {
  const PhaseResult* limit = nullptr;
  for (const PhaseResult& p : ways) {
    if (Failed(p)) continue;
    if (limit == nullptr || p.variant == "pool") limit = &p;
  }
  return limit;
}

const PhaseResult* BenchReport::Limit() const {
  const PhaseResult* best = nullptr;
  for (const PhaseResult& p : socket) {
    if (p.error.empty() && (best == nullptr || p.gb_per_second() > best->gb_per_second())) {
      best = &p;
    }
  }
  return best;
}

const PhaseResult* BenchReport::MemcpyLimit() const {
  return MemcpyLimitOf(memcpy);
}

const PhaseResult* BenchReport::LimitFor(Transport transport, Op op) const {
  switch (transport) {
    case Transport::kTcp:
      return Limit();
    case Transport::kShm:
      return MemcpyLimit();
    case Transport::kUcx:
      for (const PhaseResult& p : ucx_perftest) {
        if (p.op == op && !Failed(p)) return &p;
      }
      return nullptr;
  }
  return nullptr;
}

const PhaseResult* BenchReport::FindKvport(Op op, Transport transport) const {
  for (const PhaseResult& p : kvport) {
    if (p.op == op && p.variant == TransportName(transport)) return &p;
  }
  return nullptr;
}

const PhaseResult* BenchReport::Find(std::string_view system, Op op) const {
  if (system == "kvport") return FindKvport(op, Transport::kTcp);
  for (const PhaseResult& p : redis) {
    if (p.system == system && p.op == op) return &p;
  }
  for (const Peer& peer : peers) {
    for (const PhaseResult& p : peer.phases) {
      if (p.system == system && p.op == op) return &p;
    }
  }
  return nullptr;
}

std::optional<double> BenchReport::RatioToLimit(Op op, Transport transport) const {
  if (op == Op::kExists) return std::nullopt;
  return Ratio(FindKvport(op, transport), LimitFor(transport, op));
}

const PhaseResult* BenchReport::FindCluster(Op op, Transport transport) const {
  for (const PhaseResult& p : cluster) {
    if (p.op == op && p.variant == TransportName(transport)) return &p;
  }
  return nullptr;
}

std::optional<double> BenchReport::RatioClusterToNode(Op op, Transport transport) const {
  const PhaseResult* c = FindCluster(op, transport);
  const PhaseResult* k = FindKvport(op, transport);
  if (c == nullptr || k == nullptr || Failed(*c) || Failed(*k)) return std::nullopt;
  if (op == Op::kExists) {
    if (k->keys_per_second() <= 0) return std::nullopt;
    return c->keys_per_second() / k->keys_per_second();
  }
  return Ratio(c, k);
}

std::optional<double> BenchReport::RatioToRedis(Op op, Transport transport) const {
  return RatioToPeer("redis", op, transport);
}

std::optional<double> BenchReport::RatioToPeer(std::string_view peer, Op op,
                                               Transport transport) const {
  const PhaseResult* k = FindKvport(op, transport);
  const PhaseResult* r = Find(peer, op);
  if (k == nullptr || r == nullptr || Failed(*k) || Failed(*r)) return std::nullopt;
  if (op == Op::kExists) {
    if (r->keys_per_second() <= 0) return std::nullopt;
    return k->keys_per_second() / r->keys_per_second();
  }
  return Ratio(k, r);
}

bool BenchReport::AllPassed() const {
  for (const auto* list : {&kvport, &cluster, &socket, &memcpy, &redis, &ucx_perftest}) {
    for (const PhaseResult& p : *list) {
      if (Failed(p)) return false;
    }
  }
  for (const Peer& peer : peers) {
    for (const PhaseResult& p : peer.phases) {
      if (Failed(p)) return false;
    }
  }
  return true;
}

std::optional<double> MatrixRow::RatioToLimit(Op op) const {
  const PhaseResult& l = op == Op::kGet && !limit_get.system.empty() ? limit_get : limit;
  if (l.system.empty()) return std::nullopt;
  return Ratio(op == Op::kGet ? &get : &put, &l);
}

std::optional<double> MatrixRow::RatioToPeer(std::string_view system, Op op) const {
  for (const Peer& peer : peers) {
    if (peer.system != system) continue;
    const PhaseResult& theirs = op == Op::kGet ? peer.get : peer.put;
    const PhaseResult& own = op == Op::kGet ? get : put;
    if (Failed(theirs) || Failed(own)) return std::nullopt;
    return Ratio(&own, &theirs);
  }
  return std::nullopt;
}

std::optional<double> MatrixRow::RatioToRoundTrip(Op op) const {
  const PhaseResult& round_trip = op == Op::kGet ? round_trip_get : round_trip_put;
  if (round_trip.system.empty()) return std::nullopt;
  return Ratio(op == Op::kGet ? &get : &put, &round_trip);
}

bool MatrixRow::Passed() const {
  return !Failed(put) && !Failed(get);
}

bool MatrixReport::AllPassed() const {
  for (const MatrixRow& row : rows) {
    if (!row.Passed()) return false;
  }
  return true;
}

}  // namespace kvport::bench
