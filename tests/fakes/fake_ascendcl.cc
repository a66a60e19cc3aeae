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
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

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

// kind: 0 H2H, 1 H2D, 2 D2H, 3 D2D.
FAKE_EXPORT aclError aclrtMemcpy(void* dst, size_t dest_max, const void* src, size_t count,
                                 int kind) {
  if (aclError e = Injected("aclrtMemcpy")) return e;
  if (aclError e = RequireContext()) return e;
  if (dst == nullptr || src == nullptr) return Error(kInvalidParam, "null pointer");
  if (count > dest_max) return Error(kInvalidParam, "count exceeds destMax");
  const bool dst_device = DeviceMemory().Covers(dst, count);
  const bool src_device = DeviceMemory().Covers(src, count);
  bool ok = false;
  switch (kind) {
    case 0:
      ok = !dst_device && !src_device;
      break;
    case 1:
      ok = dst_device && !src_device;
      break;
    case 2:
      ok = !dst_device && src_device;
      break;
    case 3:
      ok = dst_device && src_device;
      break;
    default:
      ok = false;
  }
  if (!ok) return Error(kInvalidParam, "pointers do not match the copy kind");
  std::memmove(dst, src, count);
  return kSuccess;
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
