// SPDX-License-Identifier: Apache-2.0
#include "bench/bench_node.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <concepts>
#include <utility>

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

}  // namespace

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

uint64_t EmbeddedCapacity(const BenchOptions& o) {
  if (o.node_capacity != 0) return o.node_capacity;
  const uint64_t batch_bytes = static_cast<uint64_t>(o.batch) * o.value_bytes;
  return 2 * o.working_set_bytes() + o.worker_threads() * batch_bytes + (uint64_t{64} << 20);
}

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

}  // namespace kvport::bench
