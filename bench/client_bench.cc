// SPDX-License-Identifier: Apache-2.0
// Micro-benchmarks of the client's call path against an in-process node on loopback: one small
// call at a time, blocking or with calls in flight, and the heap allocations each call makes in
// this process (client and node together: the node runs here too), counted by a replaced global
// operator new. Read the allocations as the hot path's cost the issue tracker names; read the
// times as ratios between the rows of one run.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <filesystem>

#include <string>
#include <vector>

#include "kvport/client.h"
#include "kvport/log.h"
#include "kvport/server.h"
#include "net/tls.h"
#include "support/allocation_counter.h"

namespace kvport {
namespace {

struct Node {
  Node() {
    log::SetLevel(log::Level::kWarn);
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.capacity_bytes = uint64_t{256} << 20;
    options.threads = 1;
    options.unix_socket = "";
    server = std::move(Server::Start(options)).value();
    InitOptions init;
    init.transport_type = 1;  // TCP
    init.connections = 1;
    if (!client.Init("client-bench", server->address(), init).ok()) std::abort();
  }
  std::unique_ptr<Server> server;
  Client client;
};

Node& SharedNode() {
  static Node* node = new Node();
  return *node;
}

// Keys of `batch` values of `bytes` each, stored.
struct Batch {
  Batch(Client& client, int batch, size_t bytes, const std::string& prefix) {
    values.assign(batch, std::vector<char>(bytes, 'v'));
    reads.assign(batch, std::vector<char>(bytes));
    for (int i = 0; i < batch; ++i) {
      keys.push_back(prefix + std::to_string(i));
      put.Append(values[i].data(), values[i].size());
      get.Append(reads[i].data(), reads[i].size());
    }
    if (!client.MSet(keys, put).ok()) std::abort();
  }
  std::vector<std::string> keys;
  std::vector<std::vector<char>> values, reads;
  IOBuffers put, get;
};

void CountAllocations(benchmark::State& state, uint64_t before, uint64_t calls) {
  state.counters["allocs/call"] =
      static_cast<double>(testing::Allocations() - before) / static_cast<double>(calls);
}

// MGet, blocking: args are keys per call and value bytes.
void BM_MGet(benchmark::State& state) {
  Client& client = SharedNode().client;
  Batch batch(client, static_cast<int>(state.range(0)), static_cast<size_t>(state.range(1)),
              "get-" + std::to_string(state.range(0)) + "-");
  const uint64_t before = testing::Allocations();
  for (auto _ : state) {
    Result<GetResult> got = client.MGet(batch.keys, {}, batch.get);
    if (!got.ok() || got->status != BatchCode::kSuccess) state.SkipWithError("MGet failed");
  }
  CountAllocations(state, before, state.iterations());
  state.SetBytesProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_MGet)->Args({1, 4096})->Args({16, 4096})->Args({1, 64 << 10})->UseRealTime();

// MExist of one key, blocking: the smallest round trip that touches the store.
void BM_MExist(benchmark::State& state) {
  Client& client = SharedNode().client;
  Batch batch(client, 1, 64, "exist-");
  const uint64_t before = testing::Allocations();
  for (auto _ : state) {
    Result<BatchResult> got = client.MExist(batch.keys);
    if (!got.ok() || got->status != BatchCode::kSuccess) state.SkipWithError("MExist failed");
  }
  CountAllocations(state, before, state.iterations());
}
BENCHMARK(BM_MExist)->UseRealTime();

// MGet of range(0) keys of 4 KiB over shared memory (a node on this host, its Unix socket):
// one copy out of the mapped arena per value.
void BM_MGetShm(benchmark::State& state) {
  static std::unique_ptr<Server> node;
  static Client client;
  if (node == nullptr) {
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.capacity_bytes = uint64_t{64} << 20;
    options.threads = 1;
    options.unix_socket = "/tmp/kvport-client-bench-" + std::to_string(::getpid()) + ".sock";
    node = std::move(Server::Start(options)).value();
    InitOptions init;
    init.connections = 1;
    if (!client.Init("client-bench-shm", "unix:" + options.unix_socket, init).ok()) std::abort();
  }
  Batch batch(client, static_cast<int>(state.range(0)), 4096,
              "shm-" + std::to_string(state.range(0)) + "-");
  const uint64_t before = testing::Allocations();
  for (auto _ : state) {
    Result<GetResult> got = client.MGet(batch.keys, {}, batch.get);
    if (!got.ok() || got->status != BatchCode::kSuccess) state.SkipWithError("MGet failed");
  }
  CountAllocations(state, before, state.iterations());
}
BENCHMARK(BM_MGetShm)->Arg(1)->Arg(16)->UseRealTime();

// MExist of range(0) stored keys against one node (range(1) == 1) or against three nodes as one
// static cluster (range(1) == 3). The CPU column is the calling thread's: with three nodes it
// adds splitting the call by node, ranking every key, and merging the answers.
void BM_MExistMany(benchmark::State& state) {
  const size_t keys = static_cast<size_t>(state.range(0));
  const int nodes = static_cast<int>(state.range(1));
  static std::vector<std::unique_ptr<Server>> servers;  // started once, shared by every run
  while (servers.size() < 3) {
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.capacity_bytes = uint64_t{64} << 20;
    options.threads = 1;
    options.unix_socket = "";
    servers.push_back(std::move(Server::Start(options)).value());
  }
  std::string endpoint;
  for (int n = 0; n < nodes; ++n)
    endpoint += (n == 0 ? "" : ";") + servers[n]->address();
  InitOptions init;
  init.transport_type = 1;  // TCP
  init.connections = 1;
  Client client;
  if (!client.Init("client-bench-many", endpoint, init).ok()) std::abort();
  Batch batch(client, static_cast<int>(keys), 64, "many-" + std::to_string(nodes) + "-");
  const uint64_t before = testing::Allocations();
  for (auto _ : state) {
    Result<BatchResult> got = client.MExist(batch.keys);
    if (!got.ok() || got->status != BatchCode::kSuccess) state.SkipWithError("MExist failed");
  }
  CountAllocations(state, before, state.iterations());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(keys));
}
BENCHMARK(BM_MExistMany)->Args({1024, 1})->Args({1024, 3})->UseRealTime();

// MGet of one 64 KiB value with range(0) calls in flight from this thread (MGetAsync, then Wait
// for all); an iteration is the group.
void BM_MGetInFlight(benchmark::State& state) {
  Client& client = SharedNode().client;
  const int depth = static_cast<int>(state.range(0));
  std::vector<std::unique_ptr<Batch>> batches;
  for (int d = 0; d < depth; ++d)
    batches.push_back(std::make_unique<Batch>(client, 1, 64 << 10, "fly-" + std::to_string(d)));
  std::vector<Pending<GetResult>> calls(depth);
  const uint64_t before = testing::Allocations();
  for (auto _ : state) {
    for (int d = 0; d < depth; ++d)
      calls[d] = client.MGetAsync(batches[d]->keys, {}, batches[d]->get);
    for (auto& call : calls) {
      Result<GetResult> got = call.Wait();
      if (!got.ok() || got->status != BatchCode::kSuccess) state.SkipWithError("MGet failed");
    }
  }
  CountAllocations(state, before, state.iterations() * depth);
  state.SetBytesProcessed(state.iterations() * depth * (64 << 10));
}
BENCHMARK(BM_MGetInFlight)->Arg(1)->Arg(4)->Arg(16)->UseRealTime();

// Two nodes alike but for TLS on one (throwaway certificates), each with a client of 4
// connections over TCP: TLS's cost is the ratio of the two rows of one run.
struct TlsAndPlainNodes {
  TlsAndPlainNodes() {
    log::SetLevel(log::Level::kWarn);
    char tmpl[] = "/tmp/kvport-bench-tls-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    dir = tmpl;
    if (!net::WriteTestCertificates(dir, {}).ok()) std::abort();
    for (bool tls : {false, true}) {
      ServerOptions options;
      options.listen = "127.0.0.1:0";
      options.capacity_bytes = uint64_t{256} << 20;
      options.threads = 2;
      options.unix_socket = "";
      if (tls) {
        options.tls_cert_file = dir + "/node.pem";
        options.tls_key_file = dir + "/node.key";
      }
      servers[tls] = std::move(Server::Start(options)).value();
      InitOptions init;
      init.transport_type = 1;  // TCP
      init.connections = 4;
      if (tls) init.tls_ca_file = dir + "/ca.pem";
      if (!clients[tls]
               .Init("tls-bench", "localhost:" + std::to_string(servers[tls]->port()), init)
               .ok()) {
        std::abort();
      }
    }
  }
  ~TlsAndPlainNodes() { std::filesystem::remove_all(dir); }
  std::string dir;
  std::unique_ptr<Server> servers[2];
  Client clients[2];
};

// One 4 MiB value per call (MSet when range(1) is 1, else MGet) from each of 4 threads, over
// plain TCP (range(0) 0) or TLS (1): docs/performance.md, "TLS".
void BM_Value4MiB(benchmark::State& state) {
  static TlsAndPlainNodes* nodes = new TlsAndPlainNodes();
  constexpr size_t kBytes = 4 << 20;
  Client& client = nodes->clients[state.range(0)];
  const bool put = state.range(1) == 1;
  const std::vector<std::string> keys = {"v4-" + std::to_string(state.thread_index())};
  std::vector<char> value(kBytes, 'v'), read(kBytes);
  IOBuffers out, in;
  out.Append(value.data(), value.size());
  in.Append(read.data(), read.size());
  if (!client.MSet(keys, out).ok()) std::abort();
  for (auto _ : state) {
    if (put) {
      Result<BatchResult> r = client.MSet(keys, out);
      if (!r.ok() || r->status != BatchCode::kSuccess) state.SkipWithError("MSet failed");
    } else {
      Result<GetResult> r = client.MGet(keys, {}, in);
      if (!r.ok() || r->status != BatchCode::kSuccess) state.SkipWithError("MGet failed");
    }
  }
  state.SetBytesProcessed(state.iterations() * kBytes);
  state.SetLabel(std::string(state.range(0) == 1 ? "tls " : "tcp ") + (put ? "put" : "get"));
}
BENCHMARK(BM_Value4MiB)->ArgsProduct({{0, 1}, {1, 0}})->Threads(4)->UseRealTime();

}  // namespace
}  // namespace kvport
