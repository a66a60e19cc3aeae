// SPDX-License-Identifier: Apache-2.0
#include "bench/bench_run.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <concepts>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <utility>

#include "bench/bench_data.h"
#include "bench/kvport_phases.h"
#include "bench/peer_driver.h"
#include "bench/redis_phases.h"
#include "bench/redis_server.h"
#include "bench/round_trip_baseline.h"
#include "bench/socket_baseline.h"
#include "bench/ucx_perftest_baseline.h"
#include "kvport/client.h"
#include "kvport/server.h"
#include "kvport/size.h"

namespace kvport::bench {
namespace {

// The shared-memory transport of the embedded node, found at compile time: a server with
// ServerOptions::unix_socket ("auto": a socket path derived from the port) and
// Server::unix_socket_path() offers it, and a client Init'ed with "unix:" + that path uses it.
// Until the server has them, the bench builds and measures TCP alone.
template <typename Options>
constexpr bool kHasUnixSocket = requires(Options& o) {
  o.unix_socket = std::string();
};

template <typename Options>
void OfferUnixSocket(Options& so) {
  if constexpr (requires { so.unix_socket = std::string(); }) so.unix_socket = "auto";
}

template <typename S>
std::string UnixSocketPathOf(const S& server) {
  if constexpr (requires {
                  { server.unix_socket_path() } -> std::convertible_to<std::string>;
                }) {
    return server.unix_socket_path();
  } else {
    return {};
  }
}

constexpr std::string_view kSharedMemoryName = "shared memory";  // Client::transport()
constexpr std::string_view kUcxName = "UCX";                     // Client::transport()

void Note(const BenchLog& log, std::string_view text) {
  if (log) log(text);
}

bool Failed(const PhaseResult& p) {
  return !p.error.empty() || p.failed_keys > 0;
}

std::optional<double> Ratio(const PhaseResult* a, const PhaseResult* b) {
  if (a == nullptr || b == nullptr || Failed(*a) || Failed(*b)) return std::nullopt;
  if (b->gb_per_second() <= 0) return std::nullopt;
  return a->gb_per_second() / b->gb_per_second();
}

// ucx_perftest's `op` with messages of `value_bytes` (system "ucx_perftest" either way: a run
// that failed carries why in its error).
PhaseResult UcxPerftestLimit(Op op, uint64_t value_bytes, uint64_t messages, double max_seconds) {
  UcxPerftestOptions o;
  o.message_bytes = value_bytes;
  o.messages = messages;
  o.max_seconds = std::max(30.0, 4 * max_seconds);
  Result<PhaseResult> r = RunUcxPerftest(op, o);
  if (r.ok()) return *r;
  PhaseResult failed;
  failed.system = "ucx_perftest";
  failed.op = op;
  failed.error = r.status().ToString();
  return failed;
}

// The transports a run measures, and why shared memory is not among them when `auto` left it out.
struct Transports {
  std::vector<Transport> list;
  std::string note;
};

Result<Transports> ResolveTransports(TransportChoice choice, const std::string& url) {
  const bool unix_url = url.starts_with("unix:");
  const bool embedded = url.empty();
  const std::string no_shm =
      "this build's kvport server does not offer the shared-memory transport yet";
  Transports t;
  switch (choice) {
    case TransportChoice::kTcp:
      if (unix_url) {
        return Status::InvalidArgument(
            "--transport tcp: a unix: URL is reached over shared "
            "memory; give eic://HOST:PORT for TCP");
      }
      t.list = {Transport::kTcp};
      return t;
    case TransportChoice::kShm:
    case TransportChoice::kBoth:
      if (embedded && !EmbeddedNodeOffersShm()) {
        return Status::InvalidArgument(
            fmt::format("--transport {}: {}", TransportChoiceName(choice), no_shm));
      }
      if (choice == TransportChoice::kBoth && unix_url) {
        return Status::InvalidArgument("--transport both: a unix: URL has no TCP endpoint");
      }
      if (choice == TransportChoice::kShm) {
        t.list = {Transport::kShm};
      } else {
        t.list = {Transport::kTcp, Transport::kShm};
      }
      return t;
    case TransportChoice::kUcx:
      if (unix_url) {
        return Status::InvalidArgument(
            "--transport ucx: a unix: URL is reached over shared memory; give eic://HOST:PORT "
            "of a node started with --ucx");
      }
      t.list = {Transport::kUcx};
      return t;
    case TransportChoice::kAuto:
      if (unix_url) {
        t.list = {Transport::kShm};
      } else if (!embedded) {
        t.list = {Transport::kTcp};
        t.note =
            "shared memory not measured: --url names a TCP node (--transport shm or both "
            "asks the client for shared memory)";
      } else if (EmbeddedNodeOffersShm()) {
        t.list = {Transport::kTcp, Transport::kShm};
      } else {
        t.list = {Transport::kTcp};
        t.note = "shared memory not measured: " + no_shm;
      }
      return t;
  }
  return Status::Internal("unknown transport choice");
}

bool Has(const std::vector<Transport>& list, Transport t) {
  return std::find(list.begin(), list.end(), t) != list.end();
}

// A node to measure: the embedded one (started here) or the one at a URL, with the endpoint
// each transport's client connects to.
struct Node {
  std::unique_ptr<Server> server;
  std::string tcp_endpoint;
  std::string shm_endpoint;
  std::string description;
};

// `want_ucx`: the node offers UCX (and, for the client's eic_trans_type 2 to take it, should not
// offer shared memory too).
Result<Node> StartEmbeddedNode(ServerOptions so, bool want_shm, bool want_ucx) {
  if (want_shm) OfferUnixSocket(so);
  so.ucx = want_ucx;
  Result<std::unique_ptr<Server>> started = Server::Start(so);
  if (!started.ok()) return started.status().WithContext("starting the embedded node");
  Node node;
  node.server = std::move(*started);
  node.tcp_endpoint = node.server->address();
  std::string shm_path;
  if (want_shm) {
    shm_path = UnixSocketPathOf(*node.server);
    if (shm_path.empty()) {
      return Status::Internal("the embedded node was asked for a Unix socket and has none");
    }
    node.shm_endpoint = "unix:" + shm_path;
  }
  node.description = fmt::format("embedded {}{}{} (capacity {}, {})", node.tcp_endpoint,
                                 shm_path.empty() ? std::string() : ", " + node.shm_endpoint,
                                 want_ucx ? " with UCX" : "", FormatSize(so.capacity_bytes),
                                 so.threads == 0 ? std::string("one I/O thread per CPU")
                                                 : fmt::format("{} I/O threads", so.threads));
  return node;
}

Node UrlNode(const std::string& url) {
  Node node;
  node.tcp_endpoint = url;
  node.shm_endpoint = url;  // unix:/PATH, or eic://HOST:PORT with the client choosing
  node.description = url;
  return node;
}

// Connects `client` over `transport`: TCP forced (transport_type 1), or shared memory or UCX
// (transport_type 2), which must then be what the client got (a silent fallback to TCP would
// measure the wrong thing).
Status InitClient(Client& client, const Node& node, Transport transport,
                  const BenchOptions& options) {
  InitOptions init;
  init.connections = options.connections;
  init.busy_poll = std::chrono::microseconds(options.busy_poll_us);
  init.checksums = options.checksums;
  init.timeout = std::chrono::seconds(120);
  if (transport == Transport::kTcp) {
    init.transport_type = 1;
    return client.Init("kvport-bench", node.tcp_endpoint, init);
  }
  if (transport == Transport::kUcx) {
    init.transport_type = 2;
    KVPORT_RETURN_IF_ERROR(client.Init("kvport-bench", node.tcp_endpoint, init));
    if (client.transport() != kUcxName) {
      return Status::Unavailable(fmt::format("asked for UCX at {}, the client chose {}: {}",
                                             node.tcp_endpoint, client.transport(),
                                             client.transport_reason()));
    }
    return Status::Ok();
  }
  init.transport_type = 0;  // automatic: shared memory when the node is local and offers it
  KVPORT_RETURN_IF_ERROR(client.Init("kvport-bench", node.shm_endpoint, init));
  if (client.transport() != kSharedMemoryName) {
    return Status::Unavailable(fmt::format("asked for shared memory at {}, the client chose {}: {}",
                                           node.shm_endpoint, client.transport(),
                                           client.transport_reason()));
  }
  return Status::Ok();
}

// The phases of `options.ops` that could not run, each carrying `error`.
std::vector<PhaseResult> FailedPhases(const BenchOptions& options, Transport transport,
                                      const std::string& error) {
  std::vector<PhaseResult> out;
  for (Op op : options.ops) {
    PhaseResult p;
    p.system = "kvport";
    p.variant = std::string(TransportName(transport));
    p.op = op;
    p.error = error;
    out.push_back(std::move(p));
  }
  return out;
}

// The embedded node holds every thread's keys twice over (a put replaces a value only once the
// new one is in, so old and new coexist for a moment) plus room for one more batch per thread.
uint64_t EmbeddedCapacity(const BenchOptions& o) {
  if (o.node_capacity != 0) return o.node_capacity;
  const uint64_t batch_bytes = static_cast<uint64_t>(o.batch) * o.value_bytes;
  return 2 * o.working_set_bytes() + o.worker_threads() * batch_bytes + (uint64_t{64} << 20);
}

// Deletes every thread's keys in options.ns through `client`: what one run of the phases wrote,
// so the next run (the cluster after the one node, or the one node of the next transport)
// reads only what it wrote itself and finds its nodes as empty as the first run did.
Status ClearKeys(const BenchOptions& options, Client& client, const BenchData& data) {
  DelOptions del;
  del.ns = options.ns;
  for (int t = 0; t < data.sets(); ++t) {
    Result<BatchResult> r = client.MDel(data.keys(t), del);
    if (!r.ok()) return r.status().WithContext("deleting the previous run's keys");
    for (KeyCode code : r->codes) {
      if (code != KeyCode::kSuccess && code != KeyCode::kKeyNotExist) {
        return r->error.WithContext("deleting the previous run's keys");
      }
    }
  }
  return Status::Ok();
}

// "127.0.0.1:P1;127.0.0.1:P2;...": the nodes as one static cluster (each reached over TCP, or
// over shared memory when the client's transport choice is automatic and the node offers it).
std::string StaticClusterEndpoint(const std::vector<Node>& nodes) {
  std::string endpoint;
  for (const Node& n : nodes)
    endpoint += (endpoint.empty() ? "" : ";") + n.tcp_endpoint;
  return endpoint;
}

// What a cluster URL resolved to: "URL (a cluster of N nodes: A, B, C)", from one untimed
// Stats call per node; the URL alone when it names one node or the nodes do not answer.
std::string DescribeUrl(const std::string& url, Client& client) {
  if (!client.is_cluster()) return url;
  Result<std::vector<NodeReport>> nodes = client.StatsPerNode();
  if (!nodes.ok()) return url;
  std::string list;
  for (const NodeReport& n : *nodes)
    list += (list.empty() ? "" : ", ") + n.address + (n.status.ok() ? "" : " (not answering)");
  return fmt::format("{} (a cluster of {} node{}: {})", url, nodes->size(),
                     nodes->size() == 1 ? "" : "s", list);
}

// Runs the phases over `transport` against `node` through a client of its own, appending them
// to `out` (with `system` as their system). Returns the client (null when Init failed) so the
// caller can clear its keys.
std::unique_ptr<Client> RunPhasesAgainst(const BenchOptions& options, const Node& node,
                                         Transport transport, BenchData& data,
                                         std::string_view system, std::vector<PhaseResult>* out,
                                         Status* init_error) {
  auto client = std::make_unique<Client>();
  *init_error = InitClient(*client, node, transport, options);
  if (!init_error->ok()) {
    for (PhaseResult& p : FailedPhases(options, transport, init_error->ToString())) {
      p.system = std::string(system);
      out->push_back(std::move(p));
    }
    return nullptr;
  }
  for (PhaseResult& p : RunKvportPhases(options, *client, data, transport)) {
    p.system = std::string(system);
    out->push_back(std::move(p));
  }
  return client;
}

// Runs the kvport phases over each transport against a node: the embedded one (started and
// stopped here, so its memory is free again before the baselines run) or the one at the URL.
// With options.nodes >= 2, against the first embedded node alone and then against all of them
// as one static cluster, per transport (BenchOptions::nodes).
Status RunKvport(const BenchOptions& options, BenchData& data, BenchReport* report,
                 const BenchLog& log) {
  const bool want_shm = Has(report->transports, Transport::kShm);
  std::vector<Node> nodes;
  if (options.url.empty()) {
    const ServerOptions so = EmbeddedServerOptions(
        EmbeddedCapacity(options), options.node_threads, options.busy_poll_us, options.value_bytes,
        std::max<uint64_t>(options.batch, options.exists_batch));
    for (int i = 0; i < options.nodes; ++i) {
      Result<Node> started =
          StartEmbeddedNode(so, want_shm, Has(report->transports, Transport::kUcx));
      if (!started.ok()) {
        for (Node& n : nodes)
          n.server->Stop();
        return options.nodes == 1 ? started.status()
                                  : started.status().WithContext(
                                        fmt::format("node {} of {}", i + 1, options.nodes));
      }
      nodes.push_back(std::move(started).value());
    }
  } else {
    nodes.push_back(UrlNode(options.url));
  }
  const Node& node = nodes.front();
  report->node = node.description;
  Node cluster;
  if (nodes.size() > 1) {
    cluster.tcp_endpoint = StaticClusterEndpoint(nodes);
    cluster.shm_endpoint = cluster.tcp_endpoint;  // the client picks shared memory per node
    cluster.description = cluster.tcp_endpoint;
    report->cluster_endpoint = cluster.tcp_endpoint;
    report->node +=
        fmt::format("; the cluster: {} such nodes, \"{}\"", nodes.size(), cluster.tcp_endpoint);
  }
  Note(log, fmt::format("kvport: node {}", report->node));
  // The cluster's warm-up: as many bytes per node as the one node's (the keys spread over the
  // nodes, so each gets about its share of the calls).
  BenchOptions cluster_options = options;
  cluster_options.warmup_bytes = options.warmup_bytes * nodes.size();
  Status status = Status::Ok();
  for (Transport transport : report->transports) {
    Status init;
    std::unique_ptr<Client> client =
        RunPhasesAgainst(options, node, transport, data, "kvport", &report->kvport, &init);
    // TCP is the node being there at all; shared memory failing leaves the TCP results.
    if (!init.ok() && transport == Transport::kTcp) {
      report->kvport.clear();
      status = init;
      break;
    }
    if (client != nullptr) {
      Note(log, fmt::format("kvport: {} ({})", TransportName(transport), client->transport()));
      if (!options.url.empty() && transport == report->transports.front()) {
        report->node = DescribeUrl(options.url, *client);
      }
    }
    if (nodes.size() == 1) continue;
    // (A one-node client that could not connect wrote nothing; the cluster's own Init says
    // whether it fares better.)
    const Status cleared = client != nullptr ? ClearKeys(options, *client, data) : Status::Ok();
    client.reset();
    if (!cleared.ok()) {
      for (PhaseResult& p : FailedPhases(options, transport, cleared.ToString())) {
        p.system = "cluster";
        report->cluster.push_back(std::move(p));
      }
      continue;
    }
    Note(log, fmt::format("kvport: {} nodes as one cluster, {}", nodes.size(),
                          TransportName(transport)));
    std::unique_ptr<Client> cluster_client = RunPhasesAgainst(
        cluster_options, cluster, transport, data, "cluster", &report->cluster, &init);
    if (cluster_client != nullptr) {
      const Status cleared_cluster = ClearKeys(options, *cluster_client, data);
      if (!cleared_cluster.ok()) Note(log, cleared_cluster.ToString());
    }
  }
  for (Node& n : nodes) {
    if (n.server) n.server->Stop();
  }
  return status;
}

// The socket baseline for a shape: `streams` streams, each write the bytes of one batched call
// (what the client hands the kernel in one sendmsg), within 1-8 MiB. Writes of the call's size,
// not of one value: with 1 MiB buffers, busy-poll-1t copies between two buffers that stay in
// one core's L2 cache and runs up to twice as fast as with 4 MiB ones (docs/performance.md),
// which no client and node exchanging batches of values can do.
SocketBaselineOptions SocketOptionsFor(uint64_t bytes, int streams, uint64_t call_bytes,
                                       double max_seconds) {
  SocketBaselineOptions so;
  so.bytes = bytes;
  so.streams = streams;
  so.write_bytes = std::clamp<uint64_t>(call_bytes, uint64_t{1} << 20, uint64_t{8} << 20);
  so.max_seconds = max_seconds;
  return so;
}

void RunSocket(const BenchOptions& options, BenchReport* report, const BenchLog& log) {
  // The same byte volume as the largest kvport TCP put or get phase (what the ratio compares),
  // or what the options ask for when kvport moved nothing.
  uint64_t bytes = 0;
  for (const PhaseResult& p : report->kvport) {
    if (p.op != Op::kExists && p.variant == TransportName(Transport::kTcp)) {
      bytes = std::max(bytes, p.bytes);
    }
  }
  if (bytes == 0) bytes = options.count * options.batch * options.value_bytes;
  const SocketBaselineOptions so = SocketOptionsFor(
      bytes, options.connections, options.batch * options.value_bytes, options.max_seconds);
  Note(log, fmt::format("socket: {} over {} loopback streams, three ways", FormatSize(bytes),
                        so.streams));
  Result<std::vector<PhaseResult>> r = MeasureSocketLimit(so);
  if (r.ok()) {
    report->socket = std::move(*r);
  } else {
    report->socket_skipped = r.status().ToString();
  }
}

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

}  // namespace

ServerOptions EmbeddedServerOptions(uint64_t capacity, unsigned threads, int64_t busy_poll_us,
                                    uint64_t max_value, uint64_t max_batch) {
  ServerOptions so;
  so.capacity_bytes = capacity;
  so.threads = threads;
  so.busy_poll = std::chrono::microseconds(busy_poll_us);
  so.max_value_bytes = std::max(so.max_value_bytes, max_value);
  so.max_batch_keys = std::max<uint64_t>(so.max_batch_keys, max_batch);
  so.idle_timeout = std::chrono::milliseconds(0);
  return so;
}

bool EmbeddedNodeOffersShm() {
  return kHasUnixSocket<ServerOptions>;
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

namespace {

// The memcpy way that is the shared-memory limit: the copy through the pool when it ran (the
// arena of a node is larger than the caches, so a copy into it goes to memory), else the copy
// into the read buffers (which then are themselves larger than the pool).
const PhaseResult* MemcpyLimitOf(const std::vector<PhaseResult>& ways) {
  const PhaseResult* limit = nullptr;
  for (const PhaseResult& p : ways) {
    if (Failed(p)) continue;
    if (limit == nullptr || p.variant == "pool") limit = &p;
  }
  return limit;
}

}  // namespace

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

Result<BenchReport> RunBench(BenchOptions options, const BenchLog& log) {
  if (options.shape) {
    KVPORT_ASSIGN_OR_RETURN(options.value_bytes, ChunkBytes(*options.shape));
  }
  KVPORT_RETURN_IF_ERROR(options.Validate());
  KVPORT_ASSIGN_OR_RETURN(Transports transports, ResolveTransports(options.transport, options.url));
  if (options.warmup && options.warmup_bytes == 0) {
    options.warmup_bytes =
        options.url.empty() ? EmbeddedCapacity(options) : 2 * options.working_set_bytes();
  }
  BenchReport report;
  report.options = options;
  report.transports = transports.list;
  report.transport_note = transports.note;
  BenchData data(options);
  KVPORT_RETURN_IF_ERROR(RunKvport(options, data, &report, log));
  if (!Has(report.transports, Transport::kTcp)) {
    report.socket_skipped = "no TCP phase to compare with";
  } else if (options.socket_baseline) {
    RunSocket(options, &report, log);
  } else {
    report.socket_skipped = "not asked for (--no-socket)";
  }
  if (Has(report.transports, Transport::kShm)) {
    Note(log, fmt::format("memcpy: {} per call on {} thread(s)",
                          FormatSize(options.batch * options.value_bytes), data.threads()));
    CopyPool pool;
    report.memcpy = RunMemcpyBaseline(options, data, pool);
  }
  if (Has(report.transports, Transport::kUcx)) {
    for (Op op : options.ops) {
      if (op == Op::kExists) continue;
      Note(log, fmt::format("ucx_perftest: {} of {}", OpName(op), FormatSize(options.value_bytes)));
      report.ucx_perftest.push_back(UcxPerftestLimit(
          op, options.value_bytes, options.count * options.batch, options.max_seconds));
    }
  }
  if (options.redis_baseline) {
    RunRedis(options, data, &report, log);
  } else {
    report.redis_skipped = "not asked for (--peers, --no-redis)";
  }
  for (const std::string& system : options.python_peers)
    RunPythonPeer(system, options, &report, log);
  return report;
}

// --- The matrix ------------------------------------------------------------------------------

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

namespace {

// Bytes of a call's frame besides its values: header and descriptor, about (the round trip's
// cost hardly depends on them).
constexpr uint64_t kFrameOverhead = 64;

// Fills every row's round-trip limits (see MatrixRow), each shape measured once.
void MeasureRoundTrips(const MatrixOptions& options, const BenchLog& log, MatrixReport* report) {
  using Key = std::tuple<RoundTripSocket, int, uint64_t, uint64_t>;
  std::map<Key, PhaseResult> fastest;
  auto measure = [&](RoundTripSocket socket, int connections, uint64_t request, uint64_t response,
                     uint64_t value_bytes, uint64_t calls) -> PhaseResult {
    const Key key{socket, connections, request, response};
    if (auto it = fastest.find(key); it != fastest.end()) return it->second;
    RoundTripOptions rt;
    rt.socket = socket;
    rt.connections = connections;
    rt.request_bytes = request;
    rt.response_bytes = response;
    rt.value_bytes = value_bytes;
    rt.calls = calls;
    rt.max_seconds = options.max_seconds;
    const std::string shape = fmt::format("{} x{} conn, {} request, {} response",
                                          socket == RoundTripSocket::kTcp ? "tcp" : "unix",
                                          connections, FormatSize(request), FormatSize(response));
    Note(log, "matrix: round trip, " + shape);
    Result<std::vector<PhaseResult>> r = MeasureRoundTripLimit(rt);
    PhaseResult best;
    if (!r.ok()) {
      best.system = "round trip";
      best.error = r.status().ToString();
    } else {
      for (PhaseResult& p : *r) {
        p.variant = fmt::format("{}, {}", p.variant, shape);
        report->round_trips.push_back(p);
      }
      best = r->front();  // the faster mode
    }
    fastest[key] = best;
    return best;
  };
  for (MatrixRow& row : report->rows) {
    const uint64_t values = row.batch * row.value_bytes;
    const uint64_t calls = options.calls_for(row.value_bytes, row.batch);
    if (row.transport == Transport::kTcp) {
      row.round_trip_put = measure(RoundTripSocket::kTcp, row.connections, values + kFrameOverhead,
                                   kFrameOverhead, values, calls);
      row.round_trip_get = measure(RoundTripSocket::kTcp, row.connections, kFrameOverhead,
                                   values + kFrameOverhead, values, calls);
    } else if (!row.limit.system.empty()) {
      const PhaseResult control = measure(RoundTripSocket::kUnix, row.connections, kFrameOverhead,
                                          kFrameOverhead, 0, calls);
      row.round_trip_put = ShmCallLimit(control, row.limit, values, row.connections);
      row.round_trip_get = row.round_trip_put;
    }
  }
}

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
        BenchOptions peer = o;
        const uint64_t segment = ShapeStoreBytes(o.value_bytes, o.batch, o.connections);
        peer.warmup = true;
        peer.warmup_bytes = segment;
        Note(log, fmt::format("matrix: {} x{} x{} conn, {}", FormatSize(o.value_bytes), o.batch,
                              o.connections, driver.system));
        MatrixRow::Peer& theirs = row.peers.emplace_back();
        theirs.system = driver.system;
        Result<std::vector<PhaseResult>> peer_phases = RunPeerDriver(driver, peer, segment);
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
      }
      report.rows.push_back(std::move(row));
    }
  }
  clients.clear();
  node.server->Stop();
  node.server.reset();

  // The TCP limits: for each connection count and write size, the fastest socket mode.
  if (Has(report.transports, Transport::kTcp)) {
    if (!options.socket_baseline) {
      report.socket_skipped = "not asked for (--no-socket)";
    } else {
      std::map<std::pair<int, uint64_t>, PhaseResult> best, blocking;
      for (MatrixRow& row : report.rows) {
        if (row.transport != Transport::kTcp) continue;
        const SocketBaselineOptions so = SocketOptionsFor(
            options.phase_bytes, row.connections, row.batch * row.value_bytes, options.max_seconds);
        const auto key = std::make_pair(so.streams, so.write_bytes);
        if (!best.contains(key) && report.socket_skipped.empty()) {
          Note(log, fmt::format("matrix: socket limit, {} stream(s), {} writes", so.streams,
                                FormatSize(so.write_bytes)));
          Result<std::vector<PhaseResult>> r = MeasureSocketLimit(so);
          if (!r.ok()) {
            report.socket_skipped = r.status().ToString();
            continue;
          }
          PhaseResult fastest;
          for (PhaseResult& p : *r) {
            const bool is_blocking = p.variant == SocketModeName(SocketMode::kBlocking);
            p.variant = fmt::format("{}, {} stream(s), {} writes", p.variant, so.streams,
                                    FormatSize(so.write_bytes));
            if (fastest.system.empty() || p.gb_per_second() > fastest.gb_per_second()) {
              fastest = p;
            }
            if (is_blocking) blocking[key] = p;
            report.socket.push_back(std::move(p));
          }
          best[key] = fastest;
        }
        if (auto it = best.find(key); it != best.end()) row.limit = it->second;
        if (auto it = blocking.find(key); it != blocking.end()) row.socket_blocking = it->second;
      }
    }
  }
  if (options.socket_baseline && report.socket_skipped.empty()) {
    MeasureRoundTrips(options, log, &report);
  }
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace kvport::bench
