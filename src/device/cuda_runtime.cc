// SPDX-License-Identifier: Apache-2.0
// The CUDA runtime, reached through libcudart with dlopen/dlsym; never linked.
//
// Only the handful of calls kvport needs are resolved, by their stable C names; their
// signatures have not changed since CUDA 4. cudaRuntimeGetVersion and cudaDriverGetVersion are
// optional: without them the version reads as unknown.
#include <fmt/core.h>

#include "device/dynamic_library.h"
#include "device/runtime_util.h"
#include "kvport/device.h"

namespace kvport {
namespace {

using device_internal::CheckBuffer;
using device_internal::CheckCopyArguments;
using device_internal::DescribeCopy;
using device_internal::DescribeLibrary;
using device_internal::DescribeSized;
using device_internal::DeviceStreams;
using device_internal::JoinNames;
using device_internal::OpenedLibrary;
using device_internal::ResolveSymbol;

using cudaError_t = int;  // an enum in the CUDA headers; int-sized, 0 = cudaSuccess
constexpr cudaError_t kCudaSuccess = 0;
constexpr unsigned kCudaHostRegisterDefault = 0;
constexpr unsigned kCudaStreamNonBlocking = 1;  // no implicit sync with the default stream

struct CudaApi {
  cudaError_t (*get_device_count)(int*) = nullptr;
  const char* (*get_error_string)(cudaError_t) = nullptr;
  cudaError_t (*get_device)(int*) = nullptr;
  cudaError_t (*set_device)(int) = nullptr;
  cudaError_t (*memcpy)(void*, const void*, size_t, int) = nullptr;
  cudaError_t (*stream_create_with_flags)(void**, unsigned) = nullptr;
  cudaError_t (*memcpy_async)(void*, const void*, size_t, int, void*) = nullptr;
  cudaError_t (*stream_synchronize)(void*) = nullptr;
  cudaError_t (*malloc)(void**, size_t) = nullptr;
  cudaError_t (*free)(void*) = nullptr;
  cudaError_t (*malloc_host)(void**, size_t) = nullptr;
  cudaError_t (*free_host)(void*) = nullptr;
  cudaError_t (*host_register)(void*, size_t, unsigned) = nullptr;
  cudaError_t (*host_unregister)(void*) = nullptr;
  // Optional.
  cudaError_t (*runtime_get_version)(int*) = nullptr;
  cudaError_t (*driver_get_version)(int*) = nullptr;
};

// CUDA encodes versions as 1000 * major + 10 * minor.
std::string FormatCudaVersion(int v) {
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

class CudaDeviceRuntime final : public DeviceRuntime {
 public:
  explicit CudaDeviceRuntime(std::string_view library) {
    info_.kind = RuntimeKind::kCuda;
    Open(library);
  }

  const RuntimeInfo& info() const override { return info_; }

  Status SetDevice(int device) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("cudaSetDevice"));
    if (device < 0 || device >= info_.device_count) {
      return Status::InvalidArgument(fmt::format("cudaSetDevice({}): this host has {} CUDA devices",
                                                 device, info_.device_count));
    }
    return Check(fmt::format("cudaSetDevice({})", device), api_.set_device(device));
  }

  Status Memcpy(void* dst, const void* src, size_t bytes, MemcpyKind kind) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("cudaMemcpy"));
    KVPORT_RETURN_IF_ERROR(CheckCopyArguments(dst, src, bytes, kind));
    if (bytes == 0) return Status::Ok();
    return Check(DescribeCopy("cudaMemcpy", kind, bytes),
                 api_.memcpy(dst, src, bytes, static_cast<int>(kind)));
  }

  Status CopyOnDevice(int device, void* dst, const void* src, size_t bytes,
                      MemcpyKind kind) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("cudaMemcpyAsync"));
    KVPORT_RETURN_IF_ERROR(CheckCopyArguments(dst, src, bytes, kind));
    if (bytes == 0) return Status::Ok();
    if (device < 0 || device >= info_.device_count) {
      return Status::InvalidArgument(fmt::format(
          "copy on CUDA device {}: this host has {} CUDA devices", device, info_.device_count));
    }
    int caller_device = 0;
    KVPORT_RETURN_IF_ERROR(Check("cudaGetDevice", api_.get_device(&caller_device)));
    if (caller_device != device) {
      KVPORT_RETURN_IF_ERROR(
          Check(fmt::format("cudaSetDevice({})", device), api_.set_device(device)));
    }
    Status copied = [&]() -> Status {
      KVPORT_ASSIGN_OR_RETURN(void* stream, streams_.Get(device, [&](void** made) {
        return Check("cudaStreamCreateWithFlags",
                     api_.stream_create_with_flags(made, kCudaStreamNonBlocking));
      }));
      KVPORT_RETURN_IF_ERROR(
          Check(DescribeCopy("cudaMemcpyAsync", kind, bytes),
                api_.memcpy_async(dst, src, bytes, static_cast<int>(kind), stream)));
      return Check("cudaStreamSynchronize", api_.stream_synchronize(stream));
    }();
    if (caller_device != device) {
      Status restored =
          Check(fmt::format("cudaSetDevice({}) (the caller's device, restored)", caller_device),
                api_.set_device(caller_device));
      if (copied.ok()) copied = restored;
    }
    return copied;
  }

  Result<void*> AllocDevice(size_t bytes) const override {
    return Allocate("cudaMalloc", api_.malloc, bytes);
  }
  Status FreeDevice(void* ptr) const override { return Free("cudaFree", api_.free, ptr); }

  Result<void*> AllocPinnedHost(size_t bytes) const override {
    return Allocate("cudaMallocHost", api_.malloc_host, bytes);
  }
  Status FreePinnedHost(void* ptr) const override {
    return Free("cudaFreeHost", api_.free_host, ptr);
  }

  Status RegisterHost(void* ptr, size_t bytes) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("cudaHostRegister"));
    KVPORT_RETURN_IF_ERROR(CheckBuffer("cudaHostRegister", ptr, bytes, true));
    return Check(DescribeSized("cudaHostRegister", bytes),
                 api_.host_register(ptr, bytes, kCudaHostRegisterDefault));
  }
  Status UnregisterHost(void* ptr) const override {
    KVPORT_RETURN_IF_ERROR(RequireUsable("cudaHostUnregister"));
    KVPORT_RETURN_IF_ERROR(CheckBuffer("cudaHostUnregister", ptr, 0, false));
    return Check("cudaHostUnregister", api_.host_unregister(ptr));
  }

 private:
  void Open(std::string_view library) {
    std::vector<std::string> candidates;
    if (library.empty()) {
      candidates = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"};
    } else {
      candidates = {std::string(library)};
    }
    OpenedLibrary lib = device_internal::OpenFirstLibrary("libcudart", candidates);
    if (lib.handle == nullptr) {
      info_.state = lib.failure;
      info_.reason = lib.reason;
      return;
    }
    info_.library = lib.name;
    info_.library_path = lib.path;
    const std::string described = DescribeLibrary(lib);

    std::vector<std::string> missing;
    void* h = lib.handle;
    ResolveSymbol(h, "cudaGetDeviceCount", api_.get_device_count, &missing);
    ResolveSymbol(h, "cudaGetErrorString", api_.get_error_string, &missing);
    ResolveSymbol(h, "cudaGetDevice", api_.get_device, &missing);
    ResolveSymbol(h, "cudaSetDevice", api_.set_device, &missing);
    ResolveSymbol(h, "cudaMemcpy", api_.memcpy, &missing);
    ResolveSymbol(h, "cudaStreamCreateWithFlags", api_.stream_create_with_flags, &missing);
    ResolveSymbol(h, "cudaMemcpyAsync", api_.memcpy_async, &missing);
    ResolveSymbol(h, "cudaStreamSynchronize", api_.stream_synchronize, &missing);
    ResolveSymbol(h, "cudaMalloc", api_.malloc, &missing);
    ResolveSymbol(h, "cudaFree", api_.free, &missing);
    ResolveSymbol(h, "cudaMallocHost", api_.malloc_host, &missing);
    ResolveSymbol(h, "cudaFreeHost", api_.free_host, &missing);
    ResolveSymbol(h, "cudaHostRegister", api_.host_register, &missing);
    ResolveSymbol(h, "cudaHostUnregister", api_.host_unregister, &missing);
    ResolveSymbol(h, "cudaRuntimeGetVersion", api_.runtime_get_version, nullptr);
    ResolveSymbol(h, "cudaDriverGetVersion", api_.driver_get_version, nullptr);
    if (!missing.empty()) {
      info_.state = RuntimeState::kUnusable;
      info_.reason =
          fmt::format("{} lacks {}, required by kvport (an older or incomplete CUDA runtime)",
                      described, JoinNames(missing));
      return;
    }

    int version = 0;
    if (api_.runtime_get_version != nullptr && api_.runtime_get_version(&version) == kCudaSuccess &&
        version > 0) {
      info_.version = FormatCudaVersion(version);
    }
    int driver = 0;
    if (api_.driver_get_version != nullptr && api_.driver_get_version(&driver) == kCudaSuccess) {
      info_.driver_version = driver > 0 ? FormatCudaVersion(driver) : "none";
    }

    int count = 0;
    const cudaError_t err = api_.get_device_count(&count);
    if (err != kCudaSuccess) {
      info_.state = RuntimeState::kUnusable;
      info_.reason = fmt::format("{} loaded but cudaGetDeviceCount failed: error {} ({})",
                                 described, err, ErrorString(err));
      return;
    }
    if (count <= 0) {
      info_.state = RuntimeState::kUnusable;
      info_.reason =
          fmt::format("{} loaded but cudaGetDeviceCount reports {} devices", described, count);
      return;
    }
    info_.device_count = count;
    info_.state = RuntimeState::kAvailable;
  }

  std::string ErrorString(cudaError_t err) const {
    const char* text = api_.get_error_string != nullptr ? api_.get_error_string(err) : nullptr;
    return text != nullptr ? text : "no error string";
  }

  Status Check(std::string_view call, cudaError_t err) const {
    if (err == kCudaSuccess) return Status::Ok();
    return device_internal::RuntimeCallError(call, err, ErrorString(err));
  }

  Result<void*> Allocate(std::string_view function, cudaError_t (*fn)(void**, size_t),
                         size_t bytes) const {
    KVPORT_RETURN_IF_ERROR(RequireUsable(function));
    if (bytes == 0) return Status::InvalidArgument(fmt::format("{}: size is 0 bytes", function));
    void* ptr = nullptr;
    KVPORT_RETURN_IF_ERROR(Check(DescribeSized(function, bytes), fn(&ptr, bytes)));
    if (ptr == nullptr)
      return Status::DeviceError(
          fmt::format("{} returned success and a null pointer", DescribeSized(function, bytes)));
    return ptr;
  }

  Status Free(std::string_view function, cudaError_t (*fn)(void*), void* ptr) const {
    KVPORT_RETURN_IF_ERROR(RequireUsable(function));
    if (ptr == nullptr) return Status::Ok();  // like free(nullptr)
    return Check(function, fn(ptr));
  }

  RuntimeInfo info_;
  CudaApi api_;
  mutable DeviceStreams streams_;
};

}  // namespace

std::unique_ptr<DeviceRuntime> OpenCudaRuntime(std::string_view library) {
  return std::make_unique<CudaDeviceRuntime>(library);
}

}  // namespace kvport
