// SPDX-License-Identifier: Apache-2.0
// fake_cudart: the libcudart calls kvport uses, over host memory, for tests on hosts without a
// GPU. "Device memory" is heap memory the fake tracks; copies are checked against it.
//
// Knobs (environment, read at each call, so tests setenv before opening a fresh runtime):
//   FAKE_CUDA_DEVICE_COUNT   devices cudaGetDeviceCount reports (default 1; 0 = success, none)
//   FAKE_CUDA_FAIL           a symbol name (or comma-separated names) that returns an error
//   FAKE_CUDA_FAIL_CODE      the error such a call returns (default 1, cudaErrorInvalidValue)
//   FAKE_CUDA_VERSION        what cudaRuntimeGetVersion reports (default 13000)
//   FAKE_CUDA_DRIVER_VERSION what cudaDriverGetVersion reports (default 13000; 0 = no driver)
// Built a second time with FAKE_OMIT_CUDAMEMCPY defined, it lacks cudaMemcpy (an "older
// runtime" missing a required symbol).
//
// Like CUDA, each thread has a current device (0 until cudaSetDevice), a stream belongs to the
// device current when it was made, and a copy on a stream of another device fails. Tests read
// what copies ran where: fake_cuda_copies(0) counts those on the default stream (cudaMemcpy, or
// cudaMemcpyAsync on stream 0), fake_cuda_copies(1) those on non-blocking streams.
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "fake_memory.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using cudaError_t = int;
constexpr cudaError_t kSuccess = 0;
constexpr cudaError_t kInvalidValue = 1;
constexpr cudaError_t kMemoryAllocation = 2;
constexpr cudaError_t kInvalidDevice = 101;
constexpr cudaError_t kInvalidResourceHandle = 400;
constexpr cudaError_t kAlreadyRegistered = 712;
constexpr cudaError_t kNotRegistered = 713;

fake::Ranges& DeviceMemory() {
  static fake::Ranges r;
  return r;
}
fake::Ranges& PinnedMemory() {
  static fake::Ranges r;
  return r;
}
fake::Ranges& RegisteredMemory() {
  static fake::Ranges r;
  return r;
}

thread_local int t_current_device = 0;
std::atomic<long> g_default_stream_copies{0};
std::atomic<long> g_nonblocking_stream_copies{0};

struct Stream {
  int device;
  unsigned flags;
};
fake::Ranges& Streams() {
  static fake::Ranges r;
  return r;
}

bool Fails(const char* symbol) {
  return fake::ShouldFail("FAKE_CUDA_FAIL", symbol);
}
cudaError_t FailCode() {
  return static_cast<cudaError_t>(fake::EnvInt("FAKE_CUDA_FAIL_CODE", kInvalidValue));
}
int DeviceCount() {
  return static_cast<int>(fake::EnvInt("FAKE_CUDA_DEVICE_COUNT", 1));
}

}  // namespace

FAKE_EXPORT const char* cudaGetErrorString(cudaError_t err) {
  switch (err) {
    case 0:
      return "no error";
    case 1:
      return "invalid argument";
    case 2:
      return "out of memory";
    case 35:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case 100:
      return "no CUDA-capable device is detected";
    case 101:
      return "invalid device ordinal";
    case 400:
      return "invalid resource handle";
    case 712:
      return "part or all of the requested memory range is already mapped";
    case 713:
      return "pointer does not correspond to a registered memory region";
    default:
      return "unrecognized error code";
  }
}

FAKE_EXPORT cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return kInvalidValue;
  *count = 0;
  if (Fails("cudaGetDeviceCount")) return FailCode();
  *count = DeviceCount();
  return kSuccess;
}

FAKE_EXPORT cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return kInvalidValue;
  if (Fails("cudaRuntimeGetVersion")) return FailCode();
  *version = static_cast<int>(fake::EnvInt("FAKE_CUDA_VERSION", 13000));
  return kSuccess;
}

FAKE_EXPORT cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return kInvalidValue;
  if (Fails("cudaDriverGetVersion")) return FailCode();
  *version = static_cast<int>(fake::EnvInt("FAKE_CUDA_DRIVER_VERSION", 13000));
  return kSuccess;
}

FAKE_EXPORT cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return kInvalidValue;
  if (Fails("cudaGetDevice")) return FailCode();
  *device = t_current_device;
  return kSuccess;
}

FAKE_EXPORT cudaError_t cudaSetDevice(int device) {
  if (Fails("cudaSetDevice")) return FailCode();
  if (device < 0 || device >= DeviceCount()) return kInvalidDevice;
  t_current_device = device;
  return kSuccess;
}

namespace {

// kind: 0 H2H, 1 H2D, 2 D2H, 3 D2D, 4 default (inferred, anything goes).
cudaError_t Copy(void* dst, const void* src, size_t count, int kind) {
  if (count == 0) return kSuccess;
  if (dst == nullptr || src == nullptr) return kInvalidValue;
  if (!fake::CopyKindFits(kind, DeviceMemory().Covers(dst, count),
                          DeviceMemory().Covers(src, count),
                          /*default_allowed=*/true)) {
    return kInvalidValue;
  }
  std::memmove(dst, src, count);
  return kSuccess;
}

// A stream made here on the calling thread's current device, or null (stream 0 is not one).
const Stream* OwnStream(void* stream) {
  if (stream == nullptr || !Streams().Touches(stream)) return nullptr;
  const Stream* s = static_cast<const Stream*>(stream);
  return s->device == t_current_device ? s : nullptr;
}

}  // namespace

#ifndef FAKE_OMIT_CUDAMEMCPY
FAKE_EXPORT cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, int kind) {
  if (Fails("cudaMemcpy")) return FailCode();
  const cudaError_t err = Copy(dst, src, count, kind);
  if (err == kSuccess) g_default_stream_copies.fetch_add(1);
  return err;
}
#endif

FAKE_EXPORT cudaError_t cudaStreamCreateWithFlags(void** stream, unsigned flags) {
  if (stream == nullptr) return kInvalidValue;
  if (Fails("cudaStreamCreateWithFlags")) return FailCode();
  Stream* s = fake::KeepForever(Stream{t_current_device, flags});
  Streams().Add(s, sizeof(Stream));
  *stream = s;
  return kSuccess;
}

FAKE_EXPORT cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, int kind,
                                        void* stream) {
  if (Fails("cudaMemcpyAsync")) return FailCode();
  const Stream* own = OwnStream(stream);
  if (stream != nullptr && own == nullptr) return kInvalidResourceHandle;
  const cudaError_t err = Copy(dst, src, count, kind);
  if (err == kSuccess) {
    (own != nullptr && (own->flags & 1) != 0 ? g_nonblocking_stream_copies
                                             : g_default_stream_copies)
        .fetch_add(1);
  }
  return err;
}

FAKE_EXPORT cudaError_t cudaStreamSynchronize(void* stream) {
  if (Fails("cudaStreamSynchronize")) return FailCode();
  if (stream != nullptr && OwnStream(stream) == nullptr) return kInvalidResourceHandle;
  return kSuccess;  // every copy here completed when it was queued
}

// For tests: copies on the default stream (0) or on non-blocking streams (1) so far.
FAKE_EXPORT long fake_cuda_copies(int nonblocking) {
  return nonblocking != 0 ? g_nonblocking_stream_copies.load() : g_default_stream_copies.load();
}

FAKE_EXPORT cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (ptr == nullptr) return kInvalidValue;
  if (Fails("cudaMalloc")) return FailCode();
  *ptr = std::malloc(size);
  if (*ptr == nullptr) return kMemoryAllocation;
  DeviceMemory().Add(*ptr, size);
  return kSuccess;
}

FAKE_EXPORT cudaError_t cudaFree(void* ptr) {
  if (Fails("cudaFree")) return FailCode();
  if (ptr == nullptr) return kSuccess;
  if (!DeviceMemory().Remove(ptr)) return kInvalidValue;
  std::free(ptr);
  return kSuccess;
}

FAKE_EXPORT cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (ptr == nullptr) return kInvalidValue;
  if (Fails("cudaMallocHost")) return FailCode();
  *ptr = std::malloc(size);
  if (*ptr == nullptr) return kMemoryAllocation;
  PinnedMemory().Add(*ptr, size);
  return kSuccess;
}

FAKE_EXPORT cudaError_t cudaFreeHost(void* ptr) {
  if (Fails("cudaFreeHost")) return FailCode();
  if (ptr == nullptr) return kSuccess;
  if (!PinnedMemory().Remove(ptr)) return kInvalidValue;
  std::free(ptr);
  return kSuccess;
}

FAKE_EXPORT cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int /*flags*/) {
  if (Fails("cudaHostRegister")) return FailCode();
  if (ptr == nullptr || size == 0) return kInvalidValue;
  if (RegisteredMemory().Touches(ptr)) return kAlreadyRegistered;
  RegisteredMemory().Add(ptr, size);
  return kSuccess;
}

FAKE_EXPORT cudaError_t cudaHostUnregister(void* ptr) {
  if (Fails("cudaHostUnregister")) return FailCode();
  if (!RegisteredMemory().Remove(ptr)) return kNotRegistered;
  return kSuccess;
}
