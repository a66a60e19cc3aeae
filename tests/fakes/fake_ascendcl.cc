// SPDX-License-Identifier: Apache-2.0
// fake_ascendcl: the ACL calls kvport uses, over host memory, for tests on hosts without an
// Ascend NPU. Like real ACL, aclInit twice returns ACL_ERROR_REPEAT_INITIALIZE and a thread
// must aclrtSetDevice before it copies or allocates (else ACL_ERROR_RT_CONTEXT_NULL).
//
// Knobs (environment, read at each call):
//   FAKE_ACL_DEVICE_COUNT  devices aclrtGetDeviceCount reports (default 1)
//   FAKE_ACL_FAIL          a symbol name (or comma-separated names) that returns an error
//   FAKE_ACL_FAIL_CODE     the error such a call returns (default 100000, invalid param)
// Built a second time with FAKE_OMIT_HOST_REGISTER defined, it lacks aclrtHostRegister and
// aclrtHostUnregister (an older CANN release).
//
// A stream belongs to the device current when it was made, and a copy on a stream of another
// device fails. Tests read what copies ran where: fake_acl_copies(0) counts aclrtMemcpy copies
// (the default stream's), fake_acl_copies(1) those on streams.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fake_memory.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using aclError = int;
constexpr aclError kSuccess = 0;
constexpr aclError kInvalidParam = 100000;
constexpr aclError kRepeatInitialize = 100002;
constexpr aclError kInvalidDeviceId = 107001;
constexpr aclError kContextNull = 107002;

std::atomic<bool> g_initialized{false};
thread_local int t_current_device = -1;
thread_local std::string t_last_error;

fake::Ranges& DeviceMemory() {
  static fake::Ranges r;
  return r;
}
fake::Ranges& HostMemory() {
  static fake::Ranges r;
  return r;
}
[[maybe_unused]] fake::Ranges& RegisteredMemory() {
  static fake::Ranges r;
  return r;
}

aclError Error(aclError code, const char* message) {
  t_last_error = std::string("fake ACL: ") + message;
  return code;
}

// Returns the injected error when FAKE_ACL_FAIL names `symbol`, else kSuccess.
aclError Injected(const char* symbol) {
  if (!fake::ShouldFail("FAKE_ACL_FAIL", symbol)) return kSuccess;
  const aclError code = static_cast<aclError>(fake::EnvInt("FAKE_ACL_FAIL_CODE", kInvalidParam));
  t_last_error = std::string("fake ACL: ") + symbol + " failed as FAKE_ACL_FAIL asked";
  return code;
}

aclError RequireContext() {
  if (t_current_device < 0) return Error(kContextNull, "no context on this thread");
  return kSuccess;
}

std::atomic<long> g_default_stream_copies{0};
std::atomic<long> g_stream_copies{0};

struct Stream {
  int device;
};
fake::Ranges& Streams() {
  static fake::Ranges r;
  return r;
}

// kind: 0 H2H, 1 H2D, 2 D2H, 3 D2D.
aclError Copy(void* dst, size_t dest_max, const void* src, size_t count, int kind) {
  if (dst == nullptr || src == nullptr) return Error(kInvalidParam, "null pointer");
  if (count > dest_max) return Error(kInvalidParam, "count exceeds destMax");
  if (!fake::CopyKindFits(kind, DeviceMemory().Covers(dst, count),
                          DeviceMemory().Covers(src, count),
                          /*default_allowed=*/false)) {
    return Error(kInvalidParam, "pointers do not match the copy kind");
  }
  std::memmove(dst, src, count);
  return kSuccess;
}

// kSuccess when `stream` was made here on the calling thread's current device.
aclError CheckStream(void* stream) {
  if (stream == nullptr || !Streams().Touches(stream))
    return Error(kInvalidParam, "not a stream made by aclrtCreateStream");
  if (static_cast<const Stream*>(stream)->device != t_current_device)
    return Error(kInvalidParam, "the stream belongs to another device");
  return kSuccess;
}

uint32_t DeviceCount() {
  const long n = fake::EnvInt("FAKE_ACL_DEVICE_COUNT", 1);
  return n > 0 ? static_cast<uint32_t>(n) : 0;
}

}  // namespace

FAKE_EXPORT aclError aclInit(const char* /*config_path*/) {
  if (aclError e = Injected("aclInit")) return e;
  if (g_initialized.exchange(true)) return Error(kRepeatInitialize, "repeat initialize");
  return kSuccess;
}

FAKE_EXPORT const char* aclGetRecentErrMsg() {
  return t_last_error.c_str();
}

FAKE_EXPORT aclError aclrtGetVersion(int32_t* major, int32_t* minor, int32_t* patch) {
  if (major == nullptr || minor == nullptr || patch == nullptr)
    return Error(kInvalidParam, "null version pointer");
  *major = 1;
  *minor = 0;
  *patch = 0;
  return kSuccess;
}

FAKE_EXPORT aclError aclrtGetDeviceCount(uint32_t* count) {
  if (count == nullptr) return Error(kInvalidParam, "null count");
  *count = 0;
  if (aclError e = Injected("aclrtGetDeviceCount")) return e;
  *count = DeviceCount();
  return kSuccess;
}

FAKE_EXPORT aclError aclrtSetDevice(int32_t device) {
  if (aclError e = Injected("aclrtSetDevice")) return e;
  if (device < 0 || static_cast<uint32_t>(device) >= DeviceCount())
    return Error(kInvalidDeviceId, "invalid device id");
  t_current_device = device;
  return kSuccess;
}

FAKE_EXPORT aclError aclrtGetDevice(int32_t* device) {
  if (device == nullptr) return Error(kInvalidParam, "null device");
  if (aclError e = Injected("aclrtGetDevice")) return e;
  if (aclError e = RequireContext()) return e;
  *device = t_current_device;
  return kSuccess;
}

FAKE_EXPORT aclError aclrtMemcpy(void* dst, size_t dest_max, const void* src, size_t count,
                                 int kind) {
  if (aclError e = Injected("aclrtMemcpy")) return e;
  if (aclError e = RequireContext()) return e;
  const aclError err = Copy(dst, dest_max, src, count, kind);
  if (err == kSuccess) g_default_stream_copies.fetch_add(1);
  return err;
}

FAKE_EXPORT aclError aclrtCreateStream(void** stream) {
  if (stream == nullptr) return Error(kInvalidParam, "null stream");
  if (aclError e = Injected("aclrtCreateStream")) return e;
  if (aclError e = RequireContext()) return e;
  Stream* s = fake::KeepForever(Stream{t_current_device});
  Streams().Add(s, sizeof(Stream));
  *stream = s;
  return kSuccess;
}

FAKE_EXPORT aclError aclrtMemcpyAsync(void* dst, size_t dest_max, const void* src, size_t count,
                                      int kind, void* stream) {
  if (aclError e = Injected("aclrtMemcpyAsync")) return e;
  if (aclError e = RequireContext()) return e;
  if (aclError e = CheckStream(stream)) return e;
  const aclError err = Copy(dst, dest_max, src, count, kind);
  if (err == kSuccess) g_stream_copies.fetch_add(1);
  return err;
}

FAKE_EXPORT aclError aclrtSynchronizeStream(void* stream) {
  if (aclError e = Injected("aclrtSynchronizeStream")) return e;
  if (aclError e = RequireContext()) return e;
  return CheckStream(stream);  // every copy here completed when it was queued
}

// For tests: aclrtMemcpy copies (0) or copies on streams (1) so far.
FAKE_EXPORT long fake_acl_copies(int on_streams) {
  return on_streams != 0 ? g_stream_copies.load() : g_default_stream_copies.load();
}

FAKE_EXPORT aclError aclrtMalloc(void** ptr, size_t size, int /*policy*/) {
  if (ptr == nullptr || size == 0) return Error(kInvalidParam, "bad aclrtMalloc arguments");
  if (aclError e = Injected("aclrtMalloc")) return e;
  if (aclError e = RequireContext()) return e;
  *ptr = std::malloc(size);
  DeviceMemory().Add(*ptr, size);
  return kSuccess;
}

FAKE_EXPORT aclError aclrtFree(void* ptr) {
  if (aclError e = Injected("aclrtFree")) return e;
  if (!DeviceMemory().Remove(ptr)) return Error(kInvalidParam, "not device memory");
  std::free(ptr);
  return kSuccess;
}

FAKE_EXPORT aclError aclrtMallocHost(void** ptr, size_t size) {
  if (ptr == nullptr || size == 0) return Error(kInvalidParam, "bad aclrtMallocHost arguments");
  if (aclError e = Injected("aclrtMallocHost")) return e;
  if (aclError e = RequireContext()) return e;
  *ptr = std::malloc(size);
  HostMemory().Add(*ptr, size);
  return kSuccess;
}

FAKE_EXPORT aclError aclrtFreeHost(void* ptr) {
  if (aclError e = Injected("aclrtFreeHost")) return e;
  if (!HostMemory().Remove(ptr)) return Error(kInvalidParam, "not pinned host memory");
  std::free(ptr);
  return kSuccess;
}

#ifndef FAKE_OMIT_HOST_REGISTER
FAKE_EXPORT aclError aclrtHostRegister(void* ptr, uint64_t size, int /*type*/, void** dev_ptr) {
  if (aclError e = Injected("aclrtHostRegister")) return e;
  if (aclError e = RequireContext()) return e;
  if (ptr == nullptr || size == 0 || dev_ptr == nullptr)
    return Error(kInvalidParam, "bad aclrtHostRegister arguments");
  if (RegisteredMemory().Touches(ptr)) return Error(kInvalidParam, "already registered");
  RegisteredMemory().Add(ptr, static_cast<size_t>(size));
  *dev_ptr = ptr;
  return kSuccess;
}

FAKE_EXPORT aclError aclrtHostUnregister(void* ptr) {
  if (aclError e = Injected("aclrtHostUnregister")) return e;
  if (!RegisteredMemory().Remove(ptr)) return Error(kInvalidParam, "not registered");
  return kSuccess;
}
#endif
