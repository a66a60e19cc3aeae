// SPDX-License-Identifier: Apache-2.0
// The CUDA runtime in every state, driven by fake_cudart (tests/fakes).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "kvport/device.h"
#include "test_support.h"

namespace kvport {
namespace {

using testing::FakeCudart;
using testing::FakeCudartNoMemcpy;
using testing::FakeFunction;
using ::testing::HasSubstr;
using testing::ScopedEnv;

TEST(CudaRuntime, MissingFileIsAbsentWithThePathInTheReason) {
  auto rt = OpenCudaRuntime("/nonexistent/dir/libcudart.so.13");
  EXPECT_EQ(rt->state(), RuntimeState::kAbsent);
  EXPECT_FALSE(rt->usable());
  EXPECT_THAT(rt->reason(), HasSubstr("/nonexistent/dir/libcudart.so.13"));
  EXPECT_THAT(rt->reason(), HasSubstr("No such file or directory"));
  EXPECT_TRUE(rt->info().library.empty());
  EXPECT_EQ(rt->device_count(), 0);
}

TEST(CudaRuntime, UnknownSonameIsAbsent) {
  auto rt = OpenCudaRuntime("libcudart_kvport_test_missing.so.99");
  EXPECT_EQ(rt->state(), RuntimeState::kAbsent);
  EXPECT_THAT(rt->reason(), HasSubstr("libcudart_kvport_test_missing.so.99"));
  EXPECT_THAT(rt->reason(), HasSubstr("not in the loader's search path"));
}

TEST(CudaRuntime, FileThatIsNotALibraryIsUnusable) {
  char path[] = "/tmp/kvport_not_a_library_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "not an ELF file\n", 16), 16);
  close(fd);
  auto rt = OpenCudaRuntime(path);
  EXPECT_EQ(rt->state(), RuntimeState::kUnusable);
  EXPECT_THAT(rt->reason(), HasSubstr(path));
  EXPECT_THAT(rt->reason(), HasSubstr("present but failed to load"));
  unlink(path);
}

TEST(CudaRuntime, FakeWithDevicesIsAvailable) {
  ScopedEnv count("FAKE_CUDA_DEVICE_COUNT", "4");
  ScopedEnv version("FAKE_CUDA_VERSION", "12040");
  auto rt = OpenCudaRuntime(FakeCudart());
  ASSERT_EQ(rt->state(), RuntimeState::kAvailable) << rt->reason();
  EXPECT_TRUE(rt->reason().empty());
  EXPECT_EQ(rt->kind(), RuntimeKind::kCuda);
  EXPECT_EQ(rt->name(), "cuda");
  EXPECT_EQ(rt->device_count(), 4);
  EXPECT_EQ(rt->info().version, "12.4");
  EXPECT_EQ(rt->info().driver_version, "13.0");
  EXPECT_EQ(rt->info().library, FakeCudart());
  EXPECT_EQ(rt->info().library_path, FakeCudart());
  EXPECT_TRUE(rt->RequireUsable("staging").ok());
}

TEST(CudaRuntime, ZeroDevicesIsUnusable) {
  ScopedEnv count("FAKE_CUDA_DEVICE_COUNT", "0");
  auto rt = OpenCudaRuntime(FakeCudart());
  EXPECT_EQ(rt->state(), RuntimeState::kUnusable);
  EXPECT_THAT(rt->reason(), HasSubstr(FakeCudart()));
  EXPECT_THAT(rt->reason(), HasSubstr("cudaGetDeviceCount reports 0 devices"));
}

TEST(CudaRuntime, FailingDeviceCountIsUnusableWithTheRuntimesMessage) {
  ScopedEnv fail("FAKE_CUDA_FAIL", "cudaGetDeviceCount");
  ScopedEnv code("FAKE_CUDA_FAIL_CODE", "35");
  ScopedEnv driver("FAKE_CUDA_DRIVER_VERSION", "0");
  auto rt = OpenCudaRuntime(FakeCudart());
  EXPECT_EQ(rt->state(), RuntimeState::kUnusable);
  EXPECT_EQ(rt->reason(),
            std::string(FakeCudart()) +
                " loaded but cudaGetDeviceCount failed: error 35 (CUDA driver version is "
                "insufficient for CUDA runtime version)");
  EXPECT_EQ(rt->info().driver_version, "none");
  EXPECT_EQ(rt->info().version, "13.0");
  EXPECT_EQ(rt->device_count(), 0);
}

TEST(CudaRuntime, MissingRequiredSymbolIsUnusableNamingIt) {
  auto rt = OpenCudaRuntime(FakeCudartNoMemcpy());
  EXPECT_EQ(rt->state(), RuntimeState::kUnusable);
  EXPECT_THAT(rt->reason(), HasSubstr("lacks cudaMemcpy, required by kvport"));
  EXPECT_THAT(rt->reason(), HasSubstr(FakeCudartNoMemcpy()));
}

TEST(CudaRuntime, CallsOnAnUnusableRuntimeReturnNotSupportedWithTheReason) {
  auto rt = OpenCudaRuntime("/nonexistent/libcudart.so");
  char buf[16] = {};
  Status s = rt->CopyToHost(buf, buf, sizeof(buf));
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_THAT(s.message(), HasSubstr("cudaMemcpy needs a usable CUDA runtime"));
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/libcudart.so"));
  EXPECT_EQ(rt->AllocPinnedHost(64).status().code(), StatusCode::kNotSupported);
  EXPECT_EQ(rt->RegisterHost(buf, sizeof(buf)).code(), StatusCode::kNotSupported);
  EXPECT_EQ(rt->SetDevice(0).code(), StatusCode::kNotSupported);
}

TEST(CudaRuntime, CopiesRoundTripThroughDeviceMemory) {
  auto rt = OpenCudaRuntime(FakeCudart());
  ASSERT_TRUE(rt->usable()) << rt->reason();
  ASSERT_TRUE(rt->SetDevice(0).ok());
  constexpr size_t kBytes = 4096;
  Result<void*> a = rt->AllocDevice(kBytes);
  Result<void*> b = rt->AllocDevice(kBytes);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::vector<unsigned char> in(kBytes), out(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i)
    in[i] = static_cast<unsigned char>(i * 7 + 3);
  ASSERT_TRUE(rt->CopyToDevice(*a, in.data(), kBytes).ok());
  ASSERT_TRUE(rt->Memcpy(*b, *a, kBytes, MemcpyKind::kDeviceToDevice).ok());
  ASSERT_TRUE(rt->CopyToHost(out.data(), *b, kBytes).ok());
  EXPECT_EQ(in, out);
  EXPECT_TRUE(rt->Memcpy(out.data(), *a, 0, MemcpyKind::kDeviceToHost).ok());
  EXPECT_TRUE(rt->FreeDevice(*a).ok());
  EXPECT_TRUE(rt->FreeDevice(*b).ok());
}

TEST(CudaRuntime, CopyErrorCarriesTheRuntimesCodeAndString) {
  auto rt = OpenCudaRuntime(FakeCudart());
  ASSERT_TRUE(rt->usable()) << rt->reason();
  std::vector<char> host(4096), not_device(4096);
  // The source is host memory, not device memory: the runtime rejects the D2H copy.
  Status s = rt->CopyToHost(host.data(), not_device.data(), 4096);
  EXPECT_EQ(s.code(), StatusCode::kDeviceError);
  EXPECT_EQ(s.message(), "cudaMemcpy(D2H, 4096 bytes) failed: error 1 (invalid argument)");

  Result<void*> dev = rt->AllocDevice(4096);
  ASSERT_TRUE(dev.ok());
  {
    ScopedEnv fail("FAKE_CUDA_FAIL", "cudaMemcpy");
    ScopedEnv code("FAKE_CUDA_FAIL_CODE", "2");
    s = rt->CopyToDevice(*dev, host.data(), 4096);
    EXPECT_EQ(s.code(), StatusCode::kDeviceError);
    EXPECT_EQ(s.message(), "cudaMemcpy(H2D, 4096 bytes) failed: error 2 (out of memory)");
  }
  EXPECT_TRUE(rt->CopyToDevice(*dev, host.data(), 4096).ok());
  EXPECT_TRUE(rt->FreeDevice(*dev).ok());
}

// Staging copies (CopyOnDevice) run on a non-blocking stream kvport owns on the buffer's device
// and leave the calling thread's current device as it was, also when they fail.
TEST(CudaRuntime, CopyOnDeviceUsesItsOwnStreamAndLeavesTheCallersDevice) {
  ScopedEnv count("FAKE_CUDA_DEVICE_COUNT", "2");
  auto rt = OpenCudaRuntime(FakeCudart());
  ASSERT_TRUE(rt->usable()) << rt->reason();
  const auto copies = FakeFunction<long (*)(int)>(FakeCudart(), "fake_cuda_copies");
  const auto get_device = FakeFunction<int (*)(int*)>(FakeCudart(), "cudaGetDevice");
  ASSERT_NE(copies, nullptr);
  ASSERT_NE(get_device, nullptr);
  const auto current_device = [&] {
    int device = -1;
    EXPECT_EQ(get_device(&device), 0);
    return device;
  };
  constexpr size_t kBytes = 4096;
  Result<void*> dev = rt->AllocDevice(kBytes);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  std::vector<unsigned char> in(kBytes), out(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i)
    in[i] = static_cast<unsigned char>(i * 13 + 1);

  ASSERT_TRUE(rt->SetDevice(1).ok());  // the caller works on device 1
  const long on_default = copies(0);
  const long on_own = copies(1);
  ASSERT_TRUE(rt->CopyOnDevice(0, *dev, in.data(), kBytes, MemcpyKind::kHostToDevice).ok());
  ASSERT_TRUE(rt->CopyOnDevice(0, out.data(), *dev, kBytes, MemcpyKind::kDeviceToHost).ok());
  EXPECT_EQ(in, out);
  EXPECT_EQ(current_device(), 1);
  EXPECT_EQ(copies(0), on_default);  // nothing queued on (or waiting for) the default stream
  EXPECT_EQ(copies(1), on_own + 2);

  // Each device has its own stream (the fake refuses a stream of another device).
  ASSERT_TRUE(rt->CopyOnDevice(1, *dev, in.data(), kBytes, MemcpyKind::kHostToDevice).ok());
  EXPECT_EQ(copies(1), on_own + 3);

  // A failed copy names the call and its code, and the caller's device is still restored.
  {
    ScopedEnv fail("FAKE_CUDA_FAIL", "cudaMemcpyAsync");
    Status s = rt->CopyOnDevice(0, *dev, in.data(), kBytes, MemcpyKind::kHostToDevice);
    EXPECT_EQ(s.code(), StatusCode::kDeviceError);
    EXPECT_EQ(s.message(), "cudaMemcpyAsync(H2D, 4096 bytes) failed: error 1 (invalid argument)");
  }
  EXPECT_EQ(current_device(), 1);
  EXPECT_EQ(rt->CopyOnDevice(2, *dev, in.data(), kBytes, MemcpyKind::kHostToDevice).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(rt->CopyOnDevice(0, out.data(), *dev, 0, MemcpyKind::kDeviceToHost).ok());

  // Another thread starts on device 0 (CUDA's default) and stays there.
  std::thread other([&] {
    EXPECT_TRUE(rt->CopyOnDevice(1, out.data(), *dev, kBytes, MemcpyKind::kDeviceToHost).ok());
    EXPECT_EQ(current_device(), 0);
  });
  other.join();

  ASSERT_TRUE(rt->SetDevice(0).ok());
  EXPECT_TRUE(rt->FreeDevice(*dev).ok());
}

TEST(CudaRuntime, BadArgumentsAreInvalidArgumentNotACrash) {
  auto rt = OpenCudaRuntime(FakeCudart());
  ASSERT_TRUE(rt->usable()) << rt->reason();
  char buf[8] = {};
  EXPECT_EQ(rt->CopyToHost(nullptr, buf, 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt->CopyToDevice(buf, nullptr, 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt->Memcpy(buf, buf, 8, static_cast<MemcpyKind>(9)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(rt->AllocDevice(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt->AllocPinnedHost(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt->RegisterHost(nullptr, 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt->RegisterHost(buf, 0).code(), StatusCode::kInvalidArgument);
  Status s = rt->SetDevice(1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("1 CUDA devices"));
}

TEST(CudaRuntime, PinnedHostMemoryAndItsErrors) {
  auto rt = OpenCudaRuntime(FakeCudart());
  ASSERT_TRUE(rt->usable()) << rt->reason();
  Result<void*> pinned = rt->AllocPinnedHost(1 << 20);
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  std::memset(*pinned, 0xab, 1 << 20);
  EXPECT_TRUE(rt->FreePinnedHost(*pinned).ok());

  int not_pinned = 0;
  Status s = rt->FreePinnedHost(&not_pinned);
  EXPECT_EQ(s.code(), StatusCode::kDeviceError);
  EXPECT_EQ(s.message(), "cudaFreeHost failed: error 1 (invalid argument)");

  ScopedEnv fail("FAKE_CUDA_FAIL", "cudaMallocHost");
  ScopedEnv code("FAKE_CUDA_FAIL_CODE", "2");
  Result<void*> failed = rt->AllocPinnedHost(1 << 20);
  EXPECT_EQ(failed.status().code(), StatusCode::kDeviceError);
  EXPECT_EQ(failed.status().message(),
            "cudaMallocHost(1048576 bytes) failed: error 2 (out of memory)");
}

TEST(CudaRuntime, HostRegistrationAndItsErrors) {
  auto rt = OpenCudaRuntime(FakeCudart());
  ASSERT_TRUE(rt->usable()) << rt->reason();
  std::vector<char> buf(8192);
  ASSERT_TRUE(rt->RegisterHost(buf.data(), buf.size()).ok());
  Status twice = rt->RegisterHost(buf.data(), buf.size());
  EXPECT_EQ(twice.code(), StatusCode::kDeviceError);
  EXPECT_THAT(twice.message(), HasSubstr("cudaHostRegister(8192 bytes) failed: error 712"));
  EXPECT_TRUE(rt->UnregisterHost(buf.data()).ok());
  Status again = rt->UnregisterHost(buf.data());
  EXPECT_EQ(again.code(), StatusCode::kDeviceError);
  EXPECT_THAT(again.message(), HasSubstr("cudaHostUnregister failed: error 713"));
}

TEST(CudaRuntime, FreshInstancesAreIndependent) {
  std::unique_ptr<DeviceRuntime> unusable;
  {
    ScopedEnv count("FAKE_CUDA_DEVICE_COUNT", "0");
    unusable = OpenCudaRuntime(FakeCudart());
  }
  auto available = OpenCudaRuntime(FakeCudart());
  EXPECT_EQ(unusable->state(), RuntimeState::kUnusable);
  EXPECT_EQ(available->state(), RuntimeState::kAvailable);
}

}  // namespace
}  // namespace kvport
