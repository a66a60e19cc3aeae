// SPDX-License-Identifier: Apache-2.0
// cuda_staging_check: puts from and gets into CUDA device memory through kvport (the client
// stages them through pinned host memory) against the same calls from host memory (what staging
// costs) and against cudaMemcpy of pinned memory (the copy's limit), the same bytes, in one run;
// every value read back is compared. Run by scripts/gpu-check on a host with a GPU
// (docs/portability.md); here, against the fake CUDA runtime, it checks its own plumbing.
//
//   cuda_staging_check [--cuda-runtime PATH] [--value-size BYTES] [--batch N] [--calls N]
//
// --cuda-runtime defaults to $KVPORT_CUDA_RUNTIME_LIBRARY, then the standard names.
// Prints one line per measurement and exits 0 when every value came back intact, 2 when there is
// no usable CUDA runtime (the reason printed), 1 on any other failure.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/monotonic_clock.h"
#include "kvport/client.h"
#include "kvport/device.h"
#include "kvport/server.h"

namespace kvport {
namespace {

struct Options {
  std::string cuda_runtime;  // "" = the standard names
  size_t value_size = 8 << 20;
  size_t batch = 16;
  int calls = 16;
};

int Fail(const std::string& what) {
  std::fprintf(stderr, "cuda_staging_check: %s\n", what.c_str());
  return 1;
}

double GBps(uint64_t bytes, MonotonicClock::duration d) {
  return static_cast<double>(bytes) / std::chrono::duration<double>(d).count() / 1e9;
}

int Run(const Options& o) {
  std::unique_ptr<DeviceRuntime> cuda = OpenCudaRuntime(o.cuda_runtime);
  std::printf("cuda runtime: %s %s%s\n", std::string(RuntimeStateName(cuda->state())).c_str(),
              cuda->info().library_path.c_str(),
              cuda->usable() ? "" : (": " + cuda->reason()).c_str());
  if (!cuda->usable()) return 2;
  std::printf("cuda devices: %d, runtime %s, driver %s\n", cuda->device_count(),
              cuda->info().version.c_str(), cuda->info().driver_version.c_str());
  if (!cuda->SetDevice(0).ok()) return Fail("cudaSetDevice(0) failed");
  const uint64_t bytes = uint64_t{o.value_size} * o.batch;

  ServerOptions node_options;
  node_options.capacity_bytes = bytes * 2 + (64 << 20);
  node_options.max_value_bytes = o.value_size;
  node_options.threads = 2;
  Result<std::unique_ptr<Server>> node = Server::Start(node_options);
  if (!node.ok()) return Fail(node.status().ToString());
  Client client;
  InitOptions init;
  init.cuda_runtime_library = o.cuda_runtime;
  init.transport_type = 1;  // TCP: the path a remote node takes
  Status started = client.Init("cuda-staging-check", (*node)->address(), init);
  if (!started.ok()) return Fail(started.ToString());

  // Device memory: one region holding every value, registered once; pinned host memory of the
  // same size for the cudaMemcpy limit.
  Result<void*> device = cuda->AllocDevice(bytes);
  Result<void*> pinned = cuda->AllocPinnedHost(bytes);
  if (!device.ok() || !pinned.ok()) return Fail("device or pinned allocation failed");
  char* dev = static_cast<char*>(*device);
  char* host = static_cast<char*>(*pinned);
  for (uint64_t i = 0; i < bytes; ++i)
    host[i] = static_cast<char>(i * 31 + (i >> 12));
  if (!cuda->CopyToDevice(dev, host, bytes).ok()) return Fail("filling device memory failed");
  IOBuffers region;
  region.Append(dev, bytes);
  if (Status s = client.RegisterMemory(region, MemoryInfo{RuntimeKind::kCuda, 0}); !s.ok())
    return Fail(s.ToString());
  std::vector<std::string> keys;
  IOBuffers values;
  for (size_t k = 0; k < o.batch; ++k) {
    keys.push_back("gpu-" + std::to_string(k));
    values.Append(dev + k * o.value_size, o.value_size, true);
  }

  const auto timed = [&](auto&& call) {
    const auto start = MonotonicClock::now();
    for (int c = 0; c < o.calls; ++c)
      if (!call()) return MonotonicClock::duration::max();
    return MonotonicClock::now() - start;
  };
  const auto put = timed([&] {
    Result<BatchResult> r = client.MSet(keys, values);
    return r.ok() && r->status == BatchCode::kSuccess;
  });
  if (put == MonotonicClock::duration::max()) return Fail("MSet from device memory failed");
  // Gets land in device memory that was scribbled first, then are compared on the host.
  if (!cuda->CopyToDevice(dev, std::vector<char>(bytes, 0).data(), bytes).ok())
    return Fail("clearing device memory failed");
  const auto get = timed([&] {
    Result<GetResult> r = client.MGet(keys, GetOptions{}, values);
    return r.ok() && r->status == BatchCode::kSuccess;
  });
  if (get == MonotonicClock::duration::max()) return Fail("MGet into device memory failed");
  std::vector<char> back(bytes);
  if (!cuda->CopyToHost(back.data(), dev, bytes).ok()) return Fail("reading device memory failed");
  if (std::memcmp(back.data(), host, bytes) != 0) return Fail("values came back different");

  IOBuffers host_values;
  for (size_t k = 0; k < o.batch; ++k)
    host_values.Append(host + k * o.value_size, o.value_size);
  const auto host_put = timed([&] {
    Result<BatchResult> r = client.MSet(keys, host_values);
    return r.ok() && r->status == BatchCode::kSuccess;
  });
  const auto host_get = timed([&] {
    Result<GetResult> r = client.MGet(keys, GetOptions{}, host_values);
    return r.ok() && r->status == BatchCode::kSuccess;
  });
  if (host_put == MonotonicClock::duration::max() || host_get == MonotonicClock::duration::max())
    return Fail("MSet or MGet of host memory failed");
  const auto h2d = timed([&] { return cuda->CopyToDevice(dev, host, bytes).ok(); });
  const auto d2h = timed([&] { return cuda->CopyToHost(host, dev, bytes).ok(); });
  const uint64_t total = bytes * o.calls;
  const double put_gbps = GBps(total, put), get_gbps = GBps(total, get);
  const double h2d_gbps = GBps(total, h2d), d2h_gbps = GBps(total, d2h);
  std::printf("shape: %zu values x %zu bytes per call, %d calls, TCP to an embedded node\n",
              o.batch, o.value_size, o.calls);
  const double host_put_gbps = GBps(total, host_put), host_get_gbps = GBps(total, host_get);
  std::printf(
      "kvport put from device: %.2f GB/s; from host %.2f GB/s (%.2fx); cudaMemcpy D2H "
      "pinned %.2f GB/s (%.2fx)\n",
      put_gbps, host_put_gbps, put_gbps / host_put_gbps, d2h_gbps, put_gbps / d2h_gbps);
  std::printf(
      "kvport get into device: %.2f GB/s; into host %.2f GB/s (%.2fx); cudaMemcpy H2D "
      "pinned %.2f GB/s (%.2fx)\n",
      get_gbps, host_get_gbps, get_gbps / host_get_gbps, h2d_gbps, get_gbps / h2d_gbps);
  std::printf("values intact: yes\n");
  (void)client.UnregisterMemory(region);
  (void)cuda->FreeDevice(dev);
  (void)cuda->FreePinnedHost(host);
  return 0;
}

}  // namespace
}  // namespace kvport

int main(int argc, char** argv) {
  kvport::Options o;
  if (const char* env = std::getenv("KVPORT_CUDA_RUNTIME_LIBRARY")) o.cuda_runtime = env;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--cuda-runtime") {
      o.cuda_runtime = value;
    } else if (flag == "--value-size") {
      o.value_size = std::strtoull(value, nullptr, 10);
    } else if (flag == "--batch") {
      o.batch = std::strtoull(value, nullptr, 10);
    } else if (flag == "--calls") {
      o.calls = std::atoi(value);
    } else {
      std::fprintf(stderr, "cuda_staging_check: unknown flag %s\n", argv[i]);
      return 1;
    }
  }
  if (argc % 2 == 0 || o.value_size == 0 || o.batch == 0 || o.calls <= 0) {
    std::fprintf(stderr,
                 "usage: cuda_staging_check [--cuda-runtime PATH] [--value-size BYTES] "
                 "[--batch N] [--calls N]\n");
    return 1;
  }
  return kvport::Run(o);
}
