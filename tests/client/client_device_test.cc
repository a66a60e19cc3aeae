// SPDX-License-Identifier: Apache-2.0
// Transport selection at Init and device buffers staged through pinned host memory, with the
// fake CUDA runtime built in tests/fakes (its path comes as KVPORT_FAKE_CUDART).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "client/device_staging.h"
#include "kvport/client.h"
#include "kvport/device.h"
#include "test_node.h"

namespace kvport {
namespace {

using testing::Pattern;
using testing::SmallNodeOptions;
using testing::StartNode;

// Sets an environment variable (a fake runtime's knob) for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

TEST(ClientTransportTest, GpuDirectNeedsAUsableCudaRuntimeWhileTcpAndRdmaInitialize) {
  auto node = StartNode(SmallNodeOptions());
  ASSERT_NE(node, nullptr);

  // This host's own runtimes: GPUDirect needs a usable CUDA runtime (there is no driver here).
  InitOptions gdr;
  gdr.transport_type = 3;
  Client gdr_client;
  Status refused = gdr_client.Init("gdr", node->address(), gdr);
  EXPECT_EQ(refused.code(), StatusCode::kNotSupported) << refused.ToString();
  EXPECT_NE(refused.message().find("GPUDirect"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("CUDA"), std::string::npos) << refused.message();
  EXPECT_EQ(gdr_client.Ping().code(), StatusCode::kInvalidArgument);  // not initialized

  // With a usable (fake) CUDA runtime type 3 works: device buffers staged, a warning says why.
  gdr.cuda_runtime_library = KVPORT_FAKE_CUDART;
  Client gdr_fake;
  Status staged = gdr_fake.Init("gdr-fake", node->address(), gdr);
  ASSERT_TRUE(staged.ok()) << staged.ToString();
  EXPECT_NE(gdr_fake.transport_reason().find("device buffers are staged"), std::string::npos)
      << gdr_fake.transport_reason();
  EXPECT_TRUE(gdr_fake.Ping().ok());

  for (int type : {1, 2, 0}) {
    InitOptions options;
    options.transport_type = type;
    Client c;
    Status init = c.Init("t" + std::to_string(type), "eic://" + node->address(), options);
    ASSERT_TRUE(init.ok()) << "eic_trans_type " << type << ": " << init.ToString();
    EXPECT_EQ(c.transport(), "TCP");
    if (type == 2) {
      EXPECT_NE(c.transport_reason().find("RDMA"), std::string::npos) << c.transport_reason();
    }
    EXPECT_TRUE(c.Ping().ok());
  }

  InitOptions bogus;
  bogus.transport_type = 7;
  Client b;
  EXPECT_EQ(b.Init("bogus", node->address(), bogus).code(), StatusCode::kInvalidArgument);
}

class DeviceStagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    node_ = StartNode(SmallNodeOptions());
    ASSERT_NE(node_, nullptr);
    cuda_ = OpenCudaRuntime(KVPORT_FAKE_CUDART);
    ASSERT_TRUE(cuda_->usable()) << cuda_->reason();
    InitOptions options;
    options.cuda_runtime_library = KVPORT_FAKE_CUDART;
    Status init = client_.Init("staging", node_->address(), options);
    ASSERT_TRUE(init.ok()) << init.ToString();
  }

  void TearDown() override {
    for (void* p : device_)
      EXPECT_TRUE(cuda_->FreeDevice(p).ok());
  }

  char* DeviceAlloc(size_t n) {
    Result<void*> p = cuda_->AllocDevice(n);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return nullptr;
    device_.push_back(*p);
    return static_cast<char*>(*p);
  }

  std::vector<char> ReadDevice(const char* p, size_t n) {
    std::vector<char> host(n);
    EXPECT_TRUE(cuda_->CopyToHost(host.data(), p, n).ok());
    return host;
  }

  std::unique_ptr<Server> node_;
  std::unique_ptr<DeviceRuntime> cuda_;
  std::vector<void*> device_;
  Client client_;
};

TEST_F(DeviceStagingTest, MsetFromAndMgetIntoDeviceMemory) {
  const std::vector<char> a = Pattern(1, 300000);
  const std::vector<char> b = Pattern(2, 777);
  char* dev_a = DeviceAlloc(a.size());
  char* dev_b = DeviceAlloc(b.size());
  ASSERT_TRUE(cuda_->CopyToDevice(dev_a, a.data(), a.size()).ok());
  ASSERT_TRUE(cuda_->CopyToDevice(dev_b, b.data(), b.size()).ok());

  IOBuffers put;
  put.Append(dev_a, a.size(), true);
  put.Append(dev_b, b.size(), true);
  ASSERT_TRUE(client_.RegisterMemory(put, MemoryInfo{RuntimeKind::kCuda, 0}).ok());
  Result<BatchResult> stored =
      client_.MSet({"dev-a", "dev-b"}, put, SetOptions{}, std::vector<std::string>{"ma", "mb"});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ(stored->status, BatchCode::kSuccess) << stored->error.ToString();

  // Host buffers see the bytes that were in device memory.
  std::vector<char> host_a(a.size()), host_b(b.size());
  IOBuffers host;
  host.Append(host_a.data(), host_a.size());
  host.Append(host_b.data(), host_b.size());
  Result<GetResult> on_host = client_.MGet({"dev-a", "dev-b"}, GetOptions{}, host);
  ASSERT_TRUE(on_host.ok());
  EXPECT_EQ(on_host->status, BatchCode::kSuccess);
  EXPECT_EQ(host_a, a);
  EXPECT_EQ(host_b, b);

  // And device buffers (one registered region holding two values) receive them back.
  char* dev_out = DeviceAlloc(a.size() + 4096);
  IOBuffers region;
  region.Append(dev_out, a.size() + 4096);
  ASSERT_TRUE(client_.RegisterMemory(region, MemoryInfo{RuntimeKind::kCuda, 0}).ok());
  IOBuffers into;
  into.Append(dev_out, a.size(), true);
  into.Append(dev_out + a.size(), 4096, true);
  Result<GetResult> on_device = client_.MGet({"dev-a", "dev-b"}, GetOptions{}, into);
  ASSERT_TRUE(on_device.ok()) << on_device.status().ToString();
  ASSERT_EQ(on_device->status, BatchCode::kSuccess) << on_device->error.ToString();
  EXPECT_EQ(on_device->metas, (std::vector<std::string>{"ma", "mb"}));
  EXPECT_EQ(ReadDevice(dev_out, a.size()), a);
  EXPECT_EQ(ReadDevice(dev_out + a.size(), b.size()), b);

  // A device buffer too small is a per-key error too.
  IOBuffers tiny;
  tiny.Append(dev_out, 100, true);
  Result<GetResult> too_small = client_.MGet({"dev-a"}, GetOptions{}, tiny);
  ASSERT_TRUE(too_small.ok());
  EXPECT_EQ(too_small->codes[0], KeyCode::kBufferTooSmall);
  EXPECT_EQ(too_small->value_sizes[0], a.size());
}

// The transport seam: a transport that moves CUDA memory itself (TransportCapabilities::
// memory_kinds: UCX with CUDA support) gets the caller's device pointers as they are; one that
// moves host memory only gets a pinned host copy in their place.
TEST(DeviceStagingSeamTest, OnlyTheKindsATransportDoesNotMoveAreStaged) {
  client::DeviceStaging devices;
  devices.UseLibraries(KVPORT_FAKE_CUDART, "", 64 << 20);
  const DeviceRuntime* cuda = devices.Runtime(RuntimeKind::kCuda);
  ASSERT_TRUE(cuda != nullptr && cuda->usable());
  Result<void*> device = cuda->AllocDevice(4096);
  ASSERT_TRUE(device.ok());
  ASSERT_TRUE(devices.registry().Register(*device, 4096, MemoryInfo{RuntimeKind::kCuda, 0}).ok());
  std::vector<char> host(100);
  IOBuffers buffers;
  buffers.Append(*device, 4096, true);
  buffers.Append(host.data(), host.size());
  buffers.Append(*device, 0, true);  // empty: nothing to stage or move, whatever its memory
  const std::vector<std::string> keys = {"on-device", "on-host", "empty"};
  client::KeyOutcomes outcomes(keys, "MSET", "");
  client::WireBuffers wire;

  devices.MapBuffers(buffers, client::TransportCapabilities{}, outcomes, &wire);
  EXPECT_TRUE(wire.staged(0));
  EXPECT_NE(wire.address[0], *device);
  EXPECT_EQ(wire.memory[0].kind, RuntimeKind::kHost);
  EXPECT_EQ(wire.caller[0].kind, RuntimeKind::kCuda);
  EXPECT_EQ(wire.leases.size(), 1u);
  EXPECT_FALSE(wire.staged(1));
  EXPECT_EQ(wire.address[1], host.data());
  EXPECT_FALSE(wire.staged(2));

  client::TransportCapabilities direct;
  direct.memory_kinds |= client::MemoryKindBit(RuntimeKind::kCuda);
  devices.MapBuffers(buffers, direct, outcomes, &wire);
  EXPECT_FALSE(wire.staged(0));
  EXPECT_EQ(wire.address[0], *device);
  EXPECT_EQ(wire.memory[0].kind, RuntimeKind::kCuda);
  EXPECT_TRUE(wire.leases.empty());
  EXPECT_EQ(wire.address[1], host.data());
  EXPECT_FALSE(wire.staged(2));
  EXPECT_FALSE(outcomes.failed(0) || outcomes.failed(1) || outcomes.failed(2));
  EXPECT_TRUE(cuda->FreeDevice(*device).ok());
}

// A function of the fake CUDA runtime the client loaded (the same copy, so the same state).
template <typename Function>
Function FakeCudartFunction(const char* name) {
  void* handle = ::dlopen(KVPORT_FAKE_CUDART, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* symbol = ::dlsym(handle, name);
  ::dlclose(handle);
  return reinterpret_cast<Function>(symbol);
}

// Staging must not disturb the caller's CUDA state: a vLLM or SGLang worker has its own current
// device and streams. The copies run on kvport's stream on the buffer's device; the caller's
// current device is the same after the call, and nothing ran on the default stream.
TEST_F(DeviceStagingTest, StagingLeavesTheCallersDeviceAndDefaultStreamAlone) {
  ScopedEnv two("FAKE_CUDA_DEVICE_COUNT", "2");  // before the client opens its runtime
  auto caller = OpenCudaRuntime(KVPORT_FAKE_CUDART);
  ASSERT_EQ(caller->device_count(), 2) << caller->reason();
  const auto copies = FakeCudartFunction<long (*)(int)>("fake_cuda_copies");
  const auto get_device = FakeCudartFunction<int (*)(int*)>("cudaGetDevice");
  ASSERT_NE(copies, nullptr);
  ASSERT_NE(get_device, nullptr);

  const std::vector<char> v = Pattern(5, 65536);
  char* dev = DeviceAlloc(v.size());
  ASSERT_TRUE(cuda_->CopyToDevice(dev, v.data(), v.size()).ok());
  IOBuffers buffer;
  buffer.Append(dev, v.size(), true);
  ASSERT_TRUE(client_.RegisterMemory(buffer, MemoryInfo{RuntimeKind::kCuda, 0}).ok());

  ASSERT_TRUE(caller->SetDevice(1).ok());  // the caller's thread works on device 1
  const long on_default = copies(0);
  const long on_own = copies(1);
  Result<BatchResult> stored = client_.MSet({"stream-put"}, buffer);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ(stored->status, BatchCode::kSuccess) << stored->error.ToString();
  std::vector<char> zeros(v.size(), 0);
  IOBuffers wipe;
  wipe.Append(zeros.data(), zeros.size());
  ASSERT_TRUE(client_.MSet({"zeros"}, wipe)->status == BatchCode::kSuccess);
  ASSERT_TRUE(client_.MGet({"zeros"}, GetOptions{}, buffer)->status == BatchCode::kSuccess);
  Result<GetResult> got = client_.MGet({"stream-put"}, GetOptions{}, buffer);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->status, BatchCode::kSuccess) << got->error.ToString();

  int device = -1;
  ASSERT_EQ(get_device(&device), 0);
  EXPECT_EQ(device, 1);
  EXPECT_EQ(copies(0), on_default);
  EXPECT_EQ(copies(1), on_own + 3);  // one put and two gets, each on kvport's stream
  ASSERT_TRUE(caller->SetDevice(0).ok());
  EXPECT_EQ(ReadDevice(dev, v.size()), v);  // the zeros were read back over, then v
}

TEST_F(DeviceStagingTest, AFailingDeviceCopyIsThatKeysDeviceError) {
  const std::vector<char> v = Pattern(3, 1024);
  char* dev = DeviceAlloc(v.size());
  ASSERT_TRUE(cuda_->CopyToDevice(dev, v.data(), v.size()).ok());
  IOBuffers registered;
  registered.Append(dev, v.size(), true);
  ASSERT_TRUE(client_.RegisterMemory(registered, MemoryInfo{RuntimeKind::kCuda, 0}).ok());

  IOBuffers put;
  put.Append(dev, v.size(), true);
  put.Append(v.data(), v.size());
  Result<BatchResult> stored = [&] {
    ScopedEnv fail("FAKE_CUDA_FAIL", "cudaMemcpyAsync");
    return client_.MSet({"from-device", "from-host"}, put);
  }();
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->codes, (std::vector<KeyCode>{KeyCode::kDeviceError, KeyCode::kSuccess}));
  EXPECT_EQ(stored->error.code(), StatusCode::kDeviceError);
  EXPECT_NE(stored->error.message().find("cudaMemcpyAsync"), std::string::npos)
      << stored->error.message();
  // Nothing was stored for the key whose bytes could not be read.
  EXPECT_EQ(client_.MExist({"from-device"})->codes[0], KeyCode::kKeyNotExist);
}

TEST_F(DeviceStagingTest, RegisterMemoryChecksTheRuntimeAndTheDevice) {
  char* dev = DeviceAlloc(64);
  IOBuffers buffers;
  buffers.Append(dev, 64);
  Status bad_device = client_.RegisterMemory(buffers, MemoryInfo{RuntimeKind::kCuda, 5});
  EXPECT_EQ(bad_device.code(), StatusCode::kInvalidArgument) << bad_device.ToString();

  // A client whose CUDA runtime is missing refuses CUDA memory, naming what is missing.
  InitOptions options;
  options.cuda_runtime_library = "/nonexistent/libcudart.so.13";
  Client other;
  ASSERT_TRUE(other.Init("no-cuda", node_->address(), options).ok());
  Status refused = other.RegisterMemory(buffers, MemoryInfo{RuntimeKind::kCuda, 0});
  EXPECT_EQ(refused.code(), StatusCode::kNotSupported) << refused.ToString();
  EXPECT_NE(refused.message().find("/nonexistent/libcudart.so.13"), std::string::npos)
      << refused.message();
  // Host memory needs no runtime.
  std::vector<char> host(64);
  IOBuffers host_buffers;
  host_buffers.Append(host.data(), host.size());
  EXPECT_TRUE(other.RegisterMemory(host_buffers, MemoryInfo{RuntimeKind::kHost, 0}).ok());
}

}  // namespace
}  // namespace kvport
