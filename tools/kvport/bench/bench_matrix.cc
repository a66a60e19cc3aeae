// SPDX-License-Identifier: Apache-2.0
#include "bench/bench_matrix.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <utility>

#include "bench/bench_data.h"
#include "bench/bench_limits.h"
#include "bench/bench_node.h"
#include "bench/bench_peers.h"
#include "bench/bench_ratios.h"
#include "bench/kvport_phases.h"
#include "bench/peer_driver.h"
#include "bench/socket_baseline.h"
#include "kvport/client.h"
#include "kvport/size.h"

namespace kvport::bench {

uint64_t MatrixOptions::calls_for(uint64_t value_bytes, size_t batch) const {
  if (count) return *count;
  const uint64_t per_call = std::max<uint64_t>(1, value_bytes * batch);
  return std::clamp<uint64_t>(phase_bytes / per_call, 8, 20000);
}

Status MatrixOptions::Validate() const {
  if (value_sizes.empty() || batches.empty() || connections.empty()) {
    return Status::InvalidArgument("--matrix: no value size, batch or connection count to run");
  }
  for (uint64_t v : value_sizes) {
    if (v == 0) return Status::InvalidArgument("--matrix: a value size must be at least 1 byte");
  }
  for (size_t b : batches) {
    if (b == 0) return Status::InvalidArgument("--matrix: a batch must be at least 1");
  }
  for (int c : connections) {
    if (c < 1) return Status::InvalidArgument("--matrix: connections must be at least 1");
  }
  if (count && *count == 0) return Status::InvalidArgument("--count must be at least 1");
  if (!(max_seconds > 0)) return Status::InvalidArgument("--seconds must be positive");
  return Status::Ok();
}

namespace {

// The memory a matrix shape needs stored: one batch per thread, and one more being written (old
// and new coexist), plus room to spare.
uint64_t ShapeStoreBytes(uint64_t value_bytes, size_t batch, int connections) {
  return 2 * static_cast<uint64_t>(connections) * batch * value_bytes + (uint64_t{64} << 20);
}

}  // namespace

Result<MatrixReport> RunMatrix(const MatrixOptions& options, const BenchLog& log) {
  KVPORT_RETURN_IF_ERROR(options.Validate());
  KVPORT_ASSIGN_OR_RETURN(Transports transports, ResolveTransports(options.transport, ""));
  const auto started = std::chrono::steady_clock::now();
  MatrixReport report;
  report.options = options;
  report.transports = transports.list;
  report.transport_note = transports.note;

  // Largest values (then batches, then connections) first: the first shape sizes the bench's
  // buffers, which every later shape reuses, and each client is created, and warmed, at its
  // largest shape.
  std::set<uint64_t, std::greater<>> sizes(options.value_sizes.begin(), options.value_sizes.end());
  std::set<size_t, std::greater<>> batches(options.batches.begin(), options.batches.end());
  std::set<int, std::greater<>> conns(options.connections.begin(), options.connections.end());
  using Shape = std::tuple<uint64_t, size_t, int>;
  std::vector<Shape> shapes;
  uint64_t capacity = 0;
  for (uint64_t v : sizes) {
    for (size_t b : batches) {
      for (int c : conns) {
        shapes.emplace_back(v, b, c);
        capacity = std::max(capacity, ShapeStoreBytes(v, b, c));
      }
    }
  }

  const bool want_shm = Has(report.transports, Transport::kShm);
  KVPORT_ASSIGN_OR_RETURN(
      Node node,
      StartEmbeddedNode(EmbeddedServerOptions(capacity, options.node_threads, options.busy_poll_us,
                                              *sizes.begin(), *batches.begin()),
                        want_shm, Has(report.transports, Transport::kUcx)));
  report.node = node.description;
  Note(log, fmt::format("matrix: {} rows on node {}", shapes.size() * report.transports.size(),
                        report.node));

  auto row_options = [&](const Shape& shape) {
    const auto [v, b, c] = shape;
    BenchOptions o;
    o.value_bytes = v;
    o.batch = b;
    o.connections = c;
    o.threads = 0;
    o.ops = {Op::kPut, Op::kGet};
    o.count = options.calls_for(v, b);
    o.max_seconds = options.max_seconds;
    o.exists_batch = 1;
    o.ns = options.ns;
    o.warmup = false;
    o.busy_poll_us = options.busy_poll_us;
    return o;
  };

  std::vector<PeerDriver> drivers;
  const std::vector<PeerDriver> kNoDrivers;
  for (const std::string& system : options.python_peers) {
    if (Result<PeerDriver> driver = FindPeerDriver(system, options.peers_dir); driver.ok()) {
      drivers.push_back(*driver);
    } else {
      report.peers_skipped.emplace_back(system, driver.status().message());
    }
  }

  BenchData data(row_options(shapes.front()));
  CopyPool pool;
  std::map<std::pair<Transport, int>, std::unique_ptr<Client>> clients;
  std::map<std::pair<Transport, int>, std::string> client_errors;
  bool node_warm = false;
  for (const Shape& shape : shapes) {
    BenchOptions o = row_options(shape);
    data.Reset(o);
    PhaseResult memcpy_limit;
    PhaseResult memcpy_buffers;
    for (Transport transport : report.transports) {
      MatrixRow row;
      row.value_bytes = o.value_bytes;
      row.batch = o.batch;
      row.connections = o.connections;
      row.transport = transport;
      Note(log, fmt::format("matrix: {} x{} x{} conn, {}", FormatSize(o.value_bytes), o.batch,
                            o.connections, TransportName(transport)));
      const auto id = std::make_pair(transport, o.connections);
      if (!clients.contains(id) && !client_errors.contains(id)) {
        auto client = std::make_unique<Client>();
        Status init = InitClient(*client, node, transport, o);
        if (init.ok()) {
          // Untimed puts of the node's capacity: commits the arena's pages once, and a
          // shared-memory client's mapping of them once per client.
          if (transport == Transport::kShm || !node_warm) {
            BenchOptions warm = o;
            warm.ops.clear();
            warm.warmup = true;
            warm.warmup_bytes = capacity;
            warm.warmup_max_seconds = 600;
            Note(log, fmt::format("matrix: warm-up, {} of puts ({})", FormatSize(capacity),
                                  TransportName(transport)));
            RunKvportPhases(warm, *client, data, transport);
            node_warm = true;
          }
          clients[id] = std::move(client);
        } else {
          client_errors[id] = init.ToString();
        }
      }
      std::vector<PhaseResult> phases;
      if (auto it = clients.find(id); it != clients.end()) {
        phases = RunKvportPhases(o, *it->second, data, transport);
      } else {
        phases = FailedPhases(o, transport, client_errors[id]);
      }
      for (PhaseResult& p : phases)
        (p.op == Op::kPut ? row.put : row.get) = std::move(p);
      if (transport == Transport::kUcx) {
        const uint64_t messages = o.count * o.batch;
        Note(log, fmt::format("matrix: ucx_perftest, {} messages", FormatSize(o.value_bytes)));
        row.limit = UcxPerftestLimit(Op::kPut, o.value_bytes, messages, o.max_seconds);
        row.limit_get = UcxPerftestLimit(Op::kGet, o.value_bytes, messages, o.max_seconds);
      }
      if (transport == Transport::kShm) {
        if (memcpy_limit.system.empty()) {
          const std::vector<PhaseResult> ways = RunMemcpyBaseline(o, data, pool);
          if (const PhaseResult* limit = MemcpyLimitOf(ways)) memcpy_limit = *limit;
          for (const PhaseResult& p : ways) {
            if (p.variant == "buffers") memcpy_buffers = p;
          }
        }
        row.limit = memcpy_limit;
        row.memcpy_buffers = memcpy_buffers;
      }
      // The peers speak TCP: beside the TCP rows.
      for (const PeerDriver& driver : transport == Transport::kTcp ? drivers : kNoDrivers) {
        // A store of what the shape needs, its pages written once first.
        const uint64_t segment = ShapeStoreBytes(o.value_bytes, o.batch, o.connections);
        row.peers.push_back(RunPeerAtShape(driver, o, segment, log));
      }
      report.rows.push_back(std::move(row));
    }
  }
  clients.clear();
  node.server->Stop();
  node.server.reset();

  MeasureSocketLimits(options, log, &report);
  if (options.socket_baseline && report.socket_skipped.empty()) {
    MeasureRoundTrips(options, log, &report);
  }
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace kvport::bench
